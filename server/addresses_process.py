#!/usr/bin/python3
"""Issue 24 point 1: addresses for more than one host, and one cluster from
one configuration.

Three estuaryd processes given the same --seeds (all three cluster
addresses) and --bootstrap-expect 3 are started in a seeded random order
(--seed N replays one; the seed is printed). Exactly one, the lowest id,
founds the cluster; all three end as one cluster of three members and
three metadata voters, and MQTT messages flow between every pair of nodes.
One node listens on [::1] only (MQTT, AMQP, admin and cluster: its links,
clients and admin API use IPv6), one binds its cluster listener to
0.0.0.0 and its MQTT listener to [::] (its IPv4 clients arrive there) and
announces --advertise-cluster/--advertise-mqtt (what
membership and /api/load show), one binds 127.0.0.1. The founder restarted
on its data dir does not found again. An advertised wildcard or
unresolvable name is refused at start-up naming the flag.

With --lb, an estuary-lb in front of the wildcard node must
name and dial its --advertise-mqtt address.

Usage: addresses_process.py BUILD/bin/estuaryd [--lb BUILD/bin/estuary-lb] [--seed N]. Ports are
picked free at run time; every wait is on observed state with a deadline;
processes are stopped by pid.
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request

import paho.mqtt.client as mqtt

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance", "support"))
from estuary_process import (DEADLINE, FAILURES, Estuaryd, EstuaryLb, check,  # noqa: E402
                             port_of, stop_process, wait_for)

ESTUARYD = sys.argv[1]
ESTUARY_LB = sys.argv[sys.argv.index("--lb") + 1] if "--lb" in sys.argv else None
SEED = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else random.SystemRandom().randrange(1 << 30)
FORM_DEADLINE = 30  # seconds for three nodes to find each other and elect


def free_port(host):
    """A port free on `host` now (the node binds it a moment later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def bare(host):
    return host[1:-1] if host.startswith("[") else host


def http_json(admin, path):
    host, port = admin.rsplit(":", 1)
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=2) as r:
        return json.load(r)


class Plan:
    """One node's listeners: `bind` is what it listens on, `cluster` what peers dial."""

    def __init__(self, node_id, kind):
        self.node_id = node_id
        self.kind = kind
        if kind == "ipv6":
            self.host = "[::1]"
            port = free_port("::1")
            self.cluster = f"[::1]:{port}"
            self.flags = ["--mqtt", "[::1]:0", "--amqp", "[::1]:0", "--admin", "[::1]:0", "--cluster", self.cluster]
        elif kind == "wildcard":
            self.host = "127.0.0.1"
            port = free_port("0.0.0.0")
            self.cluster = f"127.0.0.1:{port}"
            self.flags = ["--cluster", f"0.0.0.0:{port}", "--advertise-cluster", self.cluster,
                          "--mqtt", "[::]:0", "--advertise-mqtt", "localhost:0"]
        else:
            self.host = "127.0.0.1"
            self.cluster = f"127.0.0.1:{free_port('127.0.0.1')}"
            self.flags = ["--cluster", self.cluster]


class Node(Estuaryd):
    def __init__(self, plan, seeds, secret, data_dir, log_path):
        self.plan = plan
        self.log_path = log_path
        self.log = open(log_path, "w")
        super().__init__(ESTUARYD, "--node-id", str(plan.node_id), "--shards", "1", "--sys-interval", "0",
                         "--shutdown-grace", "500", "--log-level", "info", "--cluster-secret-file", secret,
                         "--data-dir", data_dir, "--seeds", ",".join(seeds), "--bootstrap-expect", "3",
                         *plan.flags, stderr=self.log)

    def log_text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def members(self):
        return http_json(self.admin, "/api/cluster/members")["members"]

    def meta(self):
        return http_json(self.admin, "/api/cluster/meta")

    def stop(self):
        status = super().stop()
        self.log.close()
        return status


def one_cluster(nodes):
    """True once every node sees three up members at their advertised
    addresses and follows one leader whose config has three voters."""
    try:
        leaders = set()
        for node in nodes:
            members = {m["node"]: m for m in node.members()}
            if sorted(members) != sorted(n.plan.node_id for n in nodes):
                return False
            for n in nodes:
                m = members[n.plan.node_id]
                if m["state"] != "up" or m["cluster_address"] != n.plan.cluster:
                    return False
            meta = node.meta()
            if sorted(meta["voters"]) != sorted(n.plan.node_id for n in nodes) or meta["leader"] == 0:
                return False
            leaders.add(meta["leader"])
        return len(leaders) == 1
    except OSError:
        return False


def client(node, client_id):
    received = []
    c = mqtt.Client(client_id=client_id, protocol=mqtt.MQTTv5)
    c.on_message = lambda _c, _u, m: received.append((m.topic, m.payload.decode()))
    # The advertised address when there is one: [::] takes IPv4 clients too.
    host = node.fields.get("advertise_mqtt", node.fields["mqtt"]).rsplit(":", 1)[0]
    c.connect(bare(host), node.mqtt_port)
    c.loop_start()
    wait_for(f"{client_id} connected", c.is_connected)
    return c, received


def route_known(node, peer_id, filter_):
    try:
        for p in http_json(node.admin, "/api/cluster/routes")["peers"]:
            if p["node"] == peer_id and any(r["filter"] == filter_ for r in p["routes"]):
                return True
    except OSError:
        pass
    return False


def messages_flow(nodes):
    subscribers = {}
    for node in nodes:
        c, got = client(node, f"sub-{node.plan.node_id}")
        c.subscribe(f"to/{node.plan.node_id}", qos=1)
        subscribers[node.plan.node_id] = (c, got)
    publishers = {node.plan.node_id: client(node, f"pub-{node.plan.node_id}")[0] for node in nodes}
    try:
        for sender in nodes:
            for receiver in nodes:
                if sender is receiver:
                    continue
                wait_for(f"node {sender.plan.node_id} knows node {receiver.plan.node_id}'s route",
                         lambda: route_known(sender, receiver.plan.node_id, f"to/{receiver.plan.node_id}"),
                         FORM_DEADLINE)
                publishers[sender.plan.node_id].publish(
                    f"to/{receiver.plan.node_id}", f"from-{sender.plan.node_id}", qos=1).wait_for_publish(DEADLINE)
        for receiver in nodes:
            want = sorted(f"from-{n.plan.node_id}" for n in nodes if n is not receiver)
            got = subscribers[receiver.plan.node_id][1]
            wait_for(f"node {receiver.plan.node_id}'s messages", lambda: sorted(p for _, p in got) == want)
        return True
    finally:
        for c in list(publishers.values()) + [c for c, _ in subscribers.values()]:
            c.loop_stop()
            c.disconnect()


def through_balancer(node, other):
    """estuary-lb with only `node`: it must name and dial the advertised MQTT address."""
    # No PROXY header: the nodes here take none (--proxy-from unset).
    lb = EstuaryLb(ESTUARY_LB, "--nodes", node.admin, "--role", "active", "--startup-wait", "0",
                   "--poll-interval", "50", "--proxy-protocol", "none", "--log-level", "error")
    try:
        def named():
            try:
                nodes = http_json(lb.fields["admin"], "/api/nodes")["nodes"]
            except OSError:
                return False
            return any(n.get("mqtt") == f"localhost:{node.mqtt_port}" and n["eligible"] for n in nodes)
        wait_for("the balancer names the advertised MQTT address", named)
        sub, got = client(other, "behind-lb-sub")
        sub.subscribe("lb/t", qos=1)
        wait_for("the subscriber's route on the node behind the balancer",
                 lambda: route_known(node, other.plan.node_id, "lb/t"), FORM_DEADLINE)
        pub = mqtt.Client(client_id="via-lb", protocol=mqtt.MQTTv5)
        pub.connect("127.0.0.1", port_of(lb.fields["mqtt"]))
        pub.loop_start()
        pub.publish("lb/t", "via the balancer", qos=1).wait_for_publish(DEADLINE)
        wait_for("the message published through the balancer", lambda: got == [("lb/t", "via the balancer")])
        for c in (pub, sub):
            c.loop_stop()
            c.disconnect()
        return True
    finally:
        lb.stop()


def refused_at_start(flags, flag):
    result = subprocess.run([ESTUARYD, *flags], capture_output=True, text=True, timeout=DEADLINE)
    return result.returncode == 2 and flag in result.stderr, result.stderr.strip()


def main():
    print(f"addresses_process: seed {SEED} (replay: {' '.join(sys.argv[:2])} --seed {SEED})", flush=True)
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        secret = os.path.join(tmp, "secret")
        with open(secret, "w") as f:
            f.write("one configuration\n")
        kinds = ["ipv6", "wildcard", "loopback"]
        rng.shuffle(kinds)
        plans = [Plan(node_id, kind) for node_id, kind in zip((1, 2, 3), kinds)]
        seeds = [plan.cluster for plan in plans]
        order = list(plans)
        rng.shuffle(order)
        print("start order: " + ", ".join(f"node {p.node_id} ({p.kind})" for p in order), flush=True)
        nodes = []
        try:
            for index, plan in enumerate(order):
                node = Node(plan, seeds, secret, os.path.join(tmp, f"data{plan.node_id}"),
                            os.path.join(tmp, f"node{plan.node_id}.log"))
                nodes.append(node)
                if index < len(order) - 1:
                    # Before the next starts, this one is seen waiting for the rest.
                    wait_for(f"node {plan.node_id} waiting for the expected nodes",
                             lambda: "of 3 expected nodes reachable" in node.log_text())
            nodes.sort(key=lambda n: n.plan.node_id)
            by_kind = {n.plan.kind: n for n in nodes}
            check(by_kind["ipv6"].fields["mqtt"].startswith("[::1]:") and by_kind["ipv6"].admin.startswith("[::1]:"),
                  "the IPv6 node's ready line names [::1] listeners: " + by_kind["ipv6"].ready_line)
            wildcard = by_kind["wildcard"]
            check(wildcard.fields.get("advertise_cluster") == wildcard.plan.cluster and
                  wildcard.fields.get("advertise_mqtt") == f"localhost:{wildcard.mqtt_port}",
                  "the wildcard node's ready line names what it advertises: " + wildcard.ready_line)

            wait_for("one cluster of three", lambda: one_cluster(nodes), FORM_DEADLINE)
            check(True, "three identically configured nodes form one cluster: 3 members up, 3 voters, one leader")
            founders = [n.plan.node_id for n in nodes if "founding the cluster" in n.log_text()]
            check(founders == [1], f"exactly one node founded it, the lowest id (founders: {founders})")
            want = {1: ("bootstrap", True, 3), 2: ("done", False, 3), 3: ("done", False, 3)}
            gates = {}

            def gates_settled():  # a joiner's gate sees its state at its next tick (100 ms)
                gates.update({n.plan.node_id: n.meta()["bootstrap"] for n in nodes})
                return {i: (g["step"], g["founded_here"], g["expect"]) for i, g in gates.items()} == want
            try:
                wait_for("the gates' last decisions", gates_settled)
                settled = True
            except AssertionError:
                settled = False
            check(settled, f"/api/cluster/meta's bootstrap: founded on node 1 only, the others done ({gates})")
            load = http_json(wildcard.admin, "/api/load")
            check(load["mqtt"] == f"localhost:{wildcard.mqtt_port}",
                  f"/api/load names --advertise-mqtt, not [::] ({load['mqtt']})")
            ipv6 = by_kind["ipv6"]
            check(urllib.request.urlopen(f"http://{ipv6.admin}/healthz", timeout=2).status == 200,
                  f"the admin API answers over IPv6 at {ipv6.admin}")
            check(messages_flow(nodes), "QoS 1 messages flow between every pair of nodes (IPv6 links included)")
            check(amqp_over_ipv6(ipv6), f"an AMQP 1.0 client sends and receives over [::1]:{ipv6.amqp_port}")
            if ESTUARY_LB:
                check(through_balancer(wildcard, by_kind["loopback"]),
                      "estuary-lb dials the node's --advertise-mqtt (localhost, not the admin host) and a message "
                      "published through it reaches another node")

            # The founder restarts on its data dir: its stored state means it never founds again.
            founder = nodes[0]
            check(founder.stop() == 0, "the founder stopped on SIGTERM")
            nodes[0] = Node(founder.plan, seeds, secret, os.path.join(tmp, "data1"),
                            os.path.join(tmp, "node1-restart.log"))
            wait_for("one cluster of three after the founder's restart", lambda: one_cluster(nodes), FORM_DEADLINE)
            wait_for("the restarted founder's gate done", lambda: "metadata group has state" in nodes[0].log_text())
            text = nodes[0].log_text()
            check("founding the cluster" not in text and "metadata group has state" in text,
                  "the restarted founder finds its stored state and does not found a second cluster")

            # The founder again, its store lost: the lowest id with nothing stored, among peers that
            # hold state. It must join them, never found a second cluster.
            check(nodes[0].stop() == 0, "the founder stopped on SIGTERM again")
            shutil.rmtree(os.path.join(tmp, "data1"))
            nodes[0] = Node(founder.plan, seeds, secret, os.path.join(tmp, "data1"),
                            os.path.join(tmp, "node1-wiped.log"))
            wait_for("one cluster of three after the founder lost its store", lambda: one_cluster(nodes),
                     FORM_DEADLINE)
            # Its gate sees the state the leader gave it at its next tick (100 ms).
            wait_for("the wiped founder's gate done", lambda: "belongs to a cluster" in nodes[0].log_text())
            text = nodes[0].log_text()
            gate_lines = [line for line in text.splitlines() if "bootstrap-expect" in line]
            check("founding the cluster" not in text and "belongs to a cluster" in text,
                  "the founder restarted with an empty store joins the cluster, never founds a second: " +
                  " | ".join(gate_lines))

            # A fourth node with the same configuration (a StatefulSet scaled up): outside the
            # seeds, it joins and never founds.
            later = Node(Plan(4, "loopback"), seeds, secret, os.path.join(tmp, "data4"),
                         os.path.join(tmp, "node4.log"))
            nodes.append(later)

            def joined():
                try:
                    members = later.members()
                    meta = later.meta()
                except OSError:
                    return False
                return (sorted(m["node"] for m in members if m["state"] == "up") == [1, 2, 3, 4] and
                        meta["leader"] in (1, 2, 3) and 4 in meta["learners"] + meta["voters"])
            wait_for("the fourth node in the cluster", joined, FORM_DEADLINE)
            text = later.log_text()
            check("never founds" in text and "founding the cluster" not in text,
                  "a fourth node outside the seeds joins the cluster and never founds one")
        finally:
            for node in nodes:
                if node.process.poll() is None:
                    stop_process(node.process)

        for flags, flag in ((["--advertise-cluster", "0.0.0.0:7000"], "--advertise-cluster"),
                            (["--advertise-mqtt", "[::]:1883"], "--advertise-mqtt"),
                            (["--advertise-amqp", "no-such-host.invalid:5672"], "--advertise-amqp"),
                            (["--cluster", "0.0.0.0:0", "--cluster-secret-file", secret], "--advertise-cluster")):
            ok, message = refused_at_start(flags, flag)
            check(ok, f"{' '.join(flags[:2])} is refused at start-up naming {flag}: {message}")
    if FAILURES:
        print(f"FAILED (seed {SEED}): {len(FAILURES)} check(s)")
        sys.exit(1)
    print("addresses_process: all checks passed")


def amqp_over_ipv6(node):
    from proton import Message
    from proton.utils import BlockingConnection
    connection = BlockingConnection(f"amqp://[::1]:{node.amqp_port}", timeout=DEADLINE)
    try:
        receiver = connection.create_receiver("v6/amqp")
        sender = connection.create_sender("v6/amqp")
        sender.send(Message(body="over ipv6"))
        message = receiver.receive(timeout=DEADLINE)
        receiver.accept()
        body = message.body
        return (body.decode() if isinstance(body, (bytes, memoryview)) else str(body)) == "over ipv6"
    finally:
        connection.close()


if __name__ == "__main__":
    main()
