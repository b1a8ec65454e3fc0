#!/usr/bin/python3
"""Process test of SCRAM-SHA-256 (RFC 5802/7677) against a real estuaryd,
over AMQP SASL and MQTT 5 enhanced authentication (MQTT 5.0 section 4.12).

The client side of SCRAM is Authen::SCRAM::Client (Debian's
libauthen-scram-perl), an implementation the project does not write: a Perl
child computes client-first, client-final and checks the server-final. The
frames around it are written here: AMQP SASL frames encoded and decoded by
Proton Python's codec (proton.Data), MQTT 5 packets by hand. (Proton
Python itself cannot run SCRAM on Debian 12: its Proton has no Cyrus SASL,
proton.SASL.extended() is False.) Checks, each printed "ok: ..." or
"FAIL: ...":

  - `estuaryctl passwd --scram` writes a line estuaryd accepts;
  - AMQP: SCRAM-SHA-256 is offered; the right password ends in outcome ok
    with a server-final the client verifies, and the AMQP open that follows
    is answered; a wrong password ends in outcome 1 (auth); PLAIN with the
    password of a SCRAM entry works (Proton Python's BlockingConnection);
  - MQTT 5: CONNECT with Authentication Method SCRAM-SHA-256 -> AUTH 0x18
    -> AUTH 0x18 -> CONNACK 0x00 whose Authentication Data is the verified
    server-final; re-authentication (AUTH 0x19) ends in AUTH 0x00; a wrong
    password is CONNACK 0x87 and a clean close; an unknown method 0x8C; a
    $7$ user cannot run SCRAM (0x87); AUTH after a CONNECT without a method
    is DISCONNECT 0x82; AUTH in MQTT 3.1.1 closes the connection;
  - SCRAM failures count in estuary_auth_failures_total;
  - SIGHUP: a SCRAM user added to the file can then log in.

Every wait is on an observed event with a deadline; nothing sleeps.

usage: /usr/bin/python3 scram_process.py path/to/estuaryd path/to/estuaryctl
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, Estuaryd, check, wait_for  # noqa: E402

ESTUARYD, ESTUARYCTL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="estuary-scram-")
METHOD = b"SCRAM-SHA-256"

PERL_CLIENT = r"""
use strict; use warnings; use Authen::SCRAM::Client;
$| = 1;
my $client = Authen::SCRAM::Client->new(username => $ARGV[0], password => $ARGV[1], digest => 'SHA-256');
print $client->first_msg(), "\n";
my $server_first = <STDIN>; chomp $server_first;
my $final = eval { $client->final_msg($server_first) };
print defined $final ? $final : "error: $@", "\n";
my $server_final = <STDIN>; chomp $server_final;
my $valid = eval { $client->validate($server_final) };
print $valid ? "valid\n" : "invalid\n";
"""


class ScramClient:
    """Authen::SCRAM::Client in a Perl child: one exchange."""

    def __init__(self, user, password):
        self.child = subprocess.Popen(["perl", "-e", PERL_CLIENT, user, password], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def _line(self):
        return self.child.stdout.readline().rstrip("\n")

    def first(self):
        return self._line().encode()

    def final(self, server_first):
        self.child.stdin.write(server_first.decode() + "\n")
        self.child.stdin.flush()
        return self._line().encode()

    def validate(self, server_final):
        self.child.stdin.write(server_final.decode() + "\n")
        self.child.stdin.flush()
        valid = self._line() == "valid"
        self.child.wait(DEADLINE)
        return valid

    def close(self):
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()


def recv_exact(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("closed after %d of %d bytes" % (len(data), count))
        data += chunk
    return data


def closed_by_peer(sock):
    """True once the server closed (EOF or reset) within DEADLINE."""
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, EOFError):
        return True
    except socket.timeout:
        return False


# --- AMQP SASL (AMQP 1.0 section 5.3), framed here, encoded by Proton --------------------

def amqp_frame(frame_type, body):
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


def amqp_performative(code, fields):
    from proton import Data, Described, ulong
    data = Data()
    data.put_object(Described(ulong(code), fields))
    return data.encode()


def amqp_read(sock):
    """(descriptor code, list of fields) of the next frame."""
    from proton import Data
    size, doff, _, _ = struct.unpack(">IBBH", recv_exact(sock, 8))
    body = recv_exact(sock, size - 8)[doff * 4 - 8:]
    data = Data()
    data.decode(body)
    data.rewind()
    data.next()
    described = data.get_object()
    return int(described.descriptor), list(described.value)


def amqp_scram(broker, user, password, then_open=False):
    """(outcome code, server-final valid?, open answered?) of one SASL SCRAM-SHA-256 exchange."""
    from proton import symbol
    client = ScramClient(user, password)
    sock = socket.create_connection((broker.host, broker.amqp_port), timeout=DEADLINE)
    try:
        sock.sendall(b"AMQP\x03\x01\x00\x00")
        if recv_exact(sock, 8) != b"AMQP\x03\x01\x00\x00":
            return None, False, False
        code, fields = amqp_read(sock)
        mechanisms = [str(m) for m in fields[0]] if not isinstance(fields[0], symbol) else [str(fields[0])]
        if code != 0x40 or "SCRAM-SHA-256" not in mechanisms:
            return None, False, False
        sock.sendall(amqp_frame(1, amqp_performative(0x41, [symbol("SCRAM-SHA-256"), client.first()])))
        code, fields = amqp_read(sock)
        if code != 0x42:
            return None, False, False
        sock.sendall(amqp_frame(1, amqp_performative(0x43, [client.final(bytes(fields[0]))])))
        code, fields = amqp_read(sock)
        if code != 0x44:
            return None, False, False
        outcome = int(fields[0])
        additional = bytes(fields[1]) if len(fields) > 1 and fields[1] is not None else b""
        valid = outcome == 0 and client.validate(additional)
        opened = False
        if then_open and outcome == 0:
            sock.sendall(b"AMQP\x00\x01\x00\x00")
            sock.sendall(amqp_frame(0, amqp_performative(0x10, ["scram-process"])))
            opened = recv_exact(sock, 8) == b"AMQP\x00\x01\x00\x00" and amqp_read(sock)[0] == 0x10
        return outcome, valid, opened
    finally:
        client.close()
        sock.close()


# --- MQTT 5 (hand-framed) ---------------------------------------------------------------

def vbi(value):
    out = b""
    while True:
        digit, value = value % 128, value // 128
        out += bytes([digit | (0x80 if value else 0)])
        if not value:
            return out


def mqtt_string(data):
    return struct.pack(">H", len(data)) + data


def auth_properties(method, data):
    properties = b""
    if method is not None:
        properties += b"\x15" + mqtt_string(method)
    if data is not None:
        properties += b"\x16" + mqtt_string(data)
    return vbi(len(properties)) + properties


def mqtt_connect(client_id, method=None, data=None, user=None, password=None, version=5):
    flags = 0x02 | (0x80 if user else 0) | (0x40 if password else 0)
    body = mqtt_string(b"MQTT") + bytes([version, flags]) + b"\x00\x3c"
    if version == 5:
        body += auth_properties(method, data)
    body += mqtt_string(client_id)
    if user:
        body += mqtt_string(user)
    if password:
        body += mqtt_string(password)
    return b"\x10" + vbi(len(body)) + body


def mqtt_auth(reason, method, data):
    body = bytes([reason]) + auth_properties(method, data)
    return b"\xf0" + vbi(len(body)) + body


def read_vbi(sock):
    value, shift = 0, 0
    while True:
        byte = recv_exact(sock, 1)[0]
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value


def parse_properties(data):
    """{id: value} of an MQTT 5 property list (section 2.2.2.2)."""
    sizes = {1: 1, 0x17: 1, 0x19: 1, 0x24: 1, 0x25: 1, 0x28: 1, 0x29: 1, 0x2A: 1, 0x13: 2, 0x21: 2, 0x22: 2,
             0x23: 2, 0x02: 4, 0x11: 4, 0x18: 4, 0x27: 4}
    properties, i = {}, 0
    while i < len(data):
        identifier = data[i]
        i += 1
        if identifier in sizes:
            properties[identifier] = int.from_bytes(data[i:i + sizes[identifier]], "big")
            i += sizes[identifier]
        elif identifier == 0x0B:
            while data[i] & 0x80:
                i += 1
            i += 1
        elif identifier == 0x26:
            for _ in range(2):
                length = int.from_bytes(data[i:i + 2], "big")
                i += 2 + length
        else:  # strings and binary data
            length = int.from_bytes(data[i:i + 2], "big")
            properties[identifier] = data[i + 2:i + 2 + length]
            i += 2 + length
    return properties


def mqtt_read(sock):
    """(packet type, reason code, properties) of the next CONNACK, AUTH or DISCONNECT."""
    first = recv_exact(sock, 1)[0]
    body = recv_exact(sock, read_vbi(sock))
    packet_type = first >> 4
    offset = 1 if packet_type == 2 else 0  # CONNACK: acknowledge flags first
    if packet_type == 13:
        return packet_type, None, {}
    if len(body) <= offset:
        return packet_type, 0, {}
    reason = body[offset]
    rest = body[offset + 1:]
    properties = {}
    if rest:
        length, used = 0, 0
        shift = 0
        while True:
            byte = rest[used]
            used += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        properties = parse_properties(rest[used:used + length])
    return packet_type, reason, properties


def mqtt_open(broker):
    return socket.create_connection((broker.host, broker.mqtt_port), timeout=DEADLINE)


def mqtt_scram(broker, user, password, client_id=b"scram-client"):
    """(CONNACK reason, server-final valid?, socket) of CONNECT + AUTH with SCRAM-SHA-256."""
    client = ScramClient(user, password)
    sock = mqtt_open(broker)
    try:
        sock.sendall(mqtt_connect(client_id, METHOD, client.first()))
        packet_type, reason, properties = mqtt_read(sock)
        if packet_type == 2:
            return reason, False, sock
        if packet_type != 15 or reason != 0x18 or properties.get(0x15) != METHOD:
            return None, False, sock
        sock.sendall(mqtt_auth(0x18, METHOD, client.final(properties[0x16])))
        packet_type, reason, properties = mqtt_read(sock)
        if packet_type != 2:
            return None, False, sock
        valid = reason == 0 and properties.get(0x15) == METHOD and client.validate(properties.get(0x16, b""))
        return reason, valid, sock
    finally:
        client.close()


def mqtt_reauthenticate(sock, user, password):
    """The reason code of the AUTH that ends a re-authentication, and whether its data verified."""
    client = ScramClient(user, password)
    try:
        sock.sendall(mqtt_auth(0x19, METHOD, client.first()))
        packet_type, reason, properties = mqtt_read(sock)
        if packet_type != 15 or reason != 0x18:
            return (packet_type, reason), False
        sock.sendall(mqtt_auth(0x18, METHOD, client.final(properties[0x16])))
        packet_type, reason, properties = mqtt_read(sock)
        return (packet_type, reason), packet_type == 15 and client.validate(properties.get(0x16, b""))
    finally:
        client.close()


def auth_failures(broker):
    text = urllib.request.urlopen("http://%s/metrics" % broker.admin, timeout=DEADLINE).read().decode()
    for line in text.splitlines():
        if line.startswith("estuary_auth_failures_total"):
            return int(float(line.split()[-1]))
    return None


def passwd(file, user, password, *flags):
    result = subprocess.run([ESTUARYCTL, "passwd", *flags, file, user], input=password + "\n", text=True,
                            capture_output=True, timeout=DEADLINE)
    return result.returncode


def run_amqp(broker):
    outcome, valid, opened = amqp_scram(broker, "sam", "pencil", then_open=True)
    check(outcome == 0 and valid, "AMQP SASL SCRAM-SHA-256, right password: outcome ok, server-final verified")
    check(opened, "AMQP open after SCRAM answered with an open")
    outcome, valid, _ = amqp_scram(broker, "sam", "crayon")
    check(outcome == 1 and not valid, "AMQP SASL SCRAM-SHA-256, wrong password: outcome 1 (auth)")
    outcome, _, _ = amqp_scram(broker, "nobody", "pencil")
    check(outcome == 1, "AMQP SASL SCRAM-SHA-256, unknown user: outcome 1")
    try:
        from proton.utils import BlockingConnection
    except ImportError:
        print("skip: python3-qpid-proton is not installed")
        return
    url = "amqp://%s:%d" % (broker.host, broker.amqp_port)
    try:
        connection = BlockingConnection(url, user="sam", password="pencil", allowed_mechs="PLAIN",
                                        timeout=DEADLINE)
        connection.close()
        check(True, "AMQP SASL PLAIN (Proton Python) against a SCRAM entry")
    except Exception as error:  # noqa: BLE001 - any refusal is the failure
        check(False, "AMQP SASL PLAIN against a SCRAM entry: %s" % error)


def run_mqtt(broker):
    reason, valid, sock = mqtt_scram(broker, "sam", "pencil")
    check(reason == 0 and valid, "MQTT 5 AUTH SCRAM-SHA-256: CONNACK 0x00 carrying a verified server-final")
    sock.sendall(b"\xc0\x00")  # PINGREQ
    check(recv_exact(sock, 2) == b"\xd0\x00", "connected after the exchange (PINGRESP)")
    ended, verified = mqtt_reauthenticate(sock, "sam", "pencil")
    check(ended == (15, 0) and verified, "re-authentication (AUTH 0x19) ends in AUTH 0x00, server-final verified")
    sock.close()

    reason, _, sock = mqtt_scram(broker, "sam", "crayon", b"scram-wrong")
    check(reason == 0x87, "MQTT 5 AUTH, wrong password: CONNACK 0x87 (got %r)" % reason)
    check(closed_by_peer(sock), "wrong password: the server closes the connection")
    sock.close()

    reason, _, sock = mqtt_scram(broker, "alice", "wonderland", b"scram-7")
    check(reason == 0x87, "a $7$ user cannot run SCRAM: CONNACK 0x87 (got %r)" % reason)
    sock.close()

    sock = mqtt_open(broker)
    sock.sendall(mqtt_connect(b"scram-unknown", b"SCRAM-SHA-1", b"n,,n=sam,r=abc"))
    packet_type, reason, _ = mqtt_read(sock)
    check(packet_type == 2 and reason == 0x8C, "unknown method: CONNACK 0x8C (Bad authentication method)")
    check(closed_by_peer(sock), "unknown method: the server closes the connection")
    sock.close()

    sock = mqtt_open(broker)
    sock.sendall(mqtt_connect(b"scram-plain", user=b"sam", password=b"pencil"))
    packet_type, reason, _ = mqtt_read(sock)
    check(packet_type == 2 and reason == 0, "user name and password against a SCRAM entry: CONNACK 0x00")
    sock.sendall(mqtt_auth(0x18, METHOD, b"n,,n=sam,r=abc"))
    packet_type, reason, _ = mqtt_read(sock)
    check(packet_type == 14 and reason == 0x82, "AUTH without a method in CONNECT: DISCONNECT 0x82")
    sock.close()

    sock = mqtt_open(broker)
    sock.sendall(mqtt_connect(b"scram-v4", user=b"sam", password=b"pencil", version=4))
    check(recv_exact(sock, 4) == b"\x20\x02\x00\x00", "MQTT 3.1.1 CONNACK accepted")
    sock.sendall(b"\xf0\x00")
    check(closed_by_peer(sock), "AUTH in MQTT 3.1.1: the server closes the connection")
    sock.close()


def main():
    users = os.path.join(WORK, "users")
    check(passwd(users, "sam", "pencil", "--scram") == 0, "estuaryctl passwd --scram writes an entry")
    check(passwd(users, "alice", "wonderland") == 0, "estuaryctl passwd writes a $7$ entry beside it")
    with open(users) as file:
        text = file.read()
    check("sam:SCRAM-SHA-256$4096:" in text, "the entry is SCRAM-SHA-256$4096:SALT$STOREDKEY:SERVERKEY")
    log = open(os.path.join(WORK, "estuaryd.log"), "w")
    broker = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "info", "--sys-interval", "0",
                      "--password-file", users, "--auth-failures-before-backoff", "100", stderr=log)
    try:
        failures_before = auth_failures(broker)
        run_amqp(broker)
        run_mqtt(broker)
        failures_after = auth_failures(broker)
        check(failures_before is not None and failures_after is not None and failures_after - failures_before >= 4,
              "SCRAM failures counted in estuary_auth_failures_total (%r -> %r)" % (failures_before, failures_after))

        check(passwd(users, "ted", "chalk", "--scram") == 0, "estuaryctl passwd --scram adds a user")
        broker.process.send_signal(signal.SIGHUP)

        def ted_logs_in():
            reason, valid, sock = mqtt_scram(broker, "ted", "chalk", b"scram-ted")
            sock.close()
            return reason == 0 and valid
        wait_for("the added SCRAM user to log in after SIGHUP", ted_logs_in)
        check(True, "SIGHUP: the added SCRAM user logs in")
    except (AssertionError, EOFError, OSError) as error:
        check(False, "unexpected: %s" % error)
    finally:
        status = broker.stop()
        log.close()
        check(status == 0, "estuaryd exits 0 on SIGTERM")
    if FAILURES:
        with open(os.path.join(WORK, "estuaryd.log")) as file:
            sys.stderr.write(file.read()[-4000:])
    else:
        shutil.rmtree(WORK, ignore_errors=True)
    print("%d failed" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
