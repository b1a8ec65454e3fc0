#!/usr/bin/python3
"""Smoke test on a second AMQP 1.0 stack: Debian's python3-uamqp (the Azure
uAMQP C library, not Proton) sends to and receives from estuaryd unchanged:
SASL ANONYMOUS, an unsettled send accepted by the broker, a receive with
credit, and a pre-settled send.

uAMQP's Python binding only speaks TLS, so the script puts a small TLS
terminator (a self-signed certificate made with openssl, trusted by the
client) in front of the node's plain AMQP port; every AMQP byte still goes
between uAMQP and estuaryd unchanged.

Starts its own estuaryd on free ports and stops it with SIGTERM, expecting
exit status 0. Waits only on events with deadlines, never sleeps.

usage: /usr/bin/python3 uamqp_smoke.py path/to/estuaryd
"""

import os
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import uamqp
from uamqp import authentication
from uamqp.constants import MessageState, SenderSettleMode

DEADLINE = 10  # seconds for any single wait


class Broker:
    def __init__(self, binary):
        self.process = subprocess.Popen(
            [binary, "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--admin", "127.0.0.1:0",
             "--cluster", "127.0.0.1:0", "--shards", "2", "--log-level", "warn", "--sys-interval", "0",
             "--shutdown-grace", "500"],
            stdout=subprocess.PIPE)
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        if not selector.select(DEADLINE):
            self.process.kill()
            raise SystemExit("FAIL: no ready line from %s" % binary)
        line = self.process.stdout.readline().decode().strip()
        if not line.startswith("estuaryd ready "):
            self.process.kill()
            raise SystemExit("FAIL: unexpected first line %r" % line)
        print("broker:", line)
        fields = dict(word.split("=", 1) for word in line.split()[2:])
        host, port = fields["amqp"].rsplit(":", 1)
        self.host, self.port = host, int(port)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -1


def make_certificate(directory):
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


class TlsTerminator:
    """Accepts TLS on a free loopback port and relays the plain bytes to the broker."""

    def __init__(self, cert, key, upstream):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(raw,), daemon=True).start()

    def serve(self, raw):
        try:
            secure = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        plain = socket.create_connection(self.upstream)
        threading.Thread(target=self.pump, args=(plain, secure), daemon=True).start()
        self.pump(secure, plain)

    @staticmethod
    def pump(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def body_of(message):
    return b"".join(message.get_data())


def run(port, cert):
    address = "amqps://localhost:%d/smoke/uamqp" % port
    receiver = uamqp.ReceiveClient(
        address, auth=authentication.SASLAnonymous("localhost", port=port, verify=cert),
        prefetch=10, auto_complete=True)
    receiver.open()
    deadline = time.monotonic() + DEADLINE
    while not receiver.client_ready():  # the attach: the subscription exists from here on
        check(time.monotonic() < deadline, "the receiver link never attached")

    sender = uamqp.SendClient(address, auth=authentication.SASLAnonymous("localhost", port=port, verify=cert))
    sender.queue_message(uamqp.Message(b"hello from uamqp"))
    results = sender.send_all_messages()
    check(results == [MessageState.SendComplete], "unsettled send not accepted: %r" % (results,))
    sender.close()

    presettled = uamqp.SendClient(address, auth=authentication.SASLAnonymous("localhost", port=port, verify=cert),
                                  send_settle_mode=SenderSettleMode.Settled)
    presettled.queue_message(uamqp.Message(b"pre-settled"))
    results = presettled.send_all_messages()
    check(results == [MessageState.SendComplete], "pre-settled send failed: %r" % (results,))
    presettled.close()

    received = []
    deadline = time.monotonic() + DEADLINE
    while len(received) < 2 and time.monotonic() < deadline:
        batch = receiver.receive_message_batch(max_batch_size=2, timeout=1000)
        received.extend(body_of(m) for m in batch)
    receiver.close()
    check(received == [b"hello from uamqp", b"pre-settled"], "received %r" % (received,))
    print("PASS: uamqp sent (unsettled and pre-settled) and received through estuaryd")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    broker = Broker(sys.argv[1])
    status = 1
    try:
        with tempfile.TemporaryDirectory() as directory:
            cert, key = make_certificate(directory)
            terminator = TlsTerminator(cert, key, (broker.host, broker.port))
            run(terminator.port, cert)
            status = 0
    except AssertionError as error:
        print("FAIL:", error)
    finally:
        exit_status = broker.stop()
        if exit_status != 0:
            print("FAIL: estuaryd exited with status", exit_status)
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
