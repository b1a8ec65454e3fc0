"""A Paho MQTT client on its own network thread for the process tests:
CONNACK, SUBACK and messages land in queues, with DEADLINE-bounded waits.
Used by conformance/security (security_process, reload_traffic_process)."""

import queue
import threading

import paho.mqtt.client as mqtt

from estuary_process import DEADLINE


class PahoClient:
    """Connects at construction (AssertionError without a CONNACK within
    DEADLINE); `cafile` turns TLS on."""

    def __init__(self, host, port, client_id, user, password, protocol=mqtt.MQTTv5, cafile=None,
                 keepalive=60, max_inflight=None):
        self.client = mqtt.Client(client_id=client_id, protocol=protocol)
        self.client.username_pw_set(user, password)
        if cafile is not None:
            self.client.tls_set(ca_certs=cafile)
        if max_inflight is not None:
            self.client.max_inflight_messages_set(max_inflight)
        self.connected = threading.Event()
        self.disconnects = 0
        self.subacks = queue.Queue()
        self.messages = queue.Queue()
        self.acked = set()  # mids whose PUBACK came back
        self.client.on_connect = lambda *args: self.connected.set()
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = lambda client, userdata, mid, codes, *rest: self.subacks.put(codes)
        self.client.on_message = lambda client, userdata, message: self.messages.put(message)
        self.client.on_publish = lambda client, userdata, mid: self.acked.add(mid)
        self.client.connect(host, port, keepalive=keepalive)
        self.client.loop_start()
        if not self.connected.wait(DEADLINE):
            raise AssertionError("no CONNACK for " + client_id)

    def _on_disconnect(self, *args):
        self.disconnects += 1

    def suback(self, topic):
        """The SUBACK's reason codes as numbers."""
        self.client.subscribe(topic, 1)
        codes = self.subacks.get(timeout=DEADLINE)
        return [code if isinstance(code, int) else code.value for code in codes]

    def publish(self, topic, payload, qos=1):
        info = self.client.publish(topic, payload, qos)
        info.wait_for_publish(DEADLINE)

    def next_message(self, timeout=DEADLINE):
        """(topic, payload as text), or None after `timeout` seconds."""
        try:
            message = self.messages.get(timeout=timeout)
            return message.topic, message.payload.decode()
        except queue.Empty:
            return None

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()
