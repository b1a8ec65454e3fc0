#!/usr/bin/python3
"""The monitoring kit's check (issue 25 point 7; docs/monitoring/README.md):

  - `promtool check metrics` on a live node's /metrics (a one-node cluster
    with abuse limits on, after some MQTT traffic, so the cluster, metadata,
    partition and limit families are all there) and on a live estuary-lb's
    /metrics: names, types, HELP, counters ending in _total, base units;
  - `promtool check rules` on docs/monitoring/estuary-alerts.yml;
  - every metric the alert rules and the Grafana dashboard use is exported
    by estuaryd or estuary-lb (a renamed metric breaks this test, not a
    dashboard in production).

usage: /usr/bin/python3 monitoring_check.py ESTUARYD ESTUARY_LB PROMTOOL
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance", "support"))
from estuary_process import DEADLINE, FAILURES, EstuaryLb, Estuaryd, check  # noqa: E402

import paho.mqtt.client as paho  # noqa: E402

ESTUARYD, ESTUARY_LB, PROMTOOL = sys.argv[1:4]
KIT = os.path.join(HERE, "..", "docs", "monitoring")
WORK = tempfile.mkdtemp(prefix="estuary-monitoring-")


def get(address, path):
    with urllib.request.urlopen("http://%s%s" % (address, path), timeout=DEADLINE) as response:
        return response.read().decode()


def promtool(*args, stdin=None):
    result = subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=60)
    return result.returncode, (result.stdout + result.stderr).strip()


def exported_names(text):
    """Metric family names in a Prometheus text page (from its TYPE lines)."""
    return set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE))


def traffic(port):
    """One QoS 1 message through a subscriber, so per-client series exist."""
    got = []
    subscriber = paho.Client(client_id="monitoring-sub", protocol=paho.MQTTv311)
    subscriber.on_message = lambda c, u, m: got.append(m.payload)
    subscriber.connect("127.0.0.1", port)
    subscriber.subscribe("monitoring/t", qos=1)
    subscriber.loop_start()
    publisher = paho.Client(client_id="monitoring-pub", protocol=paho.MQTTv311)
    publisher.connect("127.0.0.1", port)
    publisher.loop_start()
    for _ in range(int(DEADLINE / 0.1)):
        publisher.publish("monitoring/t", b"x", qos=1).wait_for_publish(DEADLINE)
        if got:
            break
    for client in (publisher, subscriber):
        client.disconnect()
        client.loop_stop()
    return bool(got)


def node_metrics():
    secret = os.path.join(WORK, "secret")
    with open(secret, "w") as handle:
        handle.write("monitoring-check-secret\n")
    node = Estuaryd(ESTUARYD, "--shards", "2", "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace",
                    "500", "--cluster-secret-file", secret, "--max-connections-per-ip", "100")
    try:
        check(traffic(node.mqtt_port), "a message went through the node")
        return node.admin, get(node.admin, "/metrics")
    finally:
        node.stop()


def balancer_metrics(node_admin):
    lb = EstuaryLb(ESTUARY_LB, "--nodes", node_admin, "--startup-wait", "10", "--log-level", "warn")
    try:
        check(lb.admin is not None, "estuary-lb ready with an admin address: %r" % lb.ready_line)
        return get(lb.admin, "/metrics") if lb.admin else ""
    finally:
        lb.stop()


def main():
    try:
        admin, node_text = node_metrics()
        lb_text = balancer_metrics(admin)
        for name, text in (("estuaryd", node_text), ("estuary-lb", lb_text)):
            status, output = promtool("check", "metrics", stdin=text)
            check(status == 0 and not output, "promtool check metrics on %s's /metrics (%d families)%s" %
                  (name, len(exported_names(text)), ": " + output if output else ""))
        rules = os.path.join(KIT, "estuary-alerts.yml")
        status, output = promtool("check", "rules", rules)
        check(status == 0, "promtool check rules docs/monitoring/estuary-alerts.yml: " + output.splitlines()[-1])
        exported = exported_names(node_text) | exported_names(lb_text)
        for kit_file in ("estuary-alerts.yml", "grafana-estuary.json"):
            with open(os.path.join(KIT, kit_file)) as handle:
                used = set(re.findall(r"\bestuary_[a-z0-9_]+", handle.read()))
            used = {re.sub(r"_(bucket|sum|count)$", "", name) if name not in exported else name for name in used}
            missing = sorted(used - exported)
            check(not missing, "every metric %s uses is exported (%d used)%s" %
                  (kit_file, len(used), ": missing " + ", ".join(missing) if missing else ""))
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
