#!/usr/bin/python3
"""kill -9 of the node under an exactly-once AMQP receiver (issue 26 point
1, fault-suite style; docs/amqp.md "Exactly-once links"): counts of
messages published, delivered to the application, lost and duplicated.

A Paho MQTT publisher sends N QoS 2 messages (each PUBCOMP'd, so stored)
to a durable (§3.5.3 durable, §3.5.6 expiry never) Proton Python receiver
link in rcv-settle-mode second on a node with --data-dir and --sync
always. The receiver takes them a few at a time; once every message is
published (the link detached meanwhile) and half are taken, the node is killed with SIGKILL and
restarted on the same data dir; the receiver reconnects with the same
container-id and link name and takes the rest.

The receiver behaves as mode second asks of it (§2.7.3, §3.4.6): it gives
each delivery an outcome without settling and keeps (tag, body) until the
broker settles; a transfer that arrives under a kept tag with the same
body is a resend of a delivery it already has (answered, not handed to
the application again). Proton-C drops the broker's unsettled map from
the attach, so a kept tag that comes back with another body is taken as a
new delivery reusing the id.

The other way across protocols (issue 26 point 2, on one node): an
exactly-once AMQP sender (rcv-settle-mode second) has N transfers accepted
and settles them, while a persistent MQTT 3.1.1 QoS 2 subscriber is
offline; the subscriber (one Paho client object throughout, so its QoS 2
state survives its reconnects, as an application's would) takes them
slowly, the node is killed with SIGKILL half-way and restarted, and the
same client reconnects and takes the rest. Paho hands a QoS 2 message to
the application at PUBREL, once.

Targets: lost 0 and duplicated 0. The script exits non-zero on either.

usage: /usr/bin/python3 exactly_once_kill.py path/to/estuaryd
"""

import os
import sys
import tempfile
import threading
import time

from proton import Delivery, Link, Message, Terminus, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, Estuaryd, check, metric, wait_for  # noqa: E402
from paho_client import PahoClient  # noqa: E402
import paho.mqtt.client as mqtt  # noqa: E402

MESSAGES = 300
TOPIC = "eok/x"


class DurableExactlyOnce(LinkOption):
    def apply(self, link):
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER


class Receiver(MessagingHandler):
    """Application deliveries appended to `delivered` (shared by every
    connection's handler: events may still run while a dead connection is
    closed); kept (tag -> body) until the broker settles."""

    def __init__(self, kept, delivered):
        super().__init__(prefetch=5, auto_accept=False)
        self.kept = kept
        self.delivered = delivered
        self.resends = 0

    def on_message(self, event):
        body = event.message.body
        body = body.decode() if isinstance(body, bytes) else str(body)
        tag = event.delivery.tag
        if self.kept.get(tag) == body:
            self.resends += 1  # already ours: answered again, not handed on
        else:
            self.delivered.append(body)
            self.kept[tag] = body
        event.delivery.update(Delivery.ACCEPTED)

    def on_settled(self, event):
        self.kept.pop(event.delivery.tag, None)
        event.delivery.settle()


class Attached:
    """One connection of the receiver, its link (held: the link's handler
    lives only as long as its Python wrapper) and its handler."""

    def __init__(self, broker, kept, delivered):
        container = Container()
        container.container_id = "eok-receiver"
        self.connection = BlockingConnection("amqp://%s:%d" % (broker.host, broker.amqp_port), timeout=DEADLINE,
                                             container=container)
        self.handler = Receiver(kept, delivered)
        self.link = self.connection.create_receiver(TOPIC, name="r", credit=0, handler=self.handler,
                                                    options=DurableExactlyOnce())

    def take(self, until):
        """Runs the receiver until `until()`, or 6 * DEADLINE s."""
        try:
            self.connection.wait(until, timeout=6 * DEADLINE)
        except Timeout:  # what did not come is counted as lost
            pass


def publish_all(broker, published):
    publisher = PahoClient(broker.host, broker.mqtt_port, "eok-publisher", None, None, protocol=mqtt.MQTTv311)
    for i in range(MESSAGES):
        publisher.publish(TOPIC, "k-%d" % i, qos=2)  # waits for PUBCOMP
    publisher.close()
    published.set()


class ExactlyOnceSender(LinkOption):
    def apply(self, link):
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND


def sender_connection(broker, address=TOPIC):
    container = Container()
    container.container_id = "eok-sender"
    connection = BlockingConnection("amqp://%s:%d" % (broker.host, broker.amqp_port), timeout=DEADLINE,
                                    container=container)
    return connection, connection.create_sender(address, name="s", options=ExactlyOnceSender())


def send_all_accepted(connection, sender, count, prefix="i-"):
    """Sends i-0.. under tags t0.., waits until each is accepted; settles none."""
    deliveries = []
    for i in range(count):
        connection.wait(lambda: sender.link.credit > 0, timeout=DEADLINE, msg="credit")
        deliveries.append(Message(body="%s%d" % (prefix, i)).send(sender.link, "t%d" % i))
    connection.wait(lambda: all(d.remote_state == Delivery.ACCEPTED for d in deliveries), timeout=DEADLINE,
                    msg="accepted for every transfer")
    return deliveries


def inbound(binary, flags):
    """A mode-second sender's accepted, unsettled transfers across kill -9:
    sent again under their tags after the restart, each published once."""
    count = 10
    broker = Estuaryd(binary, *flags)
    kept, seen = {}, []
    try:
        receiver = Attached(broker, kept, seen)  # the durable subscription, detached while publishing
        receiver.link.detach()
        receiver.connection.close()
        connection, sender = sender_connection(broker)
        send_all_accepted(connection, sender, count)
        broker.kill()  # accepted and remembered, not settled by the client
        try:
            connection.close()
        except Exception:  # the socket died with the node
            pass
        broker = Estuaryd(binary, *flags)
        kept_tags = metric(broker, "estuary_amqp_exactly_once_kept_tags")
        suspended = metric(broker, "estuary_amqp_exactly_once_suspended_links")
        check(kept_tags == count and suspended == 1, "inbound: /metrics shows the %d kept tags of 1 suspended link "
              "read back after kill -9 (%d, %d)" % (count, kept_tags, suspended))
        connection, sender = sender_connection(broker)  # the link recovered (§2.6.13)
        for delivery in send_all_accepted(connection, sender, count):
            delivery.settle()
        resends = metric(broker, "estuary_amqp_exactly_once_resends_total")
        check(resends == count, "inbound: /metrics counts the %d resends answered (%d)" % (count, resends))
        # A last message after the resends: a second copy of any of them
        # would be queued before it.
        end = Message(body="i-end").send(sender.link, "t-end")
        connection.wait(lambda: end.remote_state == Delivery.ACCEPTED, timeout=DEADLINE, msg="accepted for i-end")
        end.settle()
        connection.close()
        receiver = Attached(broker, kept, seen)
        receiver.take(lambda: "i-end" in seen)
        receiver.connection.close()
    finally:
        status = broker.stop()
    distinct = set(seen)
    lost = count + 1 - len(distinct & ({"i-%d" % i for i in range(count)} | {"i-end"}))
    duplicated = len(seen) - len(distinct)
    print("inbound: sent %d, each again after kill -9; delivered %d, lost %d, duplicated %d"
          % (count, len(seen), lost, duplicated), flush=True)
    check(lost == 0, "inbound: no accepted transfer lost across kill -9 (lost %d)" % lost)
    check(duplicated == 0, "inbound: a resend of an accepted tag after kill -9 is not published again "
          "(duplicated %d)" % duplicated)
    check(status == 0, "inbound: restarted estuaryd exits 0 on SIGTERM (status %s)" % status)


class SlowQos2Subscriber:
    """A persistent MQTT 3.1.1 session subscribed at QoS 2 on `topic`, one
    Paho client for the whole run (its inbound QoS 2 state survives its
    reconnects); the application's messages land in `delivered`, each after
    a short pause (the PUBCOMP waits for it), so a kill finds messages at
    every stage."""

    def __init__(self, topic):
        self.delivered = []
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(client_id="eok-mqtt-sub", protocol=mqtt.MQTTv311, clean_session=False)
        self.client.on_connect = lambda *args: self.connected.set()
        self.client.on_subscribe = lambda *args: self.subscribed.set()
        self.client.on_message = self._on_message
        self.topic = topic

    def _on_message(self, client, userdata, message):
        self.delivered.append(message.payload.decode())
        time.sleep(0.005)  # pacing the application (its PUBCOMP waits), not a wait on a condition

    def connect(self, broker):
        self.connected.clear()
        self.client.connect(broker.host, broker.mqtt_port, keepalive=60)
        self.client.loop_start()
        check(self.connected.wait(DEADLINE), "to MQTT: the subscriber's CONNACK")

    def subscribe(self):
        self.client.subscribe(self.topic, 2)
        check(self.subscribed.wait(DEADLINE), "to MQTT: the SUBACK")

    def wait(self, condition):
        """True once `condition` holds, False after DEADLINE."""
        try:
            return bool(wait_for("the subscriber's deliveries", condition))
        except AssertionError:
            return False

    def stop(self, disconnect=True):
        if disconnect:
            self.client.disconnect()
        self.client.loop_stop()


def to_mqtt(binary, flags):
    """An exactly-once AMQP sender's transfers to a QoS 2 MQTT subscriber
    across kill -9 of the node: each delivered to the application once."""
    count = 200
    topic = "eok/m"
    broker = Estuaryd(binary, *flags)
    subscriber = SlowQos2Subscriber(topic)
    taken_before_kill = 0
    try:
        subscriber.connect(broker)
        subscriber.subscribe()
        subscriber.stop()  # offline: the session keeps what is published
        connection, sender = sender_connection(broker, topic)
        for delivery in send_all_accepted(connection, sender, count, prefix="m-"):
            delivery.settle()
        connection.close()
        subscriber.connect(broker)
        check(subscriber.wait(lambda: len(subscriber.delivered) >= count // 2),
              "to MQTT: half the messages delivered before the kill")
        broker.kill()  # kill -9 mid-stream: PUBRECs, PUBRELs and PUBCOMPs on the wire
        taken_before_kill = len(subscriber.delivered)
        subscriber.stop(disconnect=False)
        broker = Estuaryd(binary, *flags)
        subscriber.connect(broker)
        subscriber.wait(lambda: len(set(subscriber.delivered)) >= count)
        subscriber.stop()
    finally:
        status = broker.stop()
    seen = subscriber.delivered
    distinct = set(seen)
    lost = len({"m-%d" % i for i in range(count)} - distinct)
    duplicated = len(seen) - len(distinct)
    print("to MQTT: sent %d exactly once over AMQP, %d delivered before kill -9, %d in all, lost %d, "
          "duplicated %d" % (count, taken_before_kill, len(seen), lost, duplicated), flush=True)
    check(taken_before_kill < count, "to MQTT: the kill came before the last delivery (%d of %d)"
          % (taken_before_kill, count))
    check(lost == 0, "to MQTT: no accepted transfer lost across kill -9 (lost %d)" % lost)
    check(duplicated == 0, "to MQTT: no message handed to the QoS 2 subscriber twice (duplicated %d)"
          % duplicated)
    check(status == 0, "to MQTT: restarted estuaryd exits 0 on SIGTERM (status %s)" % status)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as data_dir:
        flags = ("--node-id", "1", "--data-dir", data_dir, "--sync", "always", "--shards", "2",
                 "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace", "500")
        broker = Estuaryd(binary, *flags)
        kept = {}
        seen = []
        resends = 0
        try:
            # The durable subscription made, then the link detached (kept,
            # §3.5.6) while all N are published and stored in its queue.
            receiver = Attached(broker, kept, seen)
            receiver.link.detach()
            receiver.connection.close()
            published = threading.Event()
            publish_all(broker, published)
            check(published.is_set(), "the publisher's %d QoS 2 messages were all completed" % MESSAGES)
            receiver = Attached(broker, kept, seen)
            receiver.take(lambda: len(seen) >= MESSAGES // 2)
            resends += receiver.handler.resends
            broker.kill()  # kill -9: deliveries unsettled, outcomes and settlements on the wire
            try:
                receiver.connection.close()
            except Exception:  # the socket died with the node
                pass
            broker = Estuaryd(binary, *flags)
            receiver = Attached(broker, kept, seen)
            receiver.take(lambda: len(set(seen)) >= MESSAGES)
            resends += receiver.handler.resends
            receiver.connection.close()
        finally:
            status = broker.stop()
    distinct = set(seen)
    lost = len({"k-%d" % i for i in range(MESSAGES)} - distinct)
    duplicated = len(seen) - len(distinct)
    print("published %d, delivered %d, distinct %d, lost %d, duplicated %d, resends answered by tag %d"
          % (MESSAGES, len(seen), len(distinct), lost, duplicated, resends), flush=True)
    missing = sorted({"k-%d" % i for i in range(MESSAGES)} - distinct, key=lambda b: int(b[2:]))
    check(lost == 0, "no message lost across kill -9 (lost %d%s)" % (lost, ": %s" % missing[:20] if missing else ""))
    check(duplicated == 0, "no message handed to the application twice (duplicated %d)" % duplicated)
    check(status == 0, "restarted estuaryd exits 0 on SIGTERM (status %s)" % status)
    with tempfile.TemporaryDirectory() as data_dir:
        inbound(binary, ("--node-id", "1", "--data-dir", data_dir, "--sync", "always", "--shards", "2",
                         "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace", "500"))
    with tempfile.TemporaryDirectory() as data_dir:
        to_mqtt(binary, ("--node-id", "1", "--data-dir", data_dir, "--sync", "always", "--shards", "2",
                         "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace", "500"))
    if FAILURES:
        raise SystemExit("FAIL: %d check(s) failed" % len(FAILURES))
    print("PASS: exactly_once_kill")


if __name__ == "__main__":
    main()
