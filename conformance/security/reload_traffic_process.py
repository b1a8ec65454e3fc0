#!/usr/bin/python3
"""SIGHUP under traffic (issue 21 point 7: "SIGHUP reloads of certificate,
passwords and ACL under traffic"), against one real estuaryd with
--mqtts/--amqps, --password-file (made by mosquitto_passwd) and --acl-file.
The pieces are tested one at a time elsewhere (tls_process.py: a new
certificate; security_process.py: a new ACL and user, a connected client);
here all three files change at once while clients stream. Clients the
project does not write: Paho Python and Proton Python stream, mosquitto_pub
and Python's ssl module probe. Checks, each printed as "ok: ..." or
"FAIL: ...":

  - before: bob's new password is refused, bob may not write granted/#
    (PUBACK 0x87), bob's SUBSCRIBE to revoked/# is granted;
  - an MQTT QoS 1 publisher/subscriber pair (Paho, TLS) and an AMQP
    sender/receiver pair (Proton Python, TLS, SASL PLAIN) stream while the
    certificate and key, the password file (every password changed,
    alice's too) and the ACL file are rewritten and SIGHUP is sent; the
    three reloads are logged and traffic goes on after them;
  - after: a new TLS handshake gets the new certificate (the PEM the
    server presents is the new file's) and verifies only against the new
    CA; bob's new password works and his old one is refused, alice's old
    one too; bob's publish to granted/# now passes and reaches a watcher
    that subscribed before the reload; his new SUBSCRIBE to revoked/# gets
    0x87;
  - the streaming connections were never dropped (no disconnect callback,
    still connected), and every message whose PUBACK (MQTT) or accepted
    outcome (AMQP) came back reached its subscriber, in order, no gaps.

usage: /usr/bin/python3 reload_traffic_process.py path/to/estuaryd
"""

import os
import queue
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from estuary_process import DEADLINE, Estuaryd, wait_for  # noqa: E402
from paho_client import PahoClient  # noqa: E402
from tls_certs import TlsCerts  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402

ESTUARYD = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="estuary-reload-traffic-")
FAILURES = []

ACL_BEFORE = """user alice
topic readwrite stream/#
user bob
topic readwrite bob/#
topic read granted/#
topic read revoked/#
"""
# alice keeps her rights (her stream goes on under the new rules); bob may
# now write granted/# and no longer read revoked/#.
ACL_AFTER = """user alice
topic readwrite stream/#
user bob
topic readwrite bob/#
topic readwrite granted/#
"""


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def path(name):
    return os.path.join(WORK, name)


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE)
    return done.returncode, done.stdout, done.stderr


def write_passwords(file, users):
    """A mosquitto_passwd file with `users` ({name: password}), swapped in
    with a rename (as an operator's tooling would)."""
    fresh = file + ".new"
    first = True
    for user, password in users.items():
        run(["mosquitto_passwd", *(["-c"] if first else []), "-b", fresh, user, password])
        first = False
    os.replace(fresh, file)


def mosquitto_pub(port, cafile, user, password, topic, message):
    """mosquitto_pub over TLS, MQTT 5 QoS 1: (exit status, stderr)."""
    status, _, error = run(["mosquitto_pub", "-h", "localhost", "-p", str(port), "--cafile", cafile, "-V", "mqttv5",
                            "-q", "1", "-u", user, "-P", password, "-t", topic, "-m", message])
    return status, error.strip()


def log_count(log_file, needle):
    with open(log_file) as handle:
        return handle.read().count(needle)


def Paho(port, cafile, client_id, user, password):
    """A Paho MQTT 5 client over TLS (conformance/support/paho_client.py)."""
    return PahoClient("127.0.0.1", port, client_id, user, password, cafile=cafile, keepalive=30, max_inflight=50)


class MqttStream:
    """alice's QoS 1 stream over TLS: a publisher thread numbering its
    messages on stream/mqtt and a subscriber collecting them."""

    def __init__(self, port, cafile, password):
        self.subscriber = Paho(port, cafile, "stream-sub", "alice", password)
        if self.subscriber.suback("stream/mqtt") != [1]:
            raise AssertionError("stream subscriber refused")
        self.publisher = Paho(port, cafile, "stream-pub", "alice", password)
        self.sequence_of = {}  # mid -> sequence number
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.publish, daemon=True)
        self.thread.start()
        self.received = []

    def publish(self):
        sequence = 0
        while not self.stop.is_set():
            info = self.publisher.client.publish("stream/mqtt", str(sequence), qos=1)
            self.sequence_of[info.mid] = sequence
            sequence += 1
            time.sleep(0.002)  # pacing, about 300 a second: not a wait on a condition

    def acknowledged(self):
        return {self.sequence_of[mid] for mid in list(self.publisher.acked) if mid in self.sequence_of}

    def drain(self):
        while True:
            try:
                self.received.append(int(self.subscriber.messages.get_nowait().payload))
            except queue.Empty:
                return self.received


class AmqpStream:
    """alice's AMQP stream over TLS (SASL PLAIN): a sender thread waiting
    for each transfer's accepted outcome, a receiver thread accepting."""

    def __init__(self, port, cafile, password):
        from proton import SSLDomain
        from proton.utils import BlockingConnection
        domain = SSLDomain(SSLDomain.MODE_CLIENT)
        domain.set_trusted_ca_db(cafile)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        url = "amqps://127.0.0.1:%d" % port

        def connect():
            return BlockingConnection(url, ssl_domain=domain, sni="localhost", user="alice", password=password,
                                      allowed_mechs="PLAIN", timeout=DEADLINE)
        self.receiving = connect()
        self.receiver = self.receiving.create_receiver("stream/amqp", credit=100)
        self.sending = connect()
        self.sender = self.sending.create_sender("stream/amqp")
        self.stop = threading.Event()
        self.accepted = []
        self.received = []
        self.errors = []
        self.threads = [threading.Thread(target=self.send, daemon=True),
                        threading.Thread(target=self.receive, daemon=True)]
        for thread in self.threads:
            thread.start()

    def send(self):
        from proton import Message
        sequence = 0
        try:
            while not self.stop.is_set():
                self.sender.send(Message(body=str(sequence)), timeout=DEADLINE)  # returns once accepted
                self.accepted.append(sequence)
                sequence += 1
                time.sleep(0.003)  # pacing, not a wait on a condition
        except Exception as error:  # a dropped connection ends up here
            self.errors.append("sender: %s" % error)

    def receive(self):
        from proton import Timeout
        stopped_at = None
        try:
            while True:
                try:
                    message = self.receiver.receive(timeout=0.5)
                except Timeout:
                    if self.stop.is_set():
                        stopped_at = stopped_at or time.monotonic()
                        # all in, or given up on (the check then fails)
                        if len(self.received) >= len(self.accepted) or time.monotonic() - stopped_at > DEADLINE:
                            return
                    continue
                self.received.append(int(message.body))
                self.receiver.accept()
        except Exception as error:
            self.errors.append("receiver: %s" % error)

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(DEADLINE * 2)
        alive = not self.errors
        for connection in (self.sending, self.receiving):
            try:
                connection.close()
            except Exception as error:
                self.errors.append("close: %s" % error)
        return alive


def in_order_without_gaps(received, acknowledged):
    """The received sequence numbers hold every acknowledged one, in
    order, once each."""
    return received == sorted(set(received)) and acknowledged <= set(received)


def check_before(broker, cafile):
    status, error = mosquitto_pub(broker.mqtts_port, cafile, "bob", "builder-2", "bob/x", "new password")
    check(status != 0, "before SIGHUP: bob's new password is refused (%r)" % error)
    status, error = mosquitto_pub(broker.mqtts_port, cafile, "bob", "builder", "granted/x", "denied")
    check("not authorized" in error.lower(), "before SIGHUP: bob may not write granted/x (0x87: %r)" % error)
    probe = Paho(broker.mqtts_port, cafile, "bob-probe", "bob", "builder")
    check(probe.suback("revoked/#") == [1], "before SIGHUP: bob's SUBSCRIBE to revoked/# is granted")
    probe.close()


def swap_files(broker_files, new_certs):
    cert, key, passwords, acl = broker_files
    shutil.copy(new_certs.server_cert, cert)  # rewritten in place
    shutil.copy(new_certs.server_key, key)
    write_passwords(passwords, {"alice": "wonderland-2", "bob": "builder-2"})  # renamed over
    with open(acl, "w") as handle:  # rewritten in place
        handle.write(ACL_AFTER)


def reload_under_traffic(broker, log_file, files, new_certs, streams):
    mqtt_stream, amqp_stream = streams
    wait_for("both streams flowing", lambda: len(mqtt_stream.drain()) >= 200 and len(amqp_stream.received) >= 100)
    needles = ("reload: TLS certificate", "reload: password file", "reload: ACL file")
    before = {needle: log_count(log_file, needle) for needle in needles}
    swap_files(files, new_certs)
    at_sighup = (len(mqtt_stream.acknowledged()), len(amqp_stream.accepted))
    os.kill(broker.process.pid, signal.SIGHUP)
    try:
        wait_for("the three reloads logged",
                 lambda: all(log_count(log_file, needle) > before[needle] for needle in needles))
        check(True, "SIGHUP re-read the certificate, the password file and the ACL file (logged)")
    except AssertionError:
        check(False, "SIGHUP re-read the certificate, the password file and the ACL file (logged)")
    reloaded = (len(mqtt_stream.acknowledged()), len(amqp_stream.accepted))
    try:
        wait_for("traffic after the reload", lambda: len(mqtt_stream.acknowledged()) >= reloaded[0] + 200
                 and len(amqp_stream.accepted) >= reloaded[1] + 100)
        flowing = True
    except AssertionError:
        flowing = False
    check(flowing, "both streams go on after the reload (MQTT acknowledged: %d at SIGHUP, %d once reloaded, %d "
          "then; AMQP accepted: %d, %d, %d)" % (at_sighup[0], reloaded[0], len(mqtt_stream.acknowledged()),
                                              at_sighup[1], reloaded[1], len(amqp_stream.accepted)))


def check_after(broker, old_certs, new_certs, watcher):
    port = broker.mqtts_port
    presented = ssl.get_server_certificate(("127.0.0.1", port))
    with open(new_certs.server_cert) as handle:
        new_pem = ssl.DER_cert_to_PEM_cert(ssl.PEM_cert_to_DER_cert(handle.read()))
    check(presented == new_pem, "after SIGHUP a new TLS handshake gets the new certificate (the new file's PEM)")
    status, error = mosquitto_pub(port, old_certs.ca, "bob", "builder-2", "bob/x", "old CA")
    check(status != 0, "after SIGHUP the old CA no longer verifies a new handshake (%r)" % error)
    cafile = new_certs.ca
    status, error = mosquitto_pub(port, cafile, "bob", "builder-2", "bob/x", "new password")
    check(status == 0 and error == "", "after SIGHUP bob's new password works, over the new certificate (%r)" % error)
    status, error = mosquitto_pub(port, cafile, "bob", "builder", "bob/x", "old password")
    check(status != 0, "after SIGHUP bob's old password is refused (%r)" % error)
    status, error = mosquitto_pub(port, cafile, "alice", "wonderland", "stream/x", "old password")
    check(status != 0, "after SIGHUP alice's old password is refused for a new connection (%r)" % error)
    status, error = mosquitto_pub(port, cafile, "bob", "builder-2", "granted/x", "allowed now")
    check(status == 0 and error == "", "after SIGHUP the new rule lets bob write granted/x (%r)" % error)
    check(watcher.next_message() == ("granted/x", "allowed now"),
          "the publish reaches bob's watcher, connected since before the reload with the old password")
    probe = Paho(port, cafile, "bob-probe-2", "bob", "builder-2")
    check(probe.suback("revoked/#") == [0x87], "after SIGHUP bob's new SUBSCRIBE to revoked/# gets 0x87")
    probe.close()


def check_streams(streams, watcher):
    mqtt_stream, amqp_stream = streams
    mqtt_stream.stop.set()
    mqtt_stream.thread.join(DEADLINE)
    published = len(mqtt_stream.sequence_of)
    try:
        wait_for("every MQTT PUBACK", lambda: len(mqtt_stream.acknowledged()) == published)
        wait_for("every acknowledged MQTT message received",
                 lambda: mqtt_stream.acknowledged() <= set(mqtt_stream.drain()))
    except AssertionError:
        pass  # judged below
    acknowledged = mqtt_stream.acknowledged()
    check(len(acknowledged) == published, "MQTT: all %d publishes acknowledged (%d)" % (published, len(acknowledged)))
    received = mqtt_stream.drain()
    connected = mqtt_stream.publisher.client.is_connected() and mqtt_stream.subscriber.client.is_connected()
    drops = mqtt_stream.publisher.disconnects + mqtt_stream.subscriber.disconnects
    check(connected and drops == 0, "the MQTT stream's two TLS connections were never dropped")
    check(in_order_without_gaps(received, acknowledged),
          "MQTT: all %d acknowledged messages received, in order, none twice (%d received, %d missing)"
          % (len(acknowledged), len(received), len(acknowledged - set(received))))
    alive = amqp_stream.finish()
    check(alive, "the AMQP stream's two TLS connections were never dropped (%s)" % "; ".join(amqp_stream.errors))
    check(in_order_without_gaps(amqp_stream.received, set(amqp_stream.accepted)),
          "AMQP: all %d accepted messages received, in order, none twice (%d received)"
          % (len(amqp_stream.accepted), len(amqp_stream.received)))
    check(watcher.disconnects == 0 and watcher.client.is_connected(),
          "bob's watcher (old password, old certificate) is still connected")
    for client in (mqtt_stream.publisher, mqtt_stream.subscriber):
        client.close()


def main():
    old_certs = TlsCerts(path("ca-old"), ca_name="Estuary Old CA")
    new_certs = TlsCerts(path("ca-new"), ca_name="Estuary New CA")
    cert, key = path("server.pem"), path("server.key")
    shutil.copy(old_certs.server_cert, cert)
    shutil.copy(old_certs.server_key, key)
    passwords, acl = path("passwords"), path("acl")
    write_passwords(passwords, {"alice": "wonderland", "bob": "builder"})
    with open(acl, "w") as handle:
        handle.write(ACL_BEFORE)
    log_file = path("estuaryd.log")
    broker = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "info", "--sys-interval", "0",
                      "--shutdown-grace", "500", "--mqtts", "127.0.0.1:0", "--amqps", "127.0.0.1:0",
                      "--tls-cert", cert, "--tls-key", key, "--password-file", passwords, "--acl-file", acl,
                      stderr=open(log_file, "w"))
    try:
        check_before(broker, old_certs.ca)
        watcher = Paho(broker.mqtts_port, old_certs.ca, "bob-watch", "bob", "builder")
        check(watcher.suback("granted/#") == [1], "bob's watcher subscribes to granted/# before the reload")
        streams = (MqttStream(broker.mqtts_port, old_certs.ca, "wonderland"),
                   AmqpStream(broker.amqps_port, old_certs.ca, "wonderland"))
        reload_under_traffic(broker, log_file, (cert, key, passwords, acl), new_certs, streams)
        check_after(broker, old_certs, new_certs, watcher)
        check_streams(streams, watcher)
        watcher.close()
        check(broker.process.poll() is None, "estuaryd ran through it all")
    finally:
        status = broker.stop()
    check(status == 0, "estuaryd exited 0 on SIGTERM")
    if FAILURES:
        print("%d failure(s); the work folder is kept: %s" % (len(FAILURES), WORK))
        sys.exit(1)
    shutil.rmtree(WORK, ignore_errors=True)
    print("all reload-under-traffic checks passed")


if __name__ == "__main__":
    main()
