#!/usr/bin/python3
"""Exactly-once links (AMQP 1.0 §2.7.3 rcv-settle-mode second, §3.4,
§3.4.6; docs/amqp.md "Exactly-once links"; issue 26 point 1) against a real
estuaryd, from Proton Python (python3-qpid-proton: a client stack Estuary
does not write) and Paho MQTT (python3-paho-mqtt).

A client *sender* in mode second:
  - the broker's attach keeps rcv-settle-mode second;
  - m1 (tag t1) is answered accepted and left unsettled by the broker
    until the client settles;
  - the link is detached (not closed: it may be recovered), the connection
    closed, and a new connection with the same container-id attaches the
    link of the same name again and sends m1 under t1 again: answered
    accepted, not published again; then m2 under t2;
  - an MQTT QoS 2 subscriber and an AMQP receiver each get m1 exactly once
    and m2 once (m2 follows m1 from one publisher, so a second m1 would have
    come before m2).
A client *receiver* in mode second:
  - gets every transfer unsettled; the broker does not settle m1 while the
    receiver holds its outcome back (checked once m2 has arrived behind it),
    and settles it once the receiver's accepted arrives.

Starts its own estuaryd on free ports and stops it with SIGTERM, expecting
exit status 0. Waits on conditions with deadlines, never sleeps.

usage: /usr/bin/python3 exactly_once.py path/to/estuaryd
"""

import os
import sys

from proton import Delivery, Link, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, SINGLE_NODE_FLAGS, Estuaryd, check  # noqa: E402
from paho_client import PahoClient  # noqa: E402
import paho.mqtt.client as mqtt  # noqa: E402


class ExactlyOnce(LinkOption):
    """Unsettled transfers, and the receiver settles second (§2.7.3)."""

    def apply(self, link):
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND


class SecondModeReceiver(MessagingHandler):
    """Gives outcomes itself (never settles first); `hold` keeps m1's back."""

    def __init__(self):
        super().__init__(prefetch=20, auto_accept=False)
        self.received = []        # bodies, in order
        self.unsettled_on_arrival = []  # the broker's settled flag as each arrived
        self.held = None          # m1's delivery, outcome not given yet
        self.settled_by_broker = []  # bodies whose settlement the broker sent
        self.bodies_by_tag = {}   # the broker's tags are unique among unsettled transfers

    def on_message(self, event):
        body = event.message.body
        body = body.decode() if isinstance(body, bytes) else str(body)
        self.received.append(body)
        self.unsettled_on_arrival.append(not event.delivery.settled)
        self.bodies_by_tag[event.delivery.tag] = body
        if body == "m1" and self.held is None:
            self.held = event.delivery
        else:
            event.delivery.update(Delivery.ACCEPTED)

    def on_settled(self, event):
        self.settled_by_broker.append(self.bodies_by_tag.get(event.delivery.tag, "?"))
        event.delivery.settle()


def connect(broker, container_id):
    container = Container()
    container.container_id = container_id
    return BlockingConnection("amqp://%s:%d" % (broker.host, broker.amqp_port), timeout=DEADLINE,
                              container=container)


def send(connection, sender, body, tag):
    """The delivery of `body` sent under `tag` on `sender` (a BlockingSender), within its credit."""
    connection.wait(lambda: sender.link.credit > 0, timeout=DEADLINE, msg="credit for " + body)
    message = Message(body=body)
    return message.send(sender.link, tag)


def wait_accepted(connection, delivery, what):
    connection.wait(lambda: delivery.remote_state == Delivery.ACCEPTED, timeout=DEADLINE, msg=what)


def mqtt_bodies(subscriber, until):
    """MQTT payloads received up to and including `until` (or all within DEADLINE)."""
    bodies = []
    while True:
        message = subscriber.next_message()
        if message is None:
            return bodies
        bodies.append(message[1])
        if message[1] == until:
            return bodies


def main():
    binary = sys.argv[1]
    broker = Estuaryd(binary, *SINGLE_NODE_FLAGS)
    try:
        run(broker)
    finally:
        status = broker.stop()
    check(status == 0, "estuaryd exits 0 on SIGTERM (status %s)" % status)
    if FAILURES:
        raise SystemExit("FAIL: %d check(s) failed" % len(FAILURES))
    print("PASS: exactly_once")


def run(broker):
    subscriber = PahoClient(broker.host, broker.mqtt_port, "eo-mqtt", None, None, protocol=mqtt.MQTTv311)
    subscriber.client.subscribe("eo/#", 2)
    subscriber.subacks.get(timeout=DEADLINE)

    receiving = connect(broker, "eo-receiver")
    handler = SecondModeReceiver()
    receiver = receiving.create_receiver("eo/#", name="r", credit=0, handler=handler, options=ExactlyOnce())
    check(receiver.link.remote_rcv_settle_mode == Link.RCV_SECOND, "receiver: the broker's attach keeps mode second")

    first = connect(broker, "eo-sender")
    sender = first.create_sender("eo/a", name="s", options=ExactlyOnce())
    check(sender.link.remote_rcv_settle_mode == Link.RCV_SECOND,
          "sender: the broker's attach keeps rcv-settle-mode second (not downgraded to first)")
    m1 = send(first, sender, "m1", "t1")
    wait_accepted(first, m1, "accepted for m1")
    check(m1.remote_state == Delivery.ACCEPTED and not m1.settled,
          "sender: m1 answered accepted and not settled by the broker before the client settles")
    # Detached, not closed (§2.6.6: the link may be recovered), with m1 unsettled.
    # (A detach without closed leaves the endpoint's state as it is, so there
    # is nothing to wait for; the close that follows comes after it on the wire.)
    sender.link.detach()
    first.close()

    second = connect(broker, "eo-sender")
    recovered = second.create_sender("eo/a", name="s", options=ExactlyOnce())
    again = send(second, recovered, "m1", "t1")
    wait_accepted(second, again, "accepted for the resent m1")
    check(not again.settled, "sender: the resent m1 (same tag, recovered link) is answered accepted, unsettled")
    again.settle()
    m2 = send(second, recovered, "m2", "t2")
    wait_accepted(second, m2, "accepted for m2")
    m2.settle()

    bodies = mqtt_bodies(subscriber, "m2")
    check(bodies == ["m1", "m2"], "MQTT QoS 2 subscriber: m1 once, then m2 (got %r)" % bodies)

    receiving.wait(lambda: "m2" in handler.received, timeout=DEADLINE, msg="m2 at the AMQP receiver")
    check(handler.received == ["m1", "m2"], "AMQP receiver: m1 once, then m2 (got %r)" % handler.received)
    check(all(handler.unsettled_on_arrival), "receiver: every transfer arrived unsettled")
    receiving.wait(lambda: "m2" in handler.settled_by_broker, timeout=DEADLINE, msg="settlement of m2")
    check("m1" not in handler.settled_by_broker,
          "receiver: the broker has not settled m1 while its outcome is held (m2 settled meanwhile)")
    handler.held.update(Delivery.ACCEPTED)
    receiving.wait(lambda: "m1" in handler.settled_by_broker, timeout=DEADLINE, msg="settlement of m1")
    check(True, "receiver: the broker settles m1 once the receiver's accepted arrives")

    second.close()
    receiving.close()
    subscriber.close()


if __name__ == "__main__":
    main()
