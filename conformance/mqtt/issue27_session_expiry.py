#!/usr/bin/python3
"""Issue 27, point 1, against a real estuaryd with Debian's paho-mqtt
(Python, 1.6) in MQTT 5.0, in memory and with --data-dir:

  client x connects with Clean Start 0 and Session Expiry Interval 2 and
  disconnects (that session would expire 2 s later); at once x connects
  with Clean Start 1 and Session Expiry Interval 1, subscribes, and
  disconnects with a DISCONNECT carrying Session Expiry Interval 10.
  Once the first session's 2 s are over, x connects with Clean Start 0:
  CONNACK must say Session Present 1 and the message queued for the
  subscription meanwhile must arrive (MQTT 5.0 3.1.2.11.2, 3.14.2.2.2: the
  new session's expiry is its own). With --data-dir the broker is
  restarted before that last connect.

Waits only on events with deadlines: the broker has acted on a DISCONNECT
once its connection gauge fell; the broker's clock has passed the first
expiry once a will with a longer delay, armed later, arrived.

usage: /usr/bin/python3 issue27_session_expiry.py path/to/estuaryd
"""

import os
import queue
import socket
import sys
import tempfile
import threading
import urllib.request

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, SINGLE_NODE_FLAGS, Estuaryd, wait_for  # noqa: E402

FIRST_EXPIRY = 2  # seconds
CLOCK_DELAY = FIRST_EXPIRY + 1


def metric_sum(broker, name):
    """The sum over shards of one series of the node's /metrics."""
    text = urllib.request.urlopen("http://%s/metrics" % broker.admin, timeout=DEADLINE).read().decode()
    return sum(int(float(line.split()[-1])) for line in text.splitlines() if line.startswith(name + "{"))


class Client:
    """A paho MQTT 5.0 client on its own network thread."""

    def __init__(self, broker, client_id, clean_start, expiry=None, will=None):
        self.client = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
        self.connack = queue.Queue()
        self.subscribed = queue.Queue()
        self.messages = queue.Queue()
        self.client.on_connect = lambda client, userdata, flags, reason, props: self.connack.put((flags, reason))
        self.client.on_subscribe = lambda client, userdata, mid, *rest: self.subscribed.put(mid)
        self.client.on_message = lambda client, userdata, message: self.messages.put(message)
        properties = None
        if expiry is not None:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = expiry
        if will:
            topic, payload, delay = will
            will_properties = Properties(PacketTypes.WILLMESSAGE)
            will_properties.WillDelayInterval = delay
            self.client.will_set(topic, payload, 1, False, will_properties)
        self.client.connect(broker.host, broker.mqtt_port, keepalive=60, clean_start=clean_start,
                            properties=properties)
        self.client.loop_start()
        flags, reason = self.connack.get(timeout=DEADLINE)
        if reason != 0:
            raise AssertionError("CONNACK for %s: %s" % (client_id, reason))
        self.session_present = bool(flags.get("session present"))

    def subscribe(self, topic):
        _, mid = self.client.subscribe(topic, 1)
        if self.subscribed.get(timeout=DEADLINE) != mid:
            raise AssertionError("SUBACK for another request")

    def publish(self, topic, payload):
        info = self.client.publish(topic, payload, 1)
        info.wait_for_publish(DEADLINE)
        if not info.is_published():
            raise AssertionError("PUBLISH to %s not acknowledged" % topic)

    def disconnect(self, expiry=None):
        properties = None
        if expiry is not None:
            properties = Properties(PacketTypes.DISCONNECT)
            properties.SessionExpiryInterval = expiry
        self.client.disconnect(properties=properties)
        self.client.loop_stop()

    def drop(self):
        """The network fails: no DISCONNECT, the will stays armed."""
        self.client.loop_stop()
        self.client.socket().shutdown(socket.SHUT_RDWR)
        self.client.socket().close()


def wait_broker_seconds(broker, watcher, topic, seconds):
    """Returns once `seconds` have passed on the broker's clock from now: a
    will with that delay, from a client dropped now, has arrived."""
    clock = Client(broker, "issue27-clock-%d-%d" % (os.getpid(), seconds), True, expiry=seconds + 60,
                   will=(topic, b"tick", seconds))
    clock.drop()
    message = watcher.messages.get(timeout=seconds + DEADLINE)
    assert message.topic == topic, message.topic


def check(binary, name, flags, restart):
    pid = os.getpid()
    client_id = "issue27-x-%s-%d" % (name, pid)
    topic = "issue27/%s/%d/t" % (name, pid)
    clock_topic = "issue27/%s/%d/clock" % (name, pid)
    broker = Estuaryd(binary, *SINGLE_NODE_FLAGS, *flags)
    try:
        watcher = Client(broker, "issue27-watch-%s-%d" % (name, pid), True)
        watcher.subscribe(clock_topic)
        publisher = Client(broker, "issue27-pub-%s-%d" % (name, pid), True)
        baseline = metric_sum(broker, "estuary_connections")

        def left():
            wait_for("the broker to act on the DISCONNECT",
                     lambda: metric_sum(broker, "estuary_connections") == baseline)

        first = Client(broker, client_id, False, expiry=FIRST_EXPIRY)
        first.disconnect()
        left()
        second = Client(broker, client_id, True, expiry=1)
        assert not second.session_present, "a clean start has no session"
        second.subscribe(topic)
        second.disconnect(expiry=10)
        left()
        wait_broker_seconds(broker, watcher, clock_topic, CLOCK_DELAY)
        expired = metric_sum(broker, "estuary_sessions_expired_total")
        assert expired == 0, "%d session(s) expired: the first session's timer ended the second" % expired
        publisher.publish(topic, b"queued while away")
        publisher.disconnect()
        watcher.disconnect()
        if restart:
            status = broker.stop()
            assert status == 0, "estuaryd exit status %d" % status
            broker = Estuaryd(binary, *SINGLE_NODE_FLAGS, *flags)
        back = Client(broker, client_id, False, expiry=10)
        assert back.session_present, "CONNACK Session Present 0: the session was deleted [MQTT 5.0 3.14.2.2.2]"
        message = back.messages.get(timeout=DEADLINE)
        assert message.topic == topic and message.payload == b"queued while away", (message.topic, message.payload)
        back.disconnect(expiry=0)
        print("ok: %s: the next session outlived the first session's expiry" % name)
    finally:
        status = broker.stop()
    assert status == 0, "estuaryd exit status %d" % status


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="estuary-issue27-") as data_dir:
        for name, flags, restart in (("memory", (), False), ("durable", ("--data-dir", data_dir), True)):
            try:
                check(sys.argv[1], name, flags, restart)
            except (AssertionError, queue.Empty) as error:
                failures += 1
                print("FAIL: %s: %r" % (name, error))
    if failures:
        raise SystemExit("%d failure(s)" % failures)
    print("all issue 27 session expiry checks passed")


if __name__ == "__main__":
    main()
