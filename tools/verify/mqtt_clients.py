"""Paho MQTT clients (Debian's python3-paho-mqtt 1.6, MQTT 3.1.1 and 5.0)
that record every operation in a history.History.

Each client is one thread that owns its paho.Client outright: it calls
loop() itself, publishes from the same thread (so a PUBACK cannot be handled
before its mid is known), and reconnects itself, to the next node of its
list, when the connection drops, no CONNACK comes within `connect_timeout`,
or (publishers) the oldest unacknowledged publish has waited `stall_s`: a
client that fails over, as one behind a balancer would. Sessions are
persistent everywhere (MQTT 3.1.1 clean session 0; MQTT 5 clean start 0 and
a session expiry), so paho resends unacknowledged QoS 1/2 publishes, with
DUP, after a reconnect, and the broker must keep its QoS 2 state across it.
"""

import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

import history as history_module

PORT = 1883
SESSION_EXPIRY_S = 3600


class MqttClient(threading.Thread):
    def __init__(self, name, version, nodes, recorder, keepalive=3, connect_timeout=5.0):
        super().__init__(name=name, daemon=True)
        self.client_name = name
        self.protocol = "mqtt5" if version == 5 else "mqtt3"
        self.nodes = list(nodes)  # addresses, preferred first
        self.node_index = 0
        self.history = recorder
        self.keepalive = keepalive
        self.connect_timeout = connect_timeout
        self.stopping = threading.Event()
        self.connected = False
        self.connect_generation = 0
        self.connected_at = 0.0
        if version == 5:
            self.client = mqtt.Client(client_id=name, protocol=mqtt.MQTTv5)
        else:
            self.client = mqtt.Client(client_id=name, clean_session=False, protocol=mqtt.MQTTv311)
        self.client.max_inflight_messages_set(20)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect

    # -- connection --------------------------------------------------------
    def _on_connect(self, client, userdata, flags, rc, *properties):
        code = rc if isinstance(rc, int) else rc.value
        if code != 0:
            self.history.record(self.client_name, "fail", "connect", protocol=self.protocol,
                                node=self.nodes[self.node_index], error="CONNACK %d" % code)
            return
        self.connected = True
        self.connect_generation += 1
        self.connected_at = time.monotonic()
        present = bool(flags.get("session present"))
        self.history.record(self.client_name, "ok", "connect", protocol=self.protocol,
                            node=self.nodes[self.node_index], session_present=present)
        self.on_session(present)

    def _on_disconnect(self, client, userdata, rc, *properties):
        if self.connected:
            code = rc if isinstance(rc, int) else rc.value
            self.history.record(self.client_name, "info", "disconnect", protocol=self.protocol, code=code)
        self.connected = False

    def on_session(self, present):
        """Called on every CONNACK accepted, from the client's thread."""

    def _connect_once(self):
        host = self.nodes[self.node_index]
        self.history.record(self.client_name, "invoke", "connect", protocol=self.protocol, node=host)
        try:
            if self.protocol == "mqtt5":
                properties = Properties(PacketTypes.CONNECT)
                properties.SessionExpiryInterval = SESSION_EXPIRY_S
                self.client.connect(host, PORT, self.keepalive, clean_start=False, properties=properties)
            else:
                self.client.connect(host, PORT, self.keepalive)
        except (OSError, ValueError) as error:
            self.history.record(self.client_name, "fail", "connect", protocol=self.protocol, node=host,
                                error=str(error))
            return False
        deadline = time.monotonic() + self.connect_timeout
        while not self.connected and time.monotonic() < deadline and not self.stopping.is_set():
            if self.client.loop(0.05) != mqtt.MQTT_ERR_SUCCESS:
                break
        if not self.connected:
            self.history.record(self.client_name, "fail", "connect", protocol=self.protocol, node=host,
                                error="no CONNACK within %.0f s" % self.connect_timeout)
            self._drop_socket()
        return self.connected

    def _drop_socket(self):
        # Closes the socket without a DISCONNECT packet: the session stays, as
        # after a network failure.
        sock = self.client.socket()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        self.client.loop(0.01)
        self.connected = False

    def rotate(self):
        self.node_index = (self.node_index + 1) % len(self.nodes)

    def ensure_connected(self):
        while not self.connected and not self.stopping.is_set():
            if self._connect_once():
                return True
            self.rotate()
            self.stopping.wait(0.3)  # back-off between attempts
        return self.connected

    def fail_over(self, why):
        self.history.record(self.client_name, "info", "failover", protocol=self.protocol,
                            node=self.nodes[self.node_index], why=why)
        self._drop_socket()
        self.rotate()

    def run(self):
        try:
            while not self.stopping.is_set():
                if not self.ensure_connected():
                    break
                if self.client.loop(0.05) != mqtt.MQTT_ERR_SUCCESS:
                    self.connected = False
                    self.rotate()
                    continue
                self.tick()
        except Exception as error:  # noqa: BLE001 - recorded; the checker sees a client that stopped
            self.history.record(self.client_name, "fail", "client", protocol=self.protocol, error=repr(error))
            raise

    def tick(self):
        """Called after every loop() while connected."""

    def stop(self):
        self.stopping.set()
        self.join(15)
        try:
            self.client.disconnect()
        except Exception:  # noqa: BLE001
            pass


class Publisher(MqttClient):
    """Publishes `rate` messages a second at one QoS on topic verify/<name>
    (also while disconnected: paho queues them), at most `cap` unacknowledged;
    each publish not acknowledged within `ack_timeout` gets an info event
    (a later ack still records ok)."""

    def __init__(self, name, version, nodes, recorder, qos, rate=10.0, ack_timeout=5.0, stall_s=8.0, cap=200):
        super().__init__(name, version, nodes, recorder)
        self.qos = qos
        self.topic = "verify/" + name
        self.interval = 1.0 / rate
        self.ack_timeout = ack_timeout
        self.stall_s = stall_s
        self.cap = cap
        self.seq = 0
        self.outstanding = {}  # mid -> [message id, invoke monotonic, timed out]
        self.publishing = threading.Event()
        self.next_at = time.monotonic()
        self.client.on_publish = self._on_publish

    def _on_publish(self, client, userdata, mid):
        entry = self.outstanding.pop(mid, None)
        if entry is not None:
            self.history.record(self.client_name, "ok", "publish", msg=entry[0])

    def _publish_one(self):
        self.seq += 1
        message_id = "%s-%d" % (self.client_name, self.seq)
        self.history.record(self.client_name, "invoke", "publish", protocol=self.protocol, qos=self.qos,
                            topic=self.topic, msg=message_id, seq=self.seq)
        info = self.client.publish(self.topic, history_module.payload_for(message_id, self.client_name, self.seq),
                                   self.qos)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            self.history.record(self.client_name, "fail", "publish", msg=message_id, error="rc %d" % info.rc)
            return
        self.outstanding[info.mid] = [message_id, time.monotonic(), False]

    def tick(self):
        now = time.monotonic()
        if self.publishing.is_set() and now >= self.next_at and len(self.outstanding) < self.cap:
            self._publish_one()
            self.next_at = max(self.next_at + self.interval, now - 1.0)
        oldest = None
        for entry in self.outstanding.values():
            if not entry[2] and now - entry[1] > self.ack_timeout:
                entry[2] = True
                self.history.record(self.client_name, "info", "publish", msg=entry[0], error="no ack within %.0f s"
                                    % self.ack_timeout)
            oldest = entry[1] if oldest is None else min(oldest, entry[1])
        if oldest is not None and now - oldest > self.stall_s and now - self.connected_at > self.stall_s:
            self.fail_over("oldest publish unacknowledged for %.0f s" % (now - oldest))

    def run(self):
        # Publishes are invoked while disconnected too (queued by paho), so
        # the loop below also runs between connection attempts.
        while not self.stopping.is_set():
            if not self.connected:
                if not self._connect_once():
                    self.rotate()
                    self.tick()
                    self.stopping.wait(0.3)
                continue
            if self.client.loop(0.02) != mqtt.MQTT_ERR_SUCCESS:
                self.connected = False
                self.rotate()
                continue
            self.tick()


class Subscriber(MqttClient):
    """Subscribes `topic_filter` at QoS 2 once (and again if a CONNACK says
    the session is gone, recorded as op session), records every delivery."""

    def __init__(self, name, version, nodes, recorder, topic_filter="verify/#", qos=2):
        super().__init__(name, version, nodes, recorder)
        self.filter = topic_filter
        self.qos = qos
        self.subscribed = threading.Event()
        self.last_delivery = time.monotonic()
        self.received = set()
        self.sub_mid = None
        self.final_reconnect = False  # set by reconnect_fresh, from another thread
        self.generation_before_final = None
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def on_session(self, present):
        if self.subscribed.is_set() and present:
            return
        if self.subscribed.is_set():
            self.history.record(self.client_name, "info", "session", protocol=self.protocol, present=False)
        self.history.record(self.client_name, "invoke", "subscribe", protocol=self.protocol, filter=self.filter,
                            qos=self.qos)
        self.sub_mid = self.client.subscribe(self.filter, self.qos)[1]

    def _on_subscribe(self, client, userdata, mid, granted, *properties):
        code = granted[0] if isinstance(granted[0], int) else granted[0].value
        if code > 2:
            self.history.record(self.client_name, "fail", "subscribe", protocol=self.protocol, filter=self.filter,
                                error="SUBACK %d" % code)
            return
        if not self.subscribed.is_set():
            self.history.record(self.client_name, "ok", "subscribe", protocol=self.protocol, filter=self.filter,
                                qos=code)
        self.subscribed.set()

    def _on_message(self, client, userdata, message):
        message_id, publisher, seq = history_module.parse_payload(message.payload)
        self.history.record(self.client_name, "ok", "deliver", protocol=self.protocol, topic=message.topic,
                            msg=message_id, publisher=publisher, seq=seq, qos=message.qos, dup=bool(message.dup))
        self.received.add(message_id)
        self.last_delivery = time.monotonic()

    def reconnect_fresh(self):
        """From another thread: asks for a reconnect to the first node (the
        final read's "reconnected with its session")."""
        self.final_reconnect = True

    def tick(self):
        if self.final_reconnect:
            self.final_reconnect = False
            self.generation_before_final = self.connect_generation
            self._drop_socket()
            self.node_index = 0
