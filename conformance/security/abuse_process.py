#!/usr/bin/python3
"""Process test of the abuse limits (issue 21 point 6; docs/security.md
"Abuse limits") against real estuaryd processes. Clients bind their own
loopback source addresses (127.0.0.0/8 is all loopback on Linux), so one
machine plays many hosts; Paho Python is the well-behaved client, raw
sockets the abusive ones. Checks, each printed as "ok: ..." or "FAIL: ...":

  - a connection flood from one address is capped at
    --max-connections-per-ip (the rest closed at accept, no CONNACK) while
    a client from another address connects at once; counted in /metrics;
    logged once, not per refusal;
  - --connect-rate-per-ip: sequential connections beyond the rate are
    closed;
  - behind a balancer (--proxy-from), the PROXY v2 header's source address
    is the one limited and logged, not the balancer's;
  - --max-publish-rate: an MQTT publisher, and a Proton Python AMQP sender
    (pre-settled transfers), at 10x the limit are held near the limit
    (measured at a Paho subscriber) and are not disconnected;
  - authentication failures from one address put it in back-off (even the
    right password is refused for --auth-backoff), another address is
    served meanwhile, and the address is served again after it;
  - --max-pending-connections: sockets that never send CONNECT fill it and
    new ones are closed; a finished CONNECT frees a slot;
  - a TLS slowloris (300 sockets, each half a ClientHello, from 30
    addresses) holds bounded memory, delays no one (a TLS client is served
    within its deadline) and is cut by --tls-handshake-timeout;
  - --connect-timeout on AMQP: sockets that send only the SASL header, or
    half a sasl-init, hold pending slots (--max-pending-connections caps
    them: one more is closed at accept) while a Proton Python client is
    served; each is closed at its deadline, counted in
    estuary_connect_timeouts_total{protocol="amqp"} and logged at info with
    its address; an MQTT socket that sends nothing likewise; over --amqps
    the deadline runs from the end of the TLS handshake.

usage: /usr/bin/python3 abuse_process.py path/to/estuaryd
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from estuary_process import DEADLINE, FAILURES, Estuaryd, check, metric, wait_for  # noqa: E402
from tls_certs import TlsCerts  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402

ESTUARYD = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="estuary-abuse-")
BASE_FLAGS = ("--shards", "2", "--log-level", "info", "--sys-interval", "0", "--shutdown-grace", "500")


def resident_kib(pid):
    with open("/proc/%d/status" % pid) as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def log_text(path):
    with open(path) as handle:
        return handle.read()


# --- raw MQTT ----------------------------------------------------------------

def remaining_length(n):
    out = b""
    while True:
        byte, n = n % 128, n // 128
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def utf8(text):
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def connect_packet(client_id, user=None, password=None):
    """MQTT 3.1.1 CONNECT, clean session, keep alive 60."""
    flags = 0x02 | (0x80 if user else 0) | (0x40 if password else 0)
    body = utf8("MQTT") + bytes([4, flags]) + (60).to_bytes(2, "big") + utf8(client_id)
    if user:
        body += utf8(user)
    if password:
        body += utf8(password)
    return b"\x10" + remaining_length(len(body)) + body


def publish_packet(topic, payload):
    body = utf8(topic) + payload
    return b"\x30" + remaining_length(len(body)) + body


def proxy_v2_header(source, destination):
    """A PROXY protocol v2 header for TCP over IPv4 (source, destination: (ip, port))."""
    address = socket.inet_aton(source[0]) + socket.inet_aton(destination[0])
    address += source[1].to_bytes(2, "big") + destination[1].to_bytes(2, "big")
    return b"\r\n\r\n\x00\r\nQUIT\n" + b"\x21\x11" + len(address).to_bytes(2, "big") + address


def open_socket(port, source):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(DEADLINE)
    sock.connect(("127.0.0.1", port))
    return sock


def read_connack(sock, timeout=DEADLINE):
    """The CONNACK's return code, or None if the server closed without one."""
    sock.settimeout(timeout)
    data = b""
    try:
        while len(data) < 4:
            chunk = sock.recv(4 - len(data))
            if not chunk:
                return None
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return None
    return data[3] if data[0] == 0x20 else None


def try_connect(port, source, client_id, user=None, password=None, prefix=b""):
    """Connects from `source`, sends CONNECT: its CONNACK's return code, or
    None when the server closed the socket instead."""
    try:
        sock = open_socket(port, source)
    except OSError:
        return None, None
    try:
        sock.sendall(prefix + connect_packet(client_id, user, password))
    except OSError:
        sock.close()
        return None, None
    return read_connack(sock), sock


def paho_connects(port, source, client_id, user=None, password=None):
    """Seconds Paho took to connect from `source`, or None if it was refused."""
    client = paho.Client(client_id=client_id, protocol=paho.MQTTv311)
    if user:
        client.username_pw_set(user, password)
    result = {}
    client.on_connect = lambda c, u, f, rc: result.setdefault("rc", rc)
    started = time.monotonic()
    try:
        client.connect("127.0.0.1", port, keepalive=30, bind_address=source)
    except OSError:
        return None
    client.loop_start()
    try:
        wait_for("paho CONNACK", lambda: "rc" in result)
    except AssertionError:
        pass
    elapsed = time.monotonic() - started
    client.disconnect()
    client.loop_stop()
    return elapsed if result.get("rc") == 0 else None


# --- checks ------------------------------------------------------------------

def check_flood(broker, log_path):
    held = []
    admitted = refused = 0
    for i in range(50):
        code, sock = try_connect(broker.mqtt_port, "127.0.0.10", "flood-%d" % i)
        if code == 0:
            admitted += 1
            held.append(sock)
        else:
            refused += 1
            if sock:
                sock.close()
    check(admitted == 10 and refused == 40,
          "a flood of 50 from 127.0.0.10 is capped at --max-connections-per-ip 10 (%d admitted, %d closed "
          "without CONNACK)" % (admitted, refused))
    elapsed = paho_connects(broker.mqtt_port, "127.0.0.11", "other-address")
    check(elapsed is not None and elapsed < 1.0,
          "meanwhile Paho from 127.0.0.11 connects normally (%s s)" % (elapsed and "%.3f" % elapsed))
    check(metric(broker, "estuary_connections_refused_total", 'reason="per_ip"') >= 40,
          "the refusals are counted: estuary_connections_refused_total{reason=\"per_ip\"} = %d"
          % metric(broker, "estuary_connections_refused_total", 'reason="per_ip"'))
    lines = [line for line in log_text(log_path).splitlines() if "limits: connection from 127.0.0.10" in line]
    check(len(lines) == 1, "40 refusals make one log line, not 40 (%d: %s)" % (len(lines), lines[:1]))
    for sock in held:
        sock.close()
    # Closing frees the address's count, on whichever shard the connection
    # ended (client ids hash to both shards: tickets move with the socket).
    wait_for("the flood's slots freed", lambda: metric(broker, "estuary_connections") == 0)
    again = [try_connect(broker.mqtt_port, "127.0.0.10", "again-%d" % i) for i in range(10)]
    check(all(code == 0 for code, _ in again), "closed connections give their address's 10 slots back (%s)"
          % [code for code, _ in again])
    for _, sock in again:
        if sock:
            sock.close()
    wait_for("those closed too", lambda: metric(broker, "estuary_connections") == 0)


def check_rate(broker):
    admitted = 0
    started = time.monotonic()
    for i in range(60):
        code, sock = try_connect(broker.mqtt_port, "127.0.0.12", "rate-%d" % i)
        if sock:
            sock.close()
        admitted += code == 0
    elapsed = time.monotonic() - started
    allowed = 20 + 20 * elapsed + 1  # the burst (one second's worth), then 20 per second
    check(20 <= admitted <= allowed,
          "--connect-rate-per-ip 20: %d of 60 sequential connections in %.2f s admitted (at most %.0f)"
          % (admitted, elapsed, allowed))
    check(metric(broker, "estuary_connections_refused_total", 'reason="rate"') >= 60 - admitted,
          "the rate refusals are counted (reason=\"rate\")")


def check_proxy(broker, log_path):
    # 127.0.0.20 is a balancer (--proxy-from): the limits see the client its
    # header names, never the balancer's own address.
    held = []
    admitted = {}
    for source, count in (("10.9.9.9", 15), ("10.9.9.8", 3)):
        for i in range(count):
            header = proxy_v2_header((source, 40000 + i), ("127.0.0.1", broker.mqtt_port))
            code, sock = try_connect(broker.mqtt_port, "127.0.0.20", "proxied-%s-%d" % (source, i), prefix=header)
            if code == 0:
                admitted[source] = admitted.get(source, 0) + 1
                held.append(sock)
            elif sock:
                sock.close()
    check(admitted.get("10.9.9.9") == 10 and admitted.get("10.9.9.8") == 3,
          "behind a balancer the PROXY v2 source is limited: 10 of 15 from 10.9.9.9, 3 of 3 from 10.9.9.8, "
          "all through one balancer address (%s)" % admitted)
    text = log_text(log_path)
    check("limits: connection from 10.9.9.9" in text and "limits: connection from 127.0.0.20" not in text,
          "the log names the client from the PROXY header, not the balancer")
    for sock in held:
        sock.close()


def held_rate(broker, limit, topic, send_batch, batch=20):
    """Runs send_batch() (`batch` messages) every 10 ms for 3 s: 10x `limit`.
    Returns (offered rate, rate a Paho subscriber to `topic` saw between
    1 s and 3 s, after the first second's burst)."""
    received = []
    subscriber = paho.Client(client_id="rate-subscriber-" + topic, protocol=paho.MQTTv311)
    subscribed = threading.Event()
    subscriber.on_connect = lambda c, u, f, rc: c.subscribe(topic, 0)
    subscriber.on_subscribe = lambda c, u, m, q: subscribed.set()
    subscriber.on_message = lambda c, u, m: received.append(time.monotonic())
    subscriber.connect("127.0.0.1", broker.mqtt_port, keepalive=30)
    subscriber.loop_start()
    if not subscribed.wait(DEADLINE):
        return 0, 0
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 3.0:
        send_batch()
        sent += batch
        time.sleep(0.01)  # pacing the load, not waiting for a condition
    offered = sent / (time.monotonic() - started)
    window = [t for t in received if started + 1.0 <= t < started + 3.0]
    subscriber.disconnect()
    subscriber.loop_stop()
    return offered, len(window) / 2.0


def check_publish_rate(broker, limit):
    code, publisher = try_connect(broker.mqtt_port, "127.0.0.30", "fast-publisher")
    check(code == 0, "the MQTT publisher connects")
    packet = publish_packet("r", b"x" * 4)
    offered, rate = held_rate(broker, limit, "r", lambda: publisher.sendall(packet * 20))
    check(offered >= 9 * limit, "the MQTT publisher offered %.0f messages/s (10x the limit of %d)" % (offered, limit))
    check(0.8 * limit <= rate <= 1.2 * limit,
          "--max-publish-rate %d holds it to %.0f messages/s at the subscriber" % (limit, rate))
    publisher.settimeout(0.2)
    try:
        alive = publisher.recv(1) != b""
    except socket.timeout:
        alive = True  # nothing to read, and no close
    except OSError:
        alive = False
    check(alive and metric(broker, "estuary_connections") >= 1, "the throttled MQTT publisher is not disconnected")
    check(metric(broker, "estuary_publish_throttled_total") > 0, "throttling is counted (estuary_publish_throttled_total)")
    publisher.close()


def check_amqp_publish_rate(broker, limit):
    from proton import Message, Timeout
    from proton.reactor import AtMostOnce
    from proton.utils import BlockingConnection
    connection = BlockingConnection("amqp://127.0.0.1:%d" % broker.amqp_port, allowed_mechs="ANONYMOUS",
                                    allow_insecure_mechs=True, timeout=DEADLINE)
    sender = connection.create_sender("ra", options=AtMostOnce())

    def pump(seconds):
        """Drives the connection's IO for about `seconds`; False if it was closed."""
        try:
            connection.wait(lambda: False, timeout=seconds)
        except Timeout:
            return True
        except Exception as error:
            print("amqp sender: %s" % error)
            return False
        return False

    def send_batch():
        # Pre-settled: queued in Proton beyond the credit, sent as the broker
        # grants it. 30 a batch: Python's own cost per batch is not small.
        for _ in range(30):
            sender.link.send(Message(body=b"xxxx"))
        pump(0.001)

    throttled_before = metric(broker, "estuary_publish_throttled_total")
    offered, rate = held_rate(broker, limit, "ra", send_batch, batch=30)
    check(offered >= 9 * limit, "the AMQP sender offered %.0f transfers/s (10x the limit of %d)" % (offered, limit))
    check(0.8 * limit <= rate <= 1.2 * limit,
          "--max-publish-rate %d holds an AMQP sender to %.0f messages/s at the subscriber" % (limit, rate))
    check(pump(0.3) and not connection.disconnected, "the throttled AMQP sender is not disconnected")
    check(metric(broker, "estuary_publish_throttled_total") > throttled_before,
          "the AMQP sender's pauses are counted (estuary_publish_throttled_total)")
    connection.close()


def check_auth_backoff(broker):
    codes = [try_connect(broker.mqtt_port, "127.0.0.40", "guess-%d" % i, "alice", "guess%d" % i)[0]
             for i in range(3)]
    failed_at = time.monotonic()
    check(codes == [4, 4, 4], "three wrong passwords from 127.0.0.40 are answered (return code 4: %s)" % codes)
    code, _ = try_connect(broker.mqtt_port, "127.0.0.40", "right", "alice", "wonderland")
    check(code is None, "then 127.0.0.40 is in back-off: even the right password is closed without CONNACK")
    elapsed = paho_connects(broker.mqtt_port, "127.0.0.41", "elsewhere", "alice", "wonderland")
    check(elapsed is not None and elapsed < 1.0,
          "meanwhile 127.0.0.41 logs in normally (%s s)" % (elapsed and "%.3f" % elapsed))

    def served():
        return try_connect(broker.mqtt_port, "127.0.0.40", "right", "alice", "wonderland")[0] == 0
    wait_for("the back-off to end", served, deadline_s=5)
    waited = time.monotonic() - failed_at
    check(0.9 <= waited, "after --auth-backoff 1000 ms 127.0.0.40 is served again (after %.2f s)" % waited)
    check(metric(broker, "estuary_auth_failures_total") >= 3 and metric(broker, "estuary_auth_backoffs_total") >= 1
          and metric(broker, "estuary_connections_refused_total", 'reason="auth_backoff"') >= 1,
          "failures, back-offs and refusals are counted")


def check_pending(broker):
    idle = []
    for i in range(20):
        idle.append(open_socket(broker.mqtt_port, "127.0.1.%d" % (i + 1)))
    wait_for("20 pending", lambda: metric(broker, "estuary_pending_connections") == 20)
    code, _ = try_connect(broker.mqtt_port, "127.0.0.50", "late")
    check(code is None, "--max-pending-connections 20: a 21st socket is closed while 20 never sent CONNECT")
    idle[0].sendall(connect_packet("finishes"))
    check(read_connack(idle[0]) == 0, "one of them finishes its CONNECT")
    wait_for("19 pending", lambda: metric(broker, "estuary_pending_connections") == 19)
    code, sock = try_connect(broker.mqtt_port, "127.0.0.50", "now")
    check(code == 0, "then a new client is admitted")
    check(metric(broker, "estuary_connections_refused_total", 'reason="pending"') >= 1, "counted (reason=\"pending\")")
    for s in idle + [sock]:
        s.close()


def client_hello():
    import ssl
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def check_slowloris(broker, certs, timeout_ms):
    hello = client_hello()
    before = resident_kib(broker.process.pid)
    stalled = []
    opened_at = time.monotonic()
    for i in range(300):
        sock = open_socket(broker.mqtts_port, "127.0.2.%d" % (i % 30 + 1))
        sock.sendall(hello[:len(hello) // 2])
        stalled.append(sock)
    wait_for("300 handshakes pending", lambda: metric(broker, "estuary_pending_connections") >= 300)
    started = time.monotonic()
    done = subprocess.run(["mosquitto_pub", "-h", "localhost", "-p", str(broker.mqtts_port), "--cafile", certs.ca,
                           "-t", "slowloris/ok", "-m", "served", "-q", "1"], capture_output=True, timeout=DEADLINE)
    served = time.monotonic() - started
    during = resident_kib(broker.process.pid)
    per_socket = (during - before) / 300.0
    check(done.returncode == 0 and served < 1.0,
          "300 half ClientHellos from 30 addresses delay no one: mosquitto_pub over TLS served in %.2f s" % served)
    check(per_socket < 64,
          "their memory is bounded: %.1f KiB resident per stalled handshake (%d -> %d KiB)"
          % (per_socket, before, during))

    open_sockets = set(range(len(stalled)))

    def all_closed():
        for index in list(open_sockets):
            stalled[index].settimeout(0.001)
            try:
                if stalled[index].recv(4096) == b"":
                    open_sockets.discard(index)
            except socket.timeout:
                pass
            except OSError:  # reset
                open_sockets.discard(index)
        return not open_sockets
    wait_for("the stalled handshakes cut", all_closed, deadline_s=timeout_ms / 1000 + DEADLINE)
    cut_after = time.monotonic() - opened_at
    check(cut_after >= timeout_ms / 1000 * 0.9,
          "all 300 are cut by --tls-handshake-timeout %d ms (%.2f s after they opened)" % (timeout_ms, cut_after))
    wait_for("no pending left", lambda: metric(broker, "estuary_pending_connections") == 0)
    check(True, "no pending connection is left behind")
    for sock in stalled:
        sock.close()


# --- AMQP connect timeout ----------------------------------------------------

SASL_HEADER = b"AMQP\x03\x01\x00\x00"  # AMQP 1.0 section 5.3.1


def half_sasl_init():
    """The first bytes of a SASL frame (section 5.3.1, type 0x01) that
    announces 64 bytes: a sasl-init (0x41) that never ends."""
    body = b"\x00\x53\x41\xc0\x0e\x01\xa3\x09ANONYMOUS"
    return (64).to_bytes(4, "big") + b"\x02\x01\x00\x00" + body[:8]


def stall_amqp(port, source, partial_init):
    """A socket that sends the SASL header (and half a sasl-init) and no
    more; returns it once the server's SASL header came back."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    reply = b""
    try:
        sock.bind((source, 0))
        sock.settimeout(DEADLINE)
        sock.connect(("127.0.0.1", port))
        sock.sendall(SASL_HEADER + (half_sasl_init() if partial_init else b""))
        while len(reply) < 8:
            chunk = sock.recv(64)
            if not chunk:
                break
            reply += chunk
    except OSError:  # refused at accept: a reset
        pass
    return sock, reply[:8] == SASL_HEADER


def closed_now(sock):
    """True if the server closed `sock` (EOF or reset), without waiting."""
    sock.settimeout(0.001)
    try:
        while True:
            chunk = sock.recv(4096)
            if chunk == b"":
                return True
    except socket.timeout:
        return False
    except OSError:  # reset
        return True


def proton_round_trip(port):
    """Seconds a Proton Python client took to open, send and receive one
    message with SASL ANONYMOUS; None if it failed."""
    from proton import Message
    from proton.utils import BlockingConnection
    started = time.monotonic()
    try:
        connection = BlockingConnection("amqp://127.0.0.1:%d" % port, allowed_mechs="ANONYMOUS",
                                        allow_insecure_mechs=True, timeout=DEADLINE)
        receiver = connection.create_receiver("deadline/ok")
        connection.create_sender("deadline/ok").send(Message(body="served"))
        message = receiver.receive(timeout=DEADLINE)
        receiver.accept()
        connection.close()
    except Exception as error:  # any failure is the check's failure
        print("proton client: %s" % error)
        return None
    return time.monotonic() - started if message.body == "served" else None


def check_amqp_connect_timeout(broker, log_path, timeout_ms, cap):
    opened = []  # (socket, opened at)
    for i in range(cap - 1):
        sock, answered = stall_amqp(broker.amqp_port, "127.0.3.%d" % (i + 1), partial_init=i % 2 == 1)
        opened.append((sock, time.monotonic()))
        if not answered:
            check(False, "stalled AMQP socket %d got the server's SASL header" % i)
    wait_for("%d pending" % (cap - 1), lambda: metric(broker, "estuary_pending_connections") == cap - 1)
    served = proton_round_trip(broker.amqp_port)
    held = not any(closed_now(sock) for sock, _ in opened)
    check(served is not None and served < 2.0 and held,
          "%d AMQP sockets stalled in SASL (header only, half a sasl-init) delay no one: a Proton Python client "
          "opened, sent and received in %s s while they were held" % (cap - 1, "%.2f" % served if served else "-"))
    wait_for("the client's slot freed", lambda: metric(broker, "estuary_pending_connections") == cap - 1)
    sock, answered = stall_amqp(broker.amqp_port, "127.0.3.100", partial_init=False)
    opened.append((sock, time.monotonic()))
    check(answered, "the %dth stalled AMQP socket fills --max-pending-connections %d" % (cap, cap))
    late, answered = stall_amqp(broker.amqp_port, "127.0.3.101", partial_init=False)
    check(not answered, "one more AMQP socket is closed at accept, without a SASL header")
    late.close()
    check(metric(broker, "estuary_connections_refused_total", 'reason="pending"') >= 1, "counted (reason=\"pending\")")

    closed_after = {}

    def all_closed():
        for index, (sock, at) in enumerate(opened):
            if index not in closed_after and closed_now(sock):
                closed_after[index] = time.monotonic() - at
        return len(closed_after) == len(opened)
    wait_for("the stalled AMQP sockets closed", all_closed, deadline_s=timeout_ms / 1000 + DEADLINE)
    earliest, latest = min(closed_after.values()), max(closed_after.values())
    check(earliest >= timeout_ms / 1000 * 0.95 and latest < timeout_ms / 1000 + 2.0,
          "all %d are closed by --connect-timeout %d ms, each %.2f to %.2f s after it opened"
          % (len(opened), timeout_ms, earliest, latest))
    check(metric(broker, "estuary_connect_timeouts_total", 'protocol="amqp"') == len(opened),
          "counted in estuary_connect_timeouts_total{protocol=\"amqp\"} (%d)" % len(opened))
    wait_for("no pending left", lambda: metric(broker, "estuary_pending_connections") == 0)
    lines = [line for line in log_text(log_path).splitlines()
             if "amqp: address=127.0.3." in line and "not finished within the connect timeout" in line]
    # The line is bounded (io::LogBudget: 10 at once per shard thread, then
    # 1 a second); the metric above counts every one.
    check(min(len(opened), 10) <= len(lines) <= len(opened) and " info " in lines[0],
          "logged at info with the address, at most 10 at once per shard (%d lines for %d, e.g. %r)"
          % (len(lines), len(opened), lines[0] if lines else ""))
    for sock, _ in opened:
        sock.close()

    silent = open_socket(broker.mqtt_port, "127.0.3.200")
    started = time.monotonic()
    wait_for("the silent MQTT socket closed", lambda: closed_now(silent), deadline_s=timeout_ms / 1000 + DEADLINE)
    after = time.monotonic() - started
    check(after >= timeout_ms / 1000 * 0.95 and metric(broker, "estuary_connect_timeouts_total", 'protocol="mqtt"') == 1,
          "an MQTT socket that sends nothing is closed by the same deadline (%.2f s) and counted" % after)
    silent.close()


def check_amqps_connect_timeout(broker, certs, timeout_ms):
    """Over TLS the deadline counts from the end of the handshake."""
    import ssl
    context = ssl.create_default_context(cafile=certs.ca)
    raw = open_socket(broker.amqps_port, "127.0.3.210")
    sock = context.wrap_socket(raw, server_hostname="localhost")  # the handshake, done here
    started = time.monotonic()
    sock.sendall(SASL_HEADER)
    check(sock.recv(8) == SASL_HEADER, "an AMQP client over TLS gets the SASL header, then sends nothing")
    before = metric(broker, "estuary_connect_timeouts_total", 'protocol="amqp"')
    wait_for("the silent TLS client closed", lambda: closed_now(sock), deadline_s=timeout_ms / 1000 + DEADLINE)
    after = time.monotonic() - started
    check(after >= timeout_ms / 1000 * 0.95
          and metric(broker, "estuary_connect_timeouts_total", 'protocol="amqp"') == before + 1,
          "over --amqps it is closed by --connect-timeout %.2f s after its handshake, and counted" % after)
    sock.close()


def main():
    certs = TlsCerts(os.path.join(WORK, "ca"))
    passwords = os.path.join(WORK, "passwords")
    subprocess.run(["mosquitto_passwd", "-c", "-b", passwords, "alice", "wonderland"], check=True)
    timeout_ms = 2000
    log_a = os.path.join(WORK, "limits.log")
    with open(log_a, "w") as log:
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--max-connections-per-ip", "10", "--connect-rate-per-ip", "20",
                          "--proxy-from", "127.0.0.20", "--mqtts", "127.0.0.1:0", "--tls-cert", certs.server_cert,
                          "--tls-key", certs.server_key, "--tls-handshake-timeout", str(timeout_ms), stderr=log)
    try:
        check_flood(broker, log_a)
        check_rate(broker)
        check_slowloris(broker, certs, timeout_ms)
    finally:
        check(broker.stop() == 0, "estuaryd (limits) exited 0 on SIGTERM")

    # Its own node: the refusal log line is rate-limited per reason.
    log_proxy = os.path.join(WORK, "proxy.log")
    with open(log_proxy, "w") as log:
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--max-connections-per-ip", "10", "--proxy-from", "127.0.0.20",
                          stderr=log)
    try:
        check_proxy(broker, log_proxy)
    finally:
        check(broker.stop() == 0, "estuaryd (behind a balancer) exited 0 on SIGTERM")

    with open(os.path.join(WORK, "rate.log"), "w") as log:
        # A small AMQP credit window: a read brings at most 20 transfers, so
        # the budget's debt (and the subscriber's rate) moves in small steps.
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--max-publish-rate", "200", "--amqp-credit", "20", stderr=log)
    try:
        check_publish_rate(broker, 200)
        check_amqp_publish_rate(broker, 200)
    finally:
        check(broker.stop() == 0, "estuaryd (publish rate) exited 0 on SIGTERM")

    with open(os.path.join(WORK, "auth.log"), "w") as log:
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--password-file", passwords, "--auth-failures-before-backoff", "2",
                          "--auth-backoff", "1000", "--auth-backoff-max", "4000", stderr=log)
    try:
        check_auth_backoff(broker)
    finally:
        check(broker.stop() == 0, "estuaryd (auth back-off) exited 0 on SIGTERM")

    with open(os.path.join(WORK, "pending.log"), "w") as log:
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--max-pending-connections", "20", stderr=log)
    try:
        check_pending(broker)
    finally:
        check(broker.stop() == 0, "estuaryd (pending) exited 0 on SIGTERM")

    log_deadline = os.path.join(WORK, "deadline.log")
    with open(log_deadline, "w") as log:
        broker = Estuaryd(ESTUARYD, *BASE_FLAGS, "--connect-timeout", "2000", "--max-pending-connections", "12",
                          "--amqps", "127.0.0.1:0", "--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
                          stderr=log)
    try:
        check_amqp_connect_timeout(broker, log_deadline, 2000, 12)
        check_amqps_connect_timeout(broker, certs, 2000)
    finally:
        check(broker.stop() == 0, "estuaryd (connect timeout) exited 0 on SIGTERM")

    shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        sys.exit(1)
    print("all abuse-limit process checks passed")


if __name__ == "__main__":
    main()
