#!/usr/bin/python3
"""Process test of configuration reload and log files (issue 25 points 4
and 5; docs/configuration.md "Reload" and "Logs") against real estuaryd
and estuary-lb processes. Checks, each printed as "ok: ..." or "FAIL: ...":

  - estuaryd started with --config FILE, --log-file and --log-format json,
    a Paho publisher sending QoS 1 to a Paho subscriber throughout;
  - the file changes log-level and max-connections-per-ip; SIGHUP applies
    both (logged as applied): a third connection from the clients' address
    is refused, and a debug line about a new client shows up with its
    client_id and address fields; connect-timeout 60000 -> 1500 closes a
    new AMQP socket silent in SASL after 1.5 s;
  - `estuaryctl reload` applies the next change (the per-IP cap raised: a
    third connection is served) and reports a key that needs a restart;
  - a broken file is reported (estuaryctl exits 1 with the error, SIGHUP
    logs it) and changes nothing (the cap is still the last good one);
  - the publisher and subscriber stayed connected and no message was lost;
  - every log line is one JSON object;
  - --log-max-size/--log-max-files: the log rotates at the size with the
    right number of files;
  - estuary-lb with --config survives SIGHUP, applies a new log-level and
    reads its admin token file again.

usage: /usr/bin/python3 reload_process.py ESTUARYD ESTUARYCTL ESTUARY_LB
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance", "support"))
from estuary_process import DEADLINE, FAILURES, EstuaryLb, Estuaryd, check, wait_for  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402

ESTUARYD, ESTUARYCTL, ESTUARY_LB = sys.argv[1:4]
WORK = tempfile.mkdtemp(prefix="estuary-reload-")


def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def json_lines(path):
    """The log file's lines parsed; a line that is not JSON is a failure."""
    records = []
    for line in read(path).splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            records.append({"unparsed": line})
    return records


def logged(path, needle):
    return any(needle in record.get("message", "") for record in json_lines(path))


# --- raw MQTT ----------------------------------------------------------------

def utf8(text):
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def connect_packet(client_id):
    body = utf8("MQTT") + bytes([4, 0x02]) + (60).to_bytes(2, "big") + utf8(client_id)
    return b"\x10" + bytes([len(body)]) + body


def raw_connect(port, source, client_id):
    """CONNECT from `source`: (CONNACK return code or None if the socket was closed, socket)."""
    sock = socket.socket()
    sock.settimeout(DEADLINE)
    sock.bind((source, 0))
    try:
        sock.connect(("127.0.0.1", port))
        sock.sendall(connect_packet(client_id))
        data = b""
        while len(data) < 4:
            chunk = sock.recv(4 - len(data))
            if not chunk:
                return None, sock
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return None, sock
    return (data[3] if data[0] == 0x20 else None), sock


# --- traffic -----------------------------------------------------------------

class Traffic:
    """A Paho subscriber and publisher (QoS 1, from 127.0.0.1) exchanging
    numbered messages on their own thread until stop()."""

    def __init__(self, port):
        self.received = set()
        self.sent = 0
        self.disconnects = 0
        self.lock = threading.Lock()
        self.running = True
        self.subscriber = self.client("reload-sub", port)
        subscribed = threading.Event()
        self.subscriber.on_subscribe = lambda *args: subscribed.set()
        self.subscriber.on_message = self.on_message
        self.subscriber.subscribe("reload/t", qos=1)
        check(subscribed.wait(DEADLINE), "the subscriber subscribed")
        self.publisher = self.client("reload-pub", port)
        self.thread = threading.Thread(target=self.publish)
        self.thread.start()

    def client(self, client_id, port):
        client = paho.Client(client_id=client_id, protocol=paho.MQTTv311)
        connected = threading.Event()
        client.on_connect = lambda c, u, f, rc: connected.set()
        client.on_disconnect = lambda c, u, rc: self.count_disconnect()
        client.connect("127.0.0.1", port, keepalive=30)
        client.loop_start()
        check(connected.wait(DEADLINE), client_id + " connected")
        return client

    def count_disconnect(self):
        with self.lock:
            self.disconnects += 1

    def on_message(self, client, userdata, message):
        with self.lock:
            self.received.add(int(message.payload))

    def publish(self):
        while self.running:
            info = self.publisher.publish("reload/t", str(self.sent).encode(), qos=1)
            info.wait_for_publish(DEADLINE)
            self.sent += 1

    def stop(self):
        self.running = False
        self.thread.join()
        wait_for("every message delivered", lambda: len(self.received) >= self.sent)
        disconnects = self.disconnects
        for client in (self.publisher, self.subscriber):
            client.disconnect()
            client.loop_stop()
        return disconnects


def ctl(admin, *args):
    result = subprocess.run([ESTUARYCTL, "--admin", admin, *args], capture_output=True, text=True,
                            timeout=DEADLINE)
    return result.returncode, result.stdout + result.stderr


# --- estuaryd ----------------------------------------------------------------

def check_reload():
    config = os.path.join(WORK, "estuaryd.toml")
    log = os.path.join(WORK, "estuaryd.log")
    write(config, 'log-level = "info"\nmax-connections-per-ip = 100\nshutdown-grace = 500\nconnect-timeout = 60000\n')
    node = Estuaryd(ESTUARYD, "--config", config, "--shards", "2", "--sys-interval", "0", "--log-file", log,
                    "--log-format", "json")
    try:
        traffic = Traffic(node.mqtt_port)
        wait_for("traffic flowing", lambda: len(traffic.received) > 20)

        # SIGHUP: the log level and a limit.
        write(config, 'log-level = "debug"\nmax-connections-per-ip = 2\nshutdown-grace = 500\nconnect-timeout = 1500\n')
        node.process.send_signal(signal.SIGHUP)
        wait_for("the reload logged", lambda: logged(log, "reload: done"))
        check(logged(log, "reload: log-level: info -> debug (applied)"), "SIGHUP: log-level change logged as applied")
        check(logged(log, "reload: max-connections-per-ip: 100 -> 2 (applied)"),
              "SIGHUP: max-connections-per-ip change logged as applied")
        code, sock = raw_connect(node.mqtt_port, "127.0.0.1", "third")
        sock.close()
        check(code is None, "a third connection from 127.0.0.1 is refused under the new cap of 2")
        code, sock = raw_connect(node.mqtt_port, "127.0.0.2", "reload-debug")
        check(code == 0, "a client from another address is served")
        sock.close()

        def debug_line():
            for record in json_lines(log):
                if record.get("level") == "debug" and record.get("client_id") == "reload-debug":
                    return record
            return None
        record = wait_for("a debug line about the new client", debug_line)
        check(record.get("address", "").startswith("127.0.0.2:"),
              "the new log level is in effect: a debug line with client_id and address %r" % record.get("address"))

        # connect-timeout 60000 -> 1500: a socket accepted from now on gets the new deadline.
        check(logged(log, "reload: connect-timeout: 60000 -> 1500 (applied)"),
              "SIGHUP: connect-timeout change logged as applied")
        silent = socket.socket()
        silent.settimeout(DEADLINE)
        silent.bind(("127.0.0.3", 0))
        silent.connect(("127.0.0.1", node.amqp_port))
        started = time.monotonic()
        silent.sendall(b"AMQP\x03\x01\x00\x00")  # the SASL header, then nothing
        try:
            while silent.recv(4096):
                pass
        except OSError:  # a reset, or DEADLINE passed (the old 60 s deadline)
            pass
        took = time.monotonic() - started
        silent.close()
        check(1.4 <= took < 5, "a new AMQP socket silent in SASL is closed by the new connect-timeout after %.2f s" % took)

        # estuaryctl reload: a raised cap, and a key that needs a restart.
        write(config, 'log-level = "debug"\nmax-connections-per-ip = 3\nshutdown-grace = 500\namqp-max-links = 100\n'
                      'connect-timeout = 1500\n')
        status, output = ctl(node.admin, "reload")
        check(status == 0 and "max-connections-per-ip: 2 -> 3 (applied)" in output,
              "estuaryctl reload applies the raised cap: %r" % output.strip())
        check("amqp-max-links: 256 -> 100 (needs a restart" in output,
              "estuaryctl reload says amqp-max-links needs a restart")
        status, output = ctl(node.admin, "--json", "reload")
        check(status == 0 and json.loads(output)["ok"], "estuaryctl --json reload prints the endpoint's JSON")
        code, third = raw_connect(node.mqtt_port, "127.0.0.1", "third")
        check(code == 0, "a third connection from 127.0.0.1 is served under the cap of 3")

        # A broken file: reported, nothing changes.
        write(config, 'log-level = "debug"\nmax-connections-per-ip = "lots"\n')
        status, output = ctl(node.admin, "reload")
        check(status == 1 and "max-connections-per-ip" in output,
              "estuaryctl reload of a broken file exits 1 naming the key: %r" % output.strip())
        node.process.send_signal(signal.SIGHUP)
        wait_for("the SIGHUP error logged",
                 lambda: sum(1 for r in json_lines(log) if "reload: configuration not changed" in r.get("message", ""))
                 >= 2)
        code, fourth = raw_connect(node.mqtt_port, "127.0.0.1", "fourth")
        fourth.close()
        check(code is None, "after the broken file the cap is still 3 (a fourth connection is refused)")
        third.close()

        disconnects = traffic.stop()
        check(disconnects == 0, "publisher and subscriber stayed connected through the reloads")
        check(traffic.sent > 0 and len(traffic.received) == traffic.sent,
              "no message lost: %d sent, %d received" % (traffic.sent, len(traffic.received)))
    finally:
        node.stop()
    records = json_lines(log)
    check(records and all("unparsed" not in r and {"time", "level", "logger", "message"} <= r.keys() for r in records),
          "all %d log lines are JSON objects with time, level, logger, message" % len(records))


def check_rotation():
    log = os.path.join(WORK, "rotate.log")
    rotated = [os.path.join(WORK, "rotate.%d.log" % i) for i in (1, 2, 3)]  # spdlog's names
    node = Estuaryd(ESTUARYD, "--shards", "1", "--sys-interval", "0", "--shutdown-grace", "500", "--log-level",
                    "debug", "--log-file", log, "--log-max-size", "2048", "--log-max-files", "2")
    try:
        for i in range(60):
            code, sock = raw_connect(node.mqtt_port, "127.0.0.1", "rotate-%d" % i)
            sock.close()
        wait_for("the log rotated twice", lambda: os.path.exists(rotated[1]))
    finally:
        node.stop()
    sizes = [os.path.getsize(path) for path in [log] + rotated[:2]]
    check(not os.path.exists(rotated[2]), "--log-max-files 2 keeps two rotated files (no rotate.3.log)")
    check(all(size <= 2048 for size in sizes[1:]), "rotated files are at most --log-max-size: %s" % sizes)


# --- estuary-lb --------------------------------------------------------------

def check_balancer():
    config = os.path.join(WORK, "lb.toml")
    log = os.path.join(WORK, "lb.log")
    token = os.path.join(WORK, "lb.token")
    write(token, "first-token-0123456789\n")
    os.chmod(token, 0o600)
    write(config, 'log-level = "info"\nnodes = "127.0.0.1:9"\n')
    lb = EstuaryLb(ESTUARY_LB, "--config", config, "--admin-token-file", token, "--startup-wait", "10",
                   "--log-file", log)
    try:
        check(lb.ready_line.startswith("estuary-lb ready"), "estuary-lb ready: %r" % lb.ready_line)
        admin = lb.admin
        write(config, 'log-level = "debug"\nnodes = "127.0.0.1:10,127.0.0.1:11"\npoll-interval = 400\n'
                      'probe-timeout = 300\n')
        write(token, "second-token-0123456789\n")
        lb.process.send_signal(signal.SIGHUP)
        wait_for("estuary-lb reloaded", lambda: "admin token file" in read(log))
        check(lb.process.poll() is None, "estuary-lb is still running after SIGHUP")
        check("log-level: info -> debug (applied)" in read(log), "estuary-lb applied the new log-level")
        if admin:
            request = urllib.request.Request("http://%s/api/nodes" % admin,
                                             headers={"Authorization": "Bearer second-token-0123456789"})
            with urllib.request.urlopen(request, timeout=DEADLINE) as response:
                check(response.status == 200, "estuary-lb's admin takes the reloaded token")
                listed = sorted(n["admin"] for n in json.loads(response.read())["nodes"])
            check(listed == ["127.0.0.1:10", "127.0.0.1:11"],
                  "estuary-lb applied the new --nodes: %r" % listed)
            check("reload: nodes: 2 added (127.0.0.1:10,127.0.0.1:11), 1 removed (127.0.0.1:9) (applied)" in read(log),
                  "estuary-lb logged the --nodes change as applied")
            check("nodes changed: needs a restart" not in read(log), "--nodes is no longer a restart key")
            check("reload: poll-interval: 250 -> 400 ms (applied)" in read(log)
                  and "reload: probe-timeout: 500 -> 300 ms (applied)" in read(log),
                  "estuary-lb applied the new poll-interval and probe-timeout")
        else:
            check(False, "estuary-lb's ready line names its admin address: %r" % lb.ready_line)
    finally:
        lb.stop()


def main():
    try:
        check_reload()
        check_rotation()
        check_balancer()
    finally:
        if FAILURES:
            print("logs kept in " + WORK)
        else:
            shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
