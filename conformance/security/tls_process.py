#!/usr/bin/python3
"""Process test of TLS on client listeners (--mqtts, --amqps; docs/security.md
"TLS") against real estuaryd processes, with clients the project does not
write: mosquitto_pub/mosquitto_sub (--cafile, --cert, --key), Proton Python
(an SSL domain, SASL PLAIN and EXTERNAL) and Python's own ssl module for the
byte-level cases. Certificates are made now with the openssl command line
(conformance/support/tls_certs.py). Checks, each printed as "ok: ..." or "FAIL: ...":

  - the ready line names mqtts= and amqps=; MQTT over TLS round trips, with
    client ids that land on both shards (the session moves to its shard);
  - refusals, each a clean close and a log line that says which: a server
    the client cannot verify (wrong CA), client certificates expired, not yet
    valid, from an unknown CA, self-signed, revoked (--tls-crl); clear-text
    MQTT on the TLS port; random bytes; half a ClientHello is reset after
    --tls-handshake-timeout (timed, not slept), and 50 such sockets delay no
    one else;
  - TLS session resumption (a ticket) from Python's ssl client;
  - a CONNECT in the same segment as the client's Finished reaches its
    shard (the move waits for the session ticket's write to finish);
  - AMQP over TLS: SASL PLAIN with a password, EXTERNAL with a certificate;
  - --tls-min-version 1.3 refuses a TLS 1.2 client;
  - --tls-require-client-cert with --tls-identity-as-username: the CN is the
    MQTT user name (the ACL's %u) and AMQP EXTERNAL's user; no certificate,
    no connection;
  - SIGHUP with a new certificate: new handshakes get it, a connection made
    before stays and keeps receiving.

usage: /usr/bin/python3 tls_process.py path/to/estuaryd
"""

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from estuary_process import DEADLINE, FAILURES, Estuaryd, LineReader, check, wait_for  # noqa: E402
from tls_certs import TlsCerts  # noqa: E402

ESTUARYD = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="estuary-tls-")
HANDSHAKE_TIMEOUT_MS = 1000


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE)
    return done.returncode, done.stdout, done.stderr


def tls_flags(cafile, cert=None, key=None):
    flags = ["--cafile", cafile]
    if cert:
        flags += ["--cert", cert, "--key", key]
    return flags


def pub(port, topic, message, tls, user=None, password=None, client_id=None, version="mqttv311"):
    argv = ["mosquitto_pub", "-h", "localhost", "-p", str(port), "-V", version, "-q", "1", "-t", topic,
            "-m", message, *tls]
    if user:
        argv += ["-u", user, "-P", password]
    if client_id:
        argv += ["-i", client_id]
    return run(argv)


class Sub:
    """mosquitto_sub -v over TLS in the background; lines read with deadlines."""

    def __init__(self, port, topic, tls, user=None, password=None, version="mqttv311"):
        argv = ["mosquitto_sub", "-h", "localhost", "-p", str(port), "-V", version, "-q", "1", "-v", "-t", topic,
                *tls]
        if user:
            argv += ["-u", user, "-P", password]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.reader = LineReader(self.process)

    def line(self, timeout=DEADLINE):
        return self.reader.line(timeout)

    def wait_subscribed(self, port, tls, user, password, topic):
        """Publishes markers until one arrives (the subscription is in
        place), within DEADLINE; then reads the late markers away."""
        deadline = time.monotonic() + DEADLINE
        attempt = 0
        while time.monotonic() < deadline:
            attempt += 1
            pub(port, topic, "marker-%d" % attempt, tls, user, password)
            line = self.line(timeout=0.2)
            if line is not None and "marker" in line:
                while line is not None and not line.endswith("marker-%d" % attempt):
                    line = self.line(timeout=0.2)
                return True
        return False

    def stop(self):
        self.process.kill()
        self.process.wait()
        return self.process.stderr.read().decode()


class Log:
    """estuaryd's stderr, read from where the last wait stopped."""

    def __init__(self, name):
        self.path = os.path.join(WORK, name)
        self.file = open(self.path, "w")
        self.seen = 0

    def wait(self, needle):
        def found():
            with open(self.path) as handle:
                text = handle.read()
            at = text.find(needle, self.seen)
            if at < 0:
                return None
            self.seen = at + len(needle)
            line_start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            return text[line_start:line_end if line_end >= 0 else len(text)]
        try:
            return wait_for("'%s' in the log" % needle, found)
        except AssertionError:
            return None


def closed_within(sock, seconds):
    """Seconds until the peer closed or reset `sock`, or None if it did not within `seconds`."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while True:
            if not sock.recv(4096):
                break
    except (ConnectionResetError, BrokenPipeError):
        pass
    except socket.timeout:
        return None
    return time.monotonic() - start


def client_hello():
    """A real TLS ClientHello, from Python's ssl on memory BIOs."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def mqtt_connect(client_id):
    """An MQTT 3.1.1 CONNECT, clean session, keep alive 60."""
    body = b"\x00\x04MQTT\x04\x02\x00\x3c" + len(client_id).to_bytes(2, "big") + client_id.encode()
    return bytes([0x10, len(body)]) + body


def check_mqtt(broker, certs, log, passwords):
    port = broker.mqtts_port
    check(port is not None and "amqps" in broker.fields, "the ready line names mqtts= and amqps= (%r)"
          % broker.ready_line)
    tls = tls_flags(certs.ca)
    sub = Sub(port, "tls/#", tls, "alice", passwords["alice"])
    check(sub.wait_subscribed(port, tls, "alice", passwords["alice"], "tls/marker"),
          "mosquitto_sub over TLS (--cafile) is subscribed")
    # Several ids: some hash to the other shard, so the TLS session moves there.
    for index in range(6):
        status, _, error = pub(port, "tls/%d" % index, "m%d" % index, tls, "alice", passwords["alice"],
                               client_id="tls-pub-%d" % index)
        check(status == 0, "mosquitto_pub over TLS as tls-pub-%d (%r)" % (index, error.strip()))
    got = [sub.line() for _ in range(6)]
    check(got == ["tls/%d m%d" % (index, index) for index in range(6)],
          "every message crosses TLS to the subscriber, from clients on both shards (%r)" % got)
    status, _, error = pub(port, "tls/cert", "c", tls_flags(certs.ca, certs.client_cert, certs.client_key),
                           "alice", passwords["alice"], version="mqttv5")
    check(status == 0 and sub.line() == "tls/cert c", "a client certificate from --tls-ca is accepted (%r)"
          % error.strip())
    sub.stop()


def check_refusals(broker, certs, other, log, passwords):
    port = broker.mqtts_port
    status, _, error = pub(port, "x", "y", tls_flags(other.ca), "alice", passwords["alice"])
    check(status != 0, "a client that trusts another CA refuses the server (%d, %r)" % (status, error.strip()))
    cases = [
        ("expired", certs.client("old", start="20200101000000Z", end="20200201000000Z")),
        ("not yet valid", certs.client("future", start="20400101000000Z", end="20410101000000Z")),
        ("unknown CA", other.client("stranger")),
        ("self-signed", certs.self_signed("selfie")),
        ("revoked", broker.revoked),
    ]
    for word, (cert, key) in cases:
        status, _, error = pub(port, "x", "y", tls_flags(certs.ca, cert, key), "alice", passwords["alice"])
        line = log.wait("(%s)" % word)
        check(status != 0 and line is not None and "client certificate refused" in line,
              "a client certificate %s is refused, and the log says so (%r)" % (word, line))
    # Clear text on the TLS port: a clean close, quickly.
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.sendall(mqtt_connect("plain-on-tls"))
        elapsed = closed_within(raw, DEADLINE)
    check(elapsed is not None and elapsed < HANDSHAKE_TIMEOUT_MS / 1000,
          "clear-text MQTT on the TLS port is closed at once (%s s)" % elapsed)
    check(log.wait("wrong version number") is not None, "... logged as a handshake failure")
    status, _, _ = run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-t", "x", "-m", "y", "-u", "alice",
                        "-P", passwords["alice"]])
    check(status != 0, "mosquitto_pub without TLS to the TLS port fails, no hang")
    for name, target in (("mqtts", port), ("amqps", broker.amqps_port)):
        with socket.create_connection(("127.0.0.1", target)) as raw:
            raw.sendall(os.urandom(3000))
            elapsed = closed_within(raw, DEADLINE)
        check(elapsed is not None, "random bytes to %s: the connection is closed" % name)
    check_handshake_timeout(broker, certs, passwords)


def check_handshake_timeout(broker, certs, passwords):
    hello = client_hello()
    stalled = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", broker.mqtts_port))
        sock.sendall(hello[:len(hello) // 2])
        stalled.append(sock)
    started = time.monotonic()
    # Meanwhile another client is served as usual.
    status, _, error = pub(broker.mqtts_port, "tls/busy", "b", tls_flags(certs.ca), "alice", passwords["alice"])
    served_after = time.monotonic() - started
    check(status == 0 and served_after < HANDSHAKE_TIMEOUT_MS / 1000,
          "50 half ClientHellos delay no one: a client connects and publishes in %.2f s" % served_after)
    elapsed = closed_within(stalled[0], HANDSHAKE_TIMEOUT_MS / 1000 + DEADLINE)
    waited = time.monotonic() - started
    check(elapsed is not None and waited >= HANDSHAKE_TIMEOUT_MS / 1000 * 0.9,
          "half a ClientHello is cut after --tls-handshake-timeout %d ms (closed after %.2f s)"
          % (HANDSHAKE_TIMEOUT_MS, waited))
    others = [closed_within(sock, DEADLINE) for sock in stalled[1:]]
    check(all(value is not None for value in others), "... all 50 are cut")
    for sock in stalled:
        sock.close()


def check_resumption(broker, certs):
    context = ssl.create_default_context(cafile=certs.ca)
    session = None
    reused = []
    for index in range(2):
        with socket.create_connection(("127.0.0.1", broker.mqtts_port)) as raw:
            with context.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
                tls.sendall(mqtt_connect("resume-%d" % index))
                tls.settimeout(DEADLINE)
                connack = tls.recv(4)  # the ticket arrived before it (TLS 1.3)
                reused.append((tls.session_reused, tls.version(), connack[:1] == b"\x20"))
                session = tls.session
    check(reused[0][0] is False and reused[1][0] is True and reused[1][2],
          "a second connection resumes the first one's TLS session from its ticket (%r)" % reused)


def connect_with_finished(port, cafile, client_id):
    """A TLS handshake on memory BIOs whose last flight carries the MQTT
    CONNECT in the same segment as the client's Finished (as a fast client
    sends them): the server reads both at once, while its session ticket is
    still being written. Returns the first byte of the answer (0x20: CONNACK)."""
    context = ssl.create_default_context(cafile=cafile)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.settimeout(DEADLINE)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(outgoing.read())
                chunk = raw.recv(65536)
                if not chunk:
                    return None
                incoming.write(chunk)
        tls.write(mqtt_connect(client_id))
        raw.sendall(outgoing.read())  # Finished and CONNECT together
        while True:
            try:
                return tls.read(1)
            except ssl.SSLWantReadError:
                chunk = raw.recv(65536)
                if not chunk:
                    return None
                incoming.write(chunk)


def check_connect_with_finished(broker, certs):
    answers = []
    for index in range(8):
        try:
            answers.append(connect_with_finished(broker.mqtts_port, certs.ca, "fast-%d" % index))
        except OSError as error:  # a reset: the move gave up
            answers.append(repr(error))
    check(answers == [b"\x20"] * 8, "a CONNECT sent with the client's Finished is answered, for ids on both shards "
          "(the move waits for the session ticket's write) (%r)" % answers)


def ssl_domain(certs, cert=None, key=None):
    """A Proton client SSL domain trusting the test CA, with a client certificate if given."""
    from proton import SSLDomain
    made = SSLDomain(SSLDomain.MODE_CLIENT)
    made.set_trusted_ca_db(certs.ca)
    made.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if cert:
        made.set_credentials(cert, key, None)
    return made


def check_amqp(broker, certs, passwords):
    try:
        from proton import ConnectionException, Message
        from proton.utils import BlockingConnection
    except ImportError:
        print("skip: python3-qpid-proton is not installed")
        return
    url = "amqps://127.0.0.1:%d" % broker.amqps_port

    def round_trip(body, **login):
        connection = BlockingConnection(url, sni="localhost", timeout=DEADLINE, **login)
        receiver = connection.create_receiver("amqps/#")
        connection.create_sender("amqps/x").send(Message(body=body))
        message = receiver.receive(timeout=DEADLINE)
        receiver.accept()
        connection.close()
        return message.body == body

    check(round_trip("over TLS with PLAIN", ssl_domain=ssl_domain(certs), user="alice", password=passwords["alice"],
                     allowed_mechs="PLAIN"), "Proton Python: AMQP over TLS with SASL PLAIN round trips")
    check(round_trip("over TLS with EXTERNAL", ssl_domain=ssl_domain(certs, certs.client_cert, certs.client_key),
                     allowed_mechs="EXTERNAL"), "Proton Python: SASL EXTERNAL with a client certificate")
    try:
        BlockingConnection(url, ssl_domain=ssl_domain(certs), sni="localhost", allowed_mechs="EXTERNAL",
                           timeout=DEADLINE)
        check(False, "SASL EXTERNAL without a client certificate is refused")
    except ConnectionException as error:
        check(True, "SASL EXTERNAL without a client certificate is refused (%s)" % str(error).splitlines()[0])


def check_reload(broker, certs, other, log, passwords):
    port = broker.mqtts_port
    before = Sub(port, "reload/#", tls_flags(certs.ca), "alice", passwords["alice"])
    check(before.wait_subscribed(port, tls_flags(certs.ca), "alice", passwords["alice"], "reload/marker"),
          "a subscriber connected before the reload (trusting the first CA)")
    # The new pair comes from the other CA: which one a handshake gets shows.
    shutil.copy(other.server_cert, broker.cert_file)
    shutil.copy(other.server_key, broker.key_file)
    os.kill(broker.process.pid, signal.SIGHUP)
    check(log.wait("reload: TLS certificate") is not None, "SIGHUP reloads the certificate (logged)")
    status, _, _ = pub(port, "reload/x", "old", tls_flags(certs.ca), "alice", passwords["alice"])
    check(status != 0, "after SIGHUP a new handshake no longer gets the old certificate")
    status, _, error = pub(port, "reload/x", "new", tls_flags(other.ca), "alice", passwords["alice"])
    check(status == 0, "after SIGHUP a new handshake gets the new certificate (%r)" % error.strip())
    check(before.line() == "reload/x new", "the connection made before the reload stays and receives")
    before.stop()


def check_identity_as_username(certs, passwords_file):
    acl = os.path.join(WORK, "acl")
    with open(acl, "w") as handle:
        handle.write("pattern readwrite devices/%u/#\n")
    log = Log("identity.log")
    broker = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "info", "--sys-interval", "0",
                      "--shutdown-grace", "500", "--mqtts", "127.0.0.1:0", "--amqps", "127.0.0.1:0",
                      "--tls-cert", certs.server_cert, "--tls-key", certs.server_key, "--tls-ca", certs.ca,
                      "--tls-require-client-cert", "--tls-identity-as-username", "--password-file", passwords_file,
                      "--acl-file", acl, "--tls-min-version", "1.3", stderr=log.file)
    try:
        port = broker.mqtts_port
        check_min_version(port, certs)
        device1 = tls_flags(certs.ca, certs.client_cert, certs.client_key)
        device2 = tls_flags(certs.ca, *certs.client("device-2"))
        sub = Sub(port, "devices/device-1/#", device1)
        check(sub.wait_subscribed(port, device1, None, None, "devices/device-1/marker"),
              "--tls-identity-as-username: device-1 (CN) reads and writes devices/device-1/# with no password")
        pub(port, "devices/device-1/x", "from device-2", device2)  # 3.1.1: accepted and dropped
        pub(port, "devices/device-1/x", "from device-1", device1)
        check(sub.line() == "devices/device-1/x from device-1",
              "device-2 may not write device-1's topics: the CN is the ACL's %u")
        sub.stop()
        status, _, _ = pub(port, "devices/device-1/x", "no cert", tls_flags(certs.ca))
        check(status != 0 and log.wait("handshake failed") is not None,
              "--tls-require-client-cert: a client without a certificate is refused")
        try:
            from proton import LinkException
            from proton.utils import BlockingConnection
        except ImportError:
            return
        domain = ssl_domain(certs, certs.client_cert, certs.client_key)
        connection = BlockingConnection("amqps://127.0.0.1:%d" % broker.amqps_port, ssl_domain=domain,
                                        sni="localhost", allowed_mechs="EXTERNAL", timeout=DEADLINE)
        connection.create_sender("devices/device-1/amqp")
        check(True, "AMQP EXTERNAL: device-1 may write devices/device-1/...")
        try:
            connection.create_sender("devices/device-2/amqp")
            check(False, "AMQP EXTERNAL's user is the CN: device-2's topics are refused")
        except LinkException as error:
            check("unauthorized-access" in str(error), "AMQP EXTERNAL's user is the CN: device-2's topics are "
                  "refused (%s)" % str(error).splitlines()[0])
        connection.close()
    finally:
        check(broker.stop() == 0, "estuaryd (identity as user name) exited 0 on SIGTERM")


def check_min_version(port, certs):
    """--tls-min-version 1.3: a client that offers at most TLS 1.2 is refused."""
    context = ssl.create_default_context(cafile=certs.ca)
    context.load_cert_chain(certs.client_cert, certs.client_key)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with context.wrap_socket(raw, server_hostname="localhost"):
                check(False, "--tls-min-version 1.3 refuses a TLS 1.2 client")
    except ssl.SSLError as error:
        check("PROTOCOL_VERSION" in str(error).upper(),
              "--tls-min-version 1.3 refuses a TLS 1.2 client (%s)" % error)


def make_passwords():
    file = os.path.join(WORK, "passwords")
    run(["mosquitto_passwd", "-c", "-b", file, "alice", "wonderland"])
    return file, {"alice": "wonderland"}


def main():
    certs = TlsCerts(os.path.join(WORK, "ca"))
    other = TlsCerts(os.path.join(WORK, "other"), "Other Test CA")
    revoked = certs.client("revoked")
    certs.revoke(revoked[0])
    crl = certs.crl()
    passwords_file, passwords = make_passwords()
    # The served pair lives in files of its own: the reload check replaces them.
    cert_file, key_file = os.path.join(WORK, "served.pem"), os.path.join(WORK, "served.key")
    shutil.copy(certs.server_cert, cert_file)
    shutil.copy(certs.server_key, key_file)
    log = Log("estuaryd.log")
    broker = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "info", "--sys-interval", "0",
                      "--shutdown-grace", "500", "--mqtts", "127.0.0.1:0", "--amqps", "127.0.0.1:0",
                      "--tls-cert", cert_file, "--tls-key", key_file, "--tls-ca", certs.ca, "--tls-crl", crl,
                      "--tls-handshake-timeout", str(HANDSHAKE_TIMEOUT_MS), "--password-file", passwords_file,
                      stderr=log.file)
    broker.cert_file, broker.key_file, broker.revoked = cert_file, key_file, revoked
    try:
        check_mqtt(broker, certs, log, passwords)
        check_refusals(broker, certs, other, log, passwords)
        check_resumption(broker, certs)
        check_connect_with_finished(broker, certs)
        check_amqp(broker, certs, passwords)
        check_reload(broker, certs, other, log, passwords)
        check(broker.process.poll() is None, "estuaryd survived every bad handshake")
    finally:
        status = broker.stop()
    check(status == 0, "estuaryd exited 0 on SIGTERM")
    check_identity_as_username(certs, passwords_file)
    shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        sys.exit(1)
    print("all TLS process checks passed")


if __name__ == "__main__":
    main()
