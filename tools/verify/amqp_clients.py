"""Qpid Proton Python clients (Debian's python3-qpid-proton 0.37) that record
every operation in a history.History, each on its own thread with its own
BlockingConnection, reconnecting to the next node of its list when the
connection fails or stalls.

- AmqpSender: one message at a time to target verify/<name>, unsettled,
  receiver settle mode first, i.e. at-least-once (docs/amqp.md: unsettled
  -> QoS 1): accepted -> ok, rejected/released -> fail, no outcome within
  ack_timeout or the connection gone -> info. No resend: an unknown
  outcome stays unknown (the checker counts it recovered if delivered).
- AmqpReceiver: a durable link (durability unsettled-state, expiry never,
  container id and link name fixed) on source verify/# in receiver settle
  mode second, exactly-once (docs/amqp.md, "Exactly-once links"): each
  delivery gets an outcome and is kept (tag -> body) until the broker
  settles; a transfer under a kept tag with the same body is the broker's
  resend of a delivery already handed on, answered and not recorded again
  (that is what mode second is for). Everything else is a delivery.
"""

import threading
import time

from proton import Delivery, Link, Message, Terminus, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection, SendException

import history as history_module

PORT = 5672


class _DurableExactlyOnce(LinkOption):
    def apply(self, link):
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER


class _AmqpClient(threading.Thread):
    def __init__(self, name, nodes, recorder, heartbeat=3):
        super().__init__(name=name, daemon=True)
        self.client_name = name
        self.nodes = list(nodes)
        self.node_index = 0
        self.history = recorder
        self.heartbeat = heartbeat
        self.stopping = threading.Event()
        self.connection = None
        self.connect_generation = 0
        self.connected_at = 0.0

    @property
    def connected(self):
        return self.connection is not None

    def _open(self):
        host = self.nodes[self.node_index]
        self.history.record(self.client_name, "invoke", "connect", protocol="amqp", node=host)
        container = Container()
        container.container_id = self.client_name
        try:
            self.connection = BlockingConnection("amqp://%s:%d" % (host, PORT), timeout=5, container=container,
                                                 heartbeat=self.heartbeat)
            self.attach()
        except Exception as error:  # noqa: BLE001 - any failure to connect or attach
            self.history.record(self.client_name, "fail", "connect", protocol="amqp", node=host, error=repr(error))
            self._close()
            self.node_index = (self.node_index + 1) % len(self.nodes)
            self.stopping.wait(0.3)  # back-off between attempts
            return False
        self.connect_generation += 1
        self.connected_at = time.monotonic()
        self.history.record(self.client_name, "ok", "connect", protocol="amqp", node=host)
        return True

    def _close(self):
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # noqa: BLE001 - a dead socket
                pass
        self.connection = None

    def lost(self, why):
        self.history.record(self.client_name, "info", "disconnect", protocol="amqp", why=why)
        self._close()
        self.node_index = (self.node_index + 1) % len(self.nodes)

    def run(self):
        while not self.stopping.is_set():
            if self.connection is None and not self._open():
                continue
            try:
                self.step()
            except Timeout:
                pass
            except Exception as error:  # noqa: BLE001 - ConnectionException, LinkDetached, ...
                self.lost(repr(error))
        self._close()

    def stop(self):
        self.stopping.set()
        self.join(20)


class AmqpSender(_AmqpClient):
    def __init__(self, name, nodes, recorder, rate=10.0, ack_timeout=5.0):
        super().__init__(name, nodes, recorder)
        self.topic = "verify/" + name
        self.interval = 1.0 / rate
        self.ack_timeout = ack_timeout
        self.seq = 0
        self.publishing = threading.Event()
        self.outstanding = {}  # kept empty between sends: one at a time

    def attach(self):
        self.sender = self.connection.create_sender(self.topic, name="s")

    def step(self):
        if not self.publishing.is_set():
            self.connection.wait(lambda: self.stopping.is_set() or self.publishing.is_set(), timeout=0.2)
            return
        started = time.monotonic()
        self.seq += 1
        message_id = "%s-%d" % (self.client_name, self.seq)
        self.history.record(self.client_name, "invoke", "publish", protocol="amqp", qos=1, topic=self.topic,
                            msg=message_id, seq=self.seq)
        body = history_module.payload_for(message_id, self.client_name, self.seq).decode()
        try:
            self.outstanding[message_id] = started
            self.sender.send(Message(body=body, durable=True), timeout=self.ack_timeout)
            self.history.record(self.client_name, "ok", "publish", msg=message_id)
        except SendException as error:
            self.history.record(self.client_name, "fail", "publish", msg=message_id, error=repr(error))
        except Timeout:
            self.history.record(self.client_name, "info", "publish", msg=message_id,
                                error="no outcome within %.0f s" % self.ack_timeout)
            self.lost("no outcome within %.0f s" % self.ack_timeout)
        except Exception as error:  # noqa: BLE001 - the connection went with the outcome
            self.history.record(self.client_name, "info", "publish", msg=message_id, error=repr(error))
            raise
        finally:
            self.outstanding.pop(message_id, None)
        rest = self.interval - (time.monotonic() - started)
        if rest > 0 and self.connection is not None:
            try:
                self.connection.wait(lambda: self.stopping.is_set(), timeout=rest)
            except Timeout:
                pass


class _ReceiverHandler(MessagingHandler):
    def __init__(self, owner):
        super().__init__(prefetch=20, auto_accept=False)
        self.owner = owner

    def on_message(self, event):
        owner = self.owner
        body = event.message.body
        body = body.decode() if isinstance(body, (bytes, bytearray, memoryview)) else str(body)
        tag = event.delivery.tag
        if owner.kept.get(tag) == body:
            owner.resends += 1
        else:
            owner.kept[tag] = body
            message_id, publisher, seq = history_module.parse_payload(body)
            owner.history.record(owner.client_name, "ok", "deliver", protocol="amqp", topic=event.message.address,
                                 msg=message_id, publisher=publisher, seq=seq, tag=repr(tag))
            owner.received.add(message_id)
            owner.last_delivery = time.monotonic()
        event.delivery.update(Delivery.ACCEPTED)

    def on_settled(self, event):
        self.owner.kept.pop(event.delivery.tag, None)
        event.delivery.settle()


class AmqpReceiver(_AmqpClient):
    def __init__(self, name, nodes, recorder, source="verify/#"):
        super().__init__(name, nodes, recorder)
        self.source = source
        self.kept = {}
        self.resends = 0
        self.received = set()
        self.last_delivery = time.monotonic()
        self.subscribed = threading.Event()
        self.final_reconnect = False
        self.generation_before_final = None
        self.handler = _ReceiverHandler(self)

    def attach(self):
        self.link = self.connection.create_receiver(self.source, name="r", credit=0, handler=self.handler,
                                                    options=_DurableExactlyOnce())
        if not self.subscribed.is_set():
            self.history.record(self.client_name, "ok", "subscribe", protocol="amqp", filter=self.source, qos=2)
            self.subscribed.set()

    def reconnect_fresh(self):
        self.final_reconnect = True

    def step(self):
        if self.final_reconnect:
            self.final_reconnect = False
            self.generation_before_final = self.connect_generation
            self._close()  # a dropped connection: the durable link stays
            self.node_index = 0
            return
        self.connection.wait(lambda: self.stopping.is_set() or self.final_reconnect, timeout=0.5)
