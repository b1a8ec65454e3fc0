#!/usr/bin/python3
"""Process test of MQTT and AMQP over WebSocket (--mqtt-ws, --amqp-ws;
docs/mqtt.md and docs/amqp.md "WebSocket") against real estuaryd processes,
with clients the project does not write: MQTT.js and rhea (with ws) in Node,
mosquitto_pub/mosquitto_sub over TCP, and Python sockets for the bytes.
Checks, each printed as "ok: ..." or "FAIL: ...":

  - the ready line names mqtt_ws= and amqp_ws=;
  - MQTT.js (MQTT 5 and 3.1.1, client ids on both shards) over WebSocket
    receives what mosquitto_pub sends over TCP, and mosquitto_sub over TCP
    receives what MQTT.js published (a 100,000-byte message among them);
  - rhea over WebSocket receives what mosquitto_pub sends, and its own
    messages round trip;
  - refusals with an HTTP status and a reason: no mqtt subprotocol (400,
    MQTT-6.0.0-3), another path (404), plain HTTP (426), MQTT bytes on the
    WebSocket port (400); a silent socket is reset after
    --ws-handshake-timeout (timed, not slept);
  - the 101 selects mqtt (MQTT-6.0.0-4); a CONNECT cut into one frame per
    byte is answered (a packet spans frames), a CONNECT and a PINGREQ in one
    frame are both answered (a frame holds several packets); a ping gets its
    pong; a client close is echoed with 1000;
  - an unmasked frame closes with 1002, a text frame with 1003 (MQTT-6.0.0-1),
    a frame over --max-packet-size with 1009;
  - behind a balancer: with --proxy-from the WebSocket port wants a PROXY v2
    header, and --max-connections-per-ip counts the address it names;
  - --mqtt-wss and --amqp-wss (certificates made now with openssl): MQTT.js
    over wss:// verifying the server against the test CA, an AMQP upgrade
    over TLS;
  - through estuary-lb --mqtt-ws (when its path is given): MQTT.js reaches
    the node's WebSocket port through the balancer (PROXY v2 header in
    front) and exchanges messages with mosquitto clients over TCP.

usage: /usr/bin/python3 ws_process.py path/to/estuaryd [path/to/estuary-lb]
"""

import base64
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from estuary_process import FAILURES, EstuaryLb, Estuaryd, LineReader, check, port_of  # noqa: E402
from tls_certs import TlsCerts  # noqa: E402

DEADLINE = 20.0  # for a Node client's lines and the mosquitto clients


def recv_until(sock, predicate, deadline=5.0):
    """Bytes read until predicate(data) or EOF or the deadline."""
    sock.settimeout(0.2)
    data = b""
    end = time.monotonic() + deadline
    while time.monotonic() < end and not predicate(data):
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def closed(sock, deadline=5.0):
    """True once the peer closed (EOF or reset) within the deadline."""
    sock.settimeout(deadline)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def upgrade_request(path="/mqtt", protocol="mqtt"):
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    if protocol:
        lines.append("Sec-WebSocket-Protocol: " + protocol)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def frame(opcode, payload, masked=True, fin=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    bit = 0x80 if masked else 0
    if len(payload) < 126:
        head += bytes([bit | len(payload)])
    elif len(payload) < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", len(payload))
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", len(payload))
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def parse_frames(data):
    """[(opcode, payload)] of the server's (unmasked) frames in data."""
    frames = []
    while len(data) >= 2:
        opcode, length = data[0] & 0x0F, data[1] & 0x7F
        at = 2
        if length == 126:
            length, at = struct.unpack("!H", data[2:4])[0], 4
        elif length == 127:
            length, at = struct.unpack("!Q", data[2:10])[0], 10
        if len(data) < at + length:
            break
        frames.append((opcode, data[at:at + length]))
        data = data[at + length:]
    return frames


def close_status(data):
    for opcode, payload in parse_frames(data):
        if opcode == 0x8 and len(payload) >= 2:
            return struct.unpack("!H", payload[:2])[0]
    return None


def open_ws(port, path="/mqtt", protocol="mqtt", prefix=b""):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(prefix + upgrade_request(path, protocol))
    head = recv_until(sock, lambda d: b"\r\n\r\n" in d)
    return sock, head


MQTT_CONNECT = bytes([0x10, 0x10, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x04]) + b"raw1"
PINGREQ = bytes([0xC0, 0x00])


def refusals(port):
    sock, head = open_ws(port, protocol="")
    check(head.startswith(b"HTTP/1.1 400") and b"must offer mqtt" in head + recv_until(sock, lambda d: b"\n" in d),
          "MQTT-6.0.0-3: no mqtt subprotocol offered: 400 with the reason")
    check(closed(sock), "the refused socket is closed")
    sock, head = open_ws(port, path="/elsewhere")
    check(head.startswith(b"HTTP/1.1 404"), "another path: 404")
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n")
    head = recv_until(sock, lambda d: b"\r\n\r\n" in d)
    check(head.startswith(b"HTTP/1.1 426") and b"Upgrade: websocket" in head, "plain HTTP: 426 Upgrade Required")
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(MQTT_CONNECT)
    head = recv_until(sock, lambda d: b"\r\n\r\n" in d)
    check(head.startswith(b"HTTP/1.1 400") and closed(sock), "MQTT bytes on the WebSocket port: 400 and closed")


def handshake_timeout(port, timeout_ms):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /mqtt HTTP/1.1\r\n")  # and no more
    started = time.monotonic()
    ended = closed(sock, deadline=timeout_ms / 1000.0 + 5)
    took = time.monotonic() - started
    check(ended and timeout_ms / 1000.0 * 0.8 <= took < timeout_ms / 1000.0 + 3,
          "a half request is reset after --ws-handshake-timeout %d ms (took %.2f s)" % (timeout_ms, took))


def framing(port):
    sock, head = open_ws(port)
    check(head.startswith(b"HTTP/1.1 101") and b"Sec-WebSocket-Protocol: mqtt\r\n" in head,
          "MQTT-6.0.0-4: 101 Switching Protocols selects mqtt")
    sock.sendall(b"".join(frame(0x2, MQTT_CONNECT[i:i + 1]) for i in range(len(MQTT_CONNECT))))
    data = recv_until(sock, lambda d: any(p[:1] == b"\x20" for _, p in parse_frames(d)))
    check(any(op == 0x2 and p[:1] == b"\x20" for op, p in parse_frames(data)),
          "MQTT-6.0.0-2: a CONNECT spread over one frame per byte gets its CONNACK (binary frame)")
    sock.sendall(frame(0x9, b"are you there"))
    data = recv_until(sock, lambda d: any(op == 0xA for op, _ in parse_frames(d)))
    check((0xA, b"are you there") in parse_frames(data), "a ping gets its pong")
    sock.sendall(frame(0x8, struct.pack("!H", 1000)))
    data = recv_until(sock, lambda d: close_status(d) is not None)
    check(close_status(data) == 1000 and closed(sock), "a client close (1000) is echoed and the socket closed")

    sock, head = open_ws(port)
    connect = MQTT_CONNECT.replace(b"raw1", b"raw2")
    sock.sendall(frame(0x2, connect + PINGREQ))
    data = recv_until(sock, lambda d: b"\xd0\x00" in b"".join(p for _, p in parse_frames(d)))
    payload = b"".join(p for _, p in parse_frames(data))
    check(payload.startswith(b"\x20") and b"\xd0\x00" in payload,
          "MQTT-6.0.0-2: a CONNECT and a PINGREQ in one frame: CONNACK and PINGRESP")
    sock.close()

    for what, wire, status in (("an unmasked frame", frame(0x2, MQTT_CONNECT, masked=False), 1002),
                               ("MQTT-6.0.0-1: a text frame", frame(0x1, b"hello"), 1003),
                               # the header (length 300000), the mask and 1000 bytes: refused at
                               # its first payload, with no bytes of ours left unread
                               ("a frame over --max-packet-size", frame(0x2, b"x" * 300000)[:1014], 1009)):
        sock, head = open_ws(port)
        sock.sendall(wire)
        data = recv_until(sock, lambda d: close_status(d) is not None)
        check(close_status(data) == status and closed(sock), "%s closes with %d (got %s)" %
              (what, status, close_status(data)))


def node_lines(reader, want):
    """A Node client's lines until one starts with `want`, ERROR or TIMEOUT
    (or it exits, or DEADLINE passes). `reader`: the client's LineReader."""
    return reader.lines_until(want, "ERROR", "TIMEOUT", deadline_s=DEADLINE)


def mqtt_js(tcp_port, ws_port, how="directly", url="ws://127.0.0.1:%d/mqtt", ca=None):
    env = dict(os.environ, ESTUARY_WS_CA=ca) if ca else None
    client = subprocess.Popen(["node", os.path.join(HERE, "mqtt_ws.js"), url % ws_port],
                              stdout=subprocess.PIPE, cwd=HERE, env=env)
    reader = LineReader(client)
    lines = node_lines(reader, "READY")
    check(lines[-1:] == ["READY"], "MQTT.js (%s): four clients connected and subscribed over WebSocket (%s)" % (how, lines))
    ids = ["ws-a", "ws-b", "ws-c", "ws-d"]
    for client_id in ids:
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(tcp_port), "-q", "1",
                        "-t", "ws/in/" + client_id, "-m", "to-" + client_id], check=True, timeout=DEADLINE)
    lines = node_lines(reader, "SENT")
    got = sorted(line for line in lines if line.startswith("GOT"))
    check(got == sorted("GOT %s to-%s" % (i, i) for i in ids),
          "MQTT.js over WebSocket (%s) got what mosquitto_pub sent over TCP (%s)" % (how, lines))
    check(client.wait(DEADLINE) == 0, "MQTT.js disconnected cleanly")
    for client_id in ids:
        out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(tcp_port), "-t",
                              "ws/out/" + client_id, "-C", "1", "-W", "10"], capture_output=True, timeout=DEADLINE)
        check(out.stdout.strip() == ("from-" + client_id).encode(),
              "mosquitto_sub over TCP got %s's message from MQTT.js" % client_id)
    out = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(tcp_port), "-t", "ws/big",
                          "-C", "1", "-W", "10", "-N"], capture_output=True, timeout=DEADLINE)
    check(out.stdout == b"a" * 100000, "a 100,000-byte message from MQTT.js arrives whole (%d bytes)" % len(out.stdout))


def rhea(broker, ws_port):
    client = subprocess.Popen(["node", os.path.join(HERE, "amqp_ws.js"), "ws://127.0.0.1:%d" % ws_port],
                              stdout=subprocess.PIPE, cwd=HERE)
    reader = LineReader(client)
    lines = node_lines(reader, "READY")
    check(lines[-1:] == ["READY"], "rhea: two connections with receivers attached over WebSocket (%s)" % lines)
    subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(broker.mqtt_port), "-q", "1", "-t", "ws/amqp",
                    "-m", "from-mqtt"], check=True, timeout=DEADLINE)
    lines = node_lines(reader, "GOT ws/amqp-loop loop-3")
    check("GOT ws/amqp from-mqtt" in lines, "rhea over WebSocket got what mosquitto_pub sent over TCP (%s)" % lines)
    check(all("GOT ws/amqp-loop loop-%d" % n in lines for n in (1, 2, 3)), "rhea's own messages round trip")
    check(client.wait(DEADLINE) == 0, "rhea closed cleanly")


def proxy_header(source_ip, source_port=40000):
    signature = b"\r\n\r\n\x00\r\nQUIT\n"
    addresses = socket.inet_aton(source_ip) + socket.inet_aton("127.0.0.1") + struct.pack("!HH", source_port, 1)
    return signature + bytes([0x21, 0x11]) + struct.pack("!H", len(addresses)) + addresses


def behind_balancer(binary):
    broker = Estuaryd(binary, "--shards", "2", "--mqtt-ws", "127.0.0.1:0", "--proxy-from", "127.0.0.1",
                      "--max-connections-per-ip", "1")
    try:
        port = port_of(broker.fields["mqtt_ws"])
        first, head = open_ws(port, prefix=proxy_header("10.0.0.1"))
        check(head.startswith(b"HTTP/1.1 101"), "--proxy-from: a PROXY v2 header, then the upgrade: 101")
        second, head = open_ws(port, prefix=proxy_header("10.0.0.1", 40001))
        check(not head.startswith(b"HTTP/1.1 101") and closed(second),
              "--max-connections-per-ip 1 refuses a second WebSocket from the address the header names")
        third, head = open_ws(port, prefix=proxy_header("10.0.0.2"))
        check(head.startswith(b"HTTP/1.1 101"), "another address behind the balancer still gets in")
        bare, head = open_ws(port)
        check(not head.startswith(b"HTTP/1.1 101") and closed(bare), "no PROXY header from the balancer: closed")
        for sock in (first, third):
            sock.close()
    finally:
        broker.stop()


def through_balancer(binary, balancer):
    broker = Estuaryd(binary, "--shards", "2", "--mqtt-ws", "127.0.0.1:0", "--proxy-from", "127.0.0.1")
    lb = EstuaryLb(balancer, "--mqtt-ws", "127.0.0.1:0", "--nodes", broker.admin, "--role", "active",
                   "--startup-wait", "0", "--poll-interval", "50", "--log-level", "warn")
    try:
        fields = lb.fields
        check("mqtt_ws" in fields, "estuary-lb's ready line names mqtt_ws= (%r)" % lb.ready_line)
        if "mqtt_ws" not in fields:
            return
        lb_port = port_of(fields["mqtt_ws"])
        end = time.monotonic() + DEADLINE
        head = b""
        while time.monotonic() < end:  # until the balancer has probed the node
            sock, head = open_ws(lb_port)
            sock.close()
            if head.startswith(b"HTTP/1.1 101"):
                break
            time.sleep(0.05)  # poll interval of the condition, bounded by the deadline
        check(head.startswith(b"HTTP/1.1 101"), "a WebSocket upgrade through estuary-lb --mqtt-ws: 101")
        # mosquitto reaches the node through the balancer too (--proxy-from).
        mqtt_js(port_of(fields["mqtt"]), lb_port, "through estuary-lb")
    finally:
        lb.stop()
        broker.stop()


def secure(binary):
    folder = tempfile.mkdtemp(prefix="estuary-wss-")
    try:
        certs = TlsCerts(folder)
        broker = Estuaryd(binary, "--shards", "2", "--mqtt-wss", "127.0.0.1:0", "--amqp-wss", "127.0.0.1:0",
                          "--tls-cert", certs.server_cert, "--tls-key", certs.server_key)
        try:
            check("mqtt_wss" in broker.fields and "amqp_wss" in broker.fields,
                  "the ready line names mqtt_wss= and amqp_wss= (%s)" % broker.ready_line)
            context = ssl.create_default_context(cafile=certs.ca)
            raw = socket.create_connection(("127.0.0.1", port_of(broker.fields["amqp_wss"])), timeout=5)
            sock = context.wrap_socket(raw, server_hostname="localhost")
            sock.sendall(upgrade_request("/", "amqp"))
            head = recv_until(sock, lambda d: b"\r\n\r\n" in d)
            check(head.startswith(b"HTTP/1.1 101") and b"Sec-WebSocket-Protocol: amqp\r\n" in head,
                  "--amqp-wss: TLS, then 101 selecting amqp")
            sock.close()
            mqtt_js(broker.mqtt_port, port_of(broker.fields["mqtt_wss"]), "over TLS, --mqtt-wss",
                    url="wss://localhost:%d/mqtt", ca=certs.ca)
        finally:
            broker.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    binary = sys.argv[1]
    broker = Estuaryd(binary, "--shards", "2", "--mqtt-ws", "127.0.0.1:0", "--amqp-ws", "127.0.0.1:0",
                      "--max-packet-size", "200000", "--ws-handshake-timeout", "700")
    try:
        check("mqtt_ws" in broker.fields and "amqp_ws" in broker.fields,
              "the ready line names mqtt_ws= and amqp_ws= (%s)" % broker.ready_line)
        ws_port = port_of(broker.fields["mqtt_ws"])
        refusals(ws_port)
        handshake_timeout(ws_port, 700)
        framing(ws_port)
        mqtt_js(broker.mqtt_port, ws_port)
        rhea(broker, port_of(broker.fields["amqp_ws"]))
        check(broker.process.poll() is None, "estuaryd is still running")
    finally:
        check(broker.stop() == 0, "estuaryd stopped cleanly on SIGTERM")
    behind_balancer(binary)
    secure(binary)
    if len(sys.argv) > 2:
        through_balancer(binary, sys.argv[2])
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
