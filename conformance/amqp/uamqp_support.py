"""What conformance/amqp/uamqp_suite.py's tests share: a TLS terminator in
front of estuaryd's plain AMQP port (uAMQP's Python binding only speaks
TLS), uAMQP links whose address is a bare topic or filter, an MQTT 5 Paho
client with its loop running, and receives with deadlines. Every wait
has a deadline; nothing sleeps for correctness.
"""

import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
import time

import uamqp
from uamqp import address, authentication, c_uamqp
import paho.mqtt.client as mqtt

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE  # noqa: E402


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


def check_equal(actual, expected, what):
    check(actual == expected, "%s: expected %r, got %r" % (what, expected, actual))


def text(value):
    """uAMQP hands strings and symbols back as bytes."""
    return value.decode() if isinstance(value, bytes) else value


def body_kind(message):
    """DataBody, ValueBody or SequenceBody: the section uAMQP decoded."""
    return type(message._body).__name__  # pylint: disable=protected-access


def body_of(message):
    return b"".join(message.get_data())


class PlainSource(address.Source):
    """A source whose link address is the URL's path alone: uAMQP otherwise
    puts the whole URL (amqps://host/path) in the attach's address."""

    def __init__(self, url, node):
        super().__init__(url)
        self._address.address = c_uamqp.string_value(node.encode())


class PlainTarget(address.Target):
    """A target whose link address is the URL's path alone (see PlainSource)."""

    def __init__(self, url, node):
        super().__init__(url)
        self._address.address = c_uamqp.string_value(node.encode())


class Env:
    """What every test gets: the broker, the TLS port in front of it, the certificate."""

    def __init__(self, broker, tls_port, cert):
        self.broker = broker
        self.tls_port = tls_port
        self.cert = cert

    def source(self, node):
        """`node` as a source; a URL cannot carry it when it holds '#'."""
        return PlainSource("amqps://localhost:%d/source" % self.tls_port, node)

    def target(self, node):
        return PlainTarget("amqps://localhost:%d/target" % self.tls_port, node)

    def auth(self):
        return authentication.SASLAnonymous("localhost", port=self.tls_port, verify=self.cert)

    def receiver(self, source, **options):
        """An attached uAMQP receiver on `source` (its subscription exists on return)."""
        options.setdefault("prefetch", 50)
        options.setdefault("auto_complete", True)
        client = uamqp.ReceiveClient(self.source(source), auth=self.auth(), **options)
        client.open()
        deadline = time.monotonic() + DEADLINE
        while not client.client_ready():
            check(time.monotonic() < deadline, "the receiver on %s never attached" % source)
        return client

    def send(self, target, messages, **options):
        """Sends `messages` on one link to `target`; the list of their final states."""
        client = uamqp.SendClient(self.target(target), auth=self.auth(), **options)
        try:
            for message in messages:
                client.queue_message(message)
            return client.send_all_messages()
        finally:
            client.close()

    def mqtt_client(self, name):
        """A connected MQTT 5 Paho client with its network loop running; messages land in .inbox."""
        client = mqtt.Client(client_id=name, protocol=mqtt.MQTTv5)
        client.inbox = queue.Queue()
        connected = threading.Event()
        subscribed = threading.Event()
        client.on_connect = lambda c, u, flags, reason, props: connected.set()
        client.on_subscribe = lambda c, u, mid, codes, props: subscribed.set()
        client.on_message = lambda c, u, message: client.inbox.put(message)
        client.subscribed = subscribed
        client.connect("127.0.0.1", self.broker.mqtt_port, clean_start=True)
        client.loop_start()
        check(connected.wait(DEADLINE), "MQTT client %s never connected" % name)
        return client


def receive(receiver, count, deadline_s=DEADLINE):
    """Exactly `count` messages from `receiver`, or AssertionError at the deadline."""
    received = []
    deadline = time.monotonic() + deadline_s
    while len(received) < count:
        check(time.monotonic() < deadline, "received %d of %d messages" % (len(received), count))
        received.extend(receiver.receive_message_batch(max_batch_size=count - len(received), timeout=500))
    return received


def mqtt_subscribe(client, topic_filter, qos=1):
    client.subscribed.clear()
    client.subscribe(topic_filter, qos=qos)
    check(client.subscribed.wait(DEADLINE), "SUBACK for %s never came" % topic_filter)


def mqtt_stop(client):
    client.disconnect()
    client.loop_stop()
