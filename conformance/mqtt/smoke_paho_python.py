#!/usr/bin/python3
"""Smoke test: the Debian-packaged Eclipse Paho Python client (paho-mqtt 1.6,
python3-paho-mqtt) works against estuaryd unchanged, in MQTT 3.1.1 and 5.0:
publish/subscribe at QoS 1 and 2, and a will published when a client's
connection drops.

Starts its own estuaryd on free ports and stops it with SIGTERM, expecting
exit status 0. Waits only on events with deadlines, never sleeps.

usage: /usr/bin/python3 smoke_paho_python.py path/to/estuaryd
(only Debian's /usr/bin/python3 has the paho module)
"""

import os
import queue
import socket
import sys
import threading

import paho.mqtt
import paho.mqtt.client as mqtt

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, SINGLE_NODE_FLAGS, Estuaryd  # noqa: E402


class Client:
    """A paho client on its own network thread; events land in queues."""

    def __init__(self, broker, client_id, protocol, will=None):
        self.protocol = protocol
        self.client = mqtt.Client(client_id=client_id, protocol=protocol)
        self.connected = threading.Event()
        self.subscribed = queue.Queue()
        self.messages = queue.Queue()
        self.client.on_connect = lambda *args: self.connected.set()
        self.client.on_subscribe = lambda client, userdata, mid, *rest: self.subscribed.put(mid)
        self.client.on_message = lambda client, userdata, message: self.messages.put(message)
        if will:
            self.client.will_set(*will)
        self.client.connect(broker.host, broker.mqtt_port, keepalive=60)

    def start(self):
        self.client.loop_start()
        if not self.connected.wait(DEADLINE):
            raise AssertionError("no CONNACK")
        return self

    def subscribe(self, topic, qos):
        _, mid = self.client.subscribe(topic, qos)
        if self.subscribed.get(timeout=DEADLINE) != mid:
            raise AssertionError("SUBACK for another request")

    def publish(self, topic, payload, qos):
        info = self.client.publish(topic, payload, qos)
        info.wait_for_publish(DEADLINE)
        if not info.is_published():
            raise AssertionError("publish at QoS %d not acknowledged" % qos)

    def next_message(self):
        return self.messages.get(timeout=DEADLINE)

    def stop(self):
        self.client.disconnect()
        self.client.loop_stop()


def check_pub_sub(broker, protocol, name):
    topic = "smoke/python/%s/%d" % (name, os.getpid())
    subscriber = Client(broker, "sub-%s-%d" % (name, os.getpid()), protocol).start()
    publisher = Client(broker, "pub-%s-%d" % (name, os.getpid()), protocol).start()
    try:
        subscriber.subscribe(topic + "/#", 2)
        for qos in (1, 2):
            publisher.publish("%s/q%d" % (topic, qos), b"at qos %d" % qos, qos)
            message = subscriber.next_message()
            assert message.topic == "%s/q%d" % (topic, qos), message.topic
            assert message.payload == b"at qos %d" % qos, message.payload
            assert message.qos == qos, message.qos
            print("ok: %s: QoS %d publish and subscribe" % (name, qos))
    finally:
        publisher.stop()
        subscriber.stop()


def check_will(broker, protocol, name):
    topic = "smoke/python/%s/will/%d" % (name, os.getpid())
    watcher = Client(broker, "watch-%s-%d" % (name, os.getpid()), protocol).start()
    try:
        watcher.subscribe(topic, 1)
        # The doomed client is driven by hand (no network thread), so that
        # its socket can be cut without the library noticing first.
        doomed = Client(broker, "doomed-%s-%d" % (name, os.getpid()), protocol,
                        will=(topic, b"connection lost", 1, False))
        while not doomed.connected.is_set():
            if doomed.client.loop(timeout=DEADLINE) != mqtt.MQTT_ERR_SUCCESS:
                raise AssertionError("the will client could not connect")
        doomed.client.socket().shutdown(socket.SHUT_RDWR)  # no DISCONNECT: the network failed
        doomed.client.socket().close()
        message = watcher.next_message()
        assert message.topic == topic and message.payload == b"connection lost", (message.topic, message.payload)
        print("ok: %s: will published when the connection dropped" % name)
    finally:
        watcher.stop()


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print("paho-mqtt", paho.mqtt.__version__)
    broker = Estuaryd(sys.argv[1], *SINGLE_NODE_FLAGS)
    print("broker:", broker.ready_line)
    failures = 0
    try:
        for protocol, name in ((mqtt.MQTTv311, "v3.1.1"), (mqtt.MQTTv5, "v5")):
            for check in (check_pub_sub, check_will):
                try:
                    check(broker, protocol, name)
                except (AssertionError, queue.Empty) as error:
                    failures += 1
                    print("FAIL: %s %s: %r" % (name, check.__name__, error))
    finally:
        status = broker.stop()
    if status == 0:
        print("ok: estuaryd exited 0 on SIGTERM")
    else:
        failures += 1
        print("FAIL: estuaryd exit status", status)
    if failures:
        raise SystemExit("%d failure(s)" % failures)
    print("all paho-mqtt (Python) smoke checks passed")


if __name__ == "__main__":
    main()
