#!/usr/bin/python3
"""Real estuaryd processes on loopback form a cluster (--seeds,
--cluster-secret-file): cross-node delivery at QoS 0/1/2, MQTT <-> AMQP
across nodes, retained messages, client-id takeover (DISCONNECT 0x8E),
membership's full mesh from one seed, a shared group with one member per
node (each message once), kill -9 and restart of a node (its routes
forgotten, then replaced), graceful leave on SIGTERM, a wrong secret
refused.

Usage: cluster_smoke.py BUILD/bin/estuaryd. Every port is 0; every wait is
on observed state with a deadline; processes are stopped by pid.
"""
import json
import os
import socket
import sys
import tempfile
import urllib.request

import paho.mqtt.client as mqtt

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance", "support"))
from estuary_process import DEADLINE as DEADLINE_S, Estuaryd, wait_for  # noqa: E402

ESTUARYD = sys.argv[1]


class Node(Estuaryd):
    def __init__(self, node_id, secret_file, seeds=()):
        flags = ["--node-id", str(node_id), "--shards", "2", "--cluster-secret-file", secret_file,
                 "--log-level", "warn"]
        if seeds:
            flags += ["--seeds", ",".join(seeds)]
        super().__init__(ESTUARYD, *flags)

    def routes(self):
        with urllib.request.urlopen(f"http://{self.admin}/api/cluster/routes", timeout=2) as r:
            return json.load(r)

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.admin}/metrics", timeout=2) as r:
            return r.read().decode()

    def stop(self):
        assert super().stop() == 0


def client(node, client_id, version=mqtt.MQTTv5):
    received = []
    disconnects = []
    c = mqtt.Client(client_id=client_id, protocol=version)
    c.on_message = lambda _c, _u, m: received.append((m.topic, m.payload.decode(), m.qos, m.retain))
    c.on_disconnect = lambda _c, _u, rc, *rest: disconnects.append(rc)
    c.connect("127.0.0.1", node.mqtt_port)
    c.loop_start()
    wait_for(f"{client_id} connected", c.is_connected)
    return c, received, disconnects


def peer_route(node, peer, filter_):
    for p in node.routes()["peers"]:
        if p["node"] == peer and p["link"] == "up" and any(r["filter"] == filter_ for r in p["routes"]):
            return True
    return False


def amqp_receive(node, address, ready, publish):
    """Attaches an AMQP receiver, waits for `ready`, calls `publish`, returns the bodies."""
    from proton.utils import BlockingConnection
    connection = BlockingConnection(f"127.0.0.1:{node.amqp_port}", timeout=DEADLINE_S)
    try:
        receiver = connection.create_receiver(address)
        wait_for("the AMQP receiver's route", ready)
        publish()
        message = receiver.receive(timeout=DEADLINE_S)
        receiver.accept()
        body = message.body
        return [body.decode() if isinstance(body, (bytes, memoryview)) else str(body)]
    finally:
        connection.close()


def refused(node):
    for line in node.metrics().splitlines():
        if line.startswith("estuary_cluster_links_refused_total"):
            return int(line.split()[-1])
    return 0


def main():
    with tempfile.TemporaryDirectory() as tmp:
        secret = os.path.join(tmp, "secret")
        with open(secret, "w") as f:
            f.write("correct horse\n")
        wrong = os.path.join(tmp, "wrong")
        with open(wrong, "w") as f:
            f.write("battery staple\n")
        n1 = Node(1, secret)
        n2 = Node(2, secret, [n1.cluster])
        nodes = [n1, n2]
        try:
            # Retained before the subscriber exists, on node 1.
            pub, _, _ = client(n1, "publisher")
            pub.publish("r/early", "kept", qos=1, retain=True).wait_for_publish(DEADLINE_S)

            sub, got, _ = client(n2, "subscriber")
            sub.subscribe("s/#", qos=2)
            wait_for("node 1 learns node 2's route", lambda: peer_route(n1, 2, "s/#"))
            for qos in (0, 1, 2):
                pub.publish(f"s/{qos}", f"q{qos}", qos=qos).wait_for_publish(DEADLINE_S)
            wait_for("3 cross-node deliveries", lambda: len(got) == 3)
            assert sorted((t, p, q) for t, p, q, _ in got) == [("s/0", "q0", 0), ("s/1", "q1", 1), ("s/2", "q2", 2)], got
            print("cross-node delivery qos 0/1/2: ok")

            # An AMQP 1.0 receiver on node 2 gets an MQTT publish from node 1.
            amqp_got = amqp_receive(n2, "a/#", lambda: peer_route(n1, 2, "a/#"),
                                    lambda: pub.publish("a/1", "to-amqp", qos=1).wait_for_publish(DEADLINE_S))
            assert amqp_got == ["to-amqp"], amqp_got
            print("MQTT publisher on node 1 -> AMQP receiver on node 2: ok")

            listener, heard, _ = client(n1, "listener")
            listener.subscribe("b/#", qos=1)
            wait_for("node 2 learns node 1's route", lambda: peer_route(n2, 1, "b/#"))
            from proton import Message
            from proton.utils import BlockingConnection
            amqp = BlockingConnection(f"127.0.0.1:{n2.amqp_port}", timeout=DEADLINE_S)
            amqp.create_sender("b/1").send(Message(body="from-amqp"))  # waits for the disposition
            amqp.close()
            wait_for("the AMQP message on node 1", lambda: heard)
            assert heard[0][:2] == ("b/1", "from-amqp"), heard
            listener.loop_stop()
            print("AMQP sender on node 2 -> MQTT subscriber on node 1: ok")

            sub.subscribe("r/#", qos=1)
            wait_for("retained from node 1 on node 2", lambda: any(t == "r/early" and r for t, _, _, r in got))
            print("retained across nodes: ok")

            # The same client id on node 1 takes node 2's connection over:
            # a raw MQTT 5 connection on node 2 must get DISCONNECT 0x8E.
            first = socket.create_connection(("127.0.0.1", n2.mqtt_port), timeout=DEADLINE_S)
            first.sendall(bytes([0x10, 19, 0, 4]) + b"MQTT" + bytes([5, 2, 0, 60, 0, 0, 6]) + b"roamer")
            connack = first.recv(64)
            assert connack[0] == 0x20, connack
            client(n1, "roamer")
            packet = first.recv(64)
            assert packet[:1] == bytes([0xE0]) and packet[2] == 0x8E, packet
            print("client id takeover across nodes: ok (DISCONNECT 0x8E)")

            # Node 3 seeds node 1 only; membership links it to node 2 too.
            n3 = Node(3, secret, [n1.cluster])
            nodes.append(n3)
            wait_for("node 2 linked to node 3", lambda: any(p["node"] == 3 and p["link"] == "up"
                                                            for p in n2.routes()["peers"]))
            print("membership full mesh: ok")

            # A shared group with a member on each node: each message once.
            members = [client(n, f"member{i}") for i, n in enumerate(nodes)]
            for c, _, _ in members:
                c.subscribe("$share/g/job/+", qos=1)
            wait_for("the group's routes everywhere",
                     lambda: all(peer_route(a, b_id, "job/+") for a in nodes for b_id in (1, 2, 3)
                                 if a is not nodes[b_id - 1]))
            for i in range(60):
                pub.publish("job/x", str(i), qos=1).wait_for_publish(DEADLINE_S)
            wait_for("60 shared deliveries", lambda: sum(len(got_) for _, got_, _ in members) >= 60)
            payloads = sorted(int(p) for _, got_, _ in members for _, p, _, _ in got_)
            assert payloads == list(range(60)), payloads
            print("shared group across 3 nodes: each of 60 messages once; per member:",
                  [len(got_) for _, got_, _ in members])
            for c, _, _ in members:
                c.loop_stop()

            # kill -9 node 3: the others forget its routes once it is down.
            n3.kill()
            nodes.remove(n3)
            wait_for("node 3's routes forgotten on node 1",
                     lambda: not any(p["node"] == 3 and p["routes"] for p in n1.routes()["peers"]))
            print("killed node forgotten: ok")

            # It restarts (new ports, no state) with another subscription:
            # the others hold its new routes only.
            n3 = Node(3, secret, [n1.cluster])
            nodes.append(n3)
            restarted, got3, _ = client(n3, "after-restart")
            restarted.subscribe("fresh/#", qos=1)
            wait_for("node 1 holds node 3's new route", lambda: peer_route(n1, 3, "fresh/#"))
            routes3 = [p for p in n1.routes()["peers"] if p["node"] == 3][0]["routes"]
            assert routes3 == [{"filter": "fresh/#"}], routes3
            pub.publish("fresh/1", "hello again", qos=1).wait_for_publish(DEADLINE_S)
            wait_for("delivery to the restarted node", lambda: got3)
            restarted.loop_stop()
            print("restarted node: stale routes replaced, delivery ok")

            # SIGTERM: node 3 leaves gracefully; node 1 forgets it without
            # waiting for the failure detector.
            n3.stop()
            nodes.remove(n3)
            wait_for("node 3 gone after its leave", lambda: any(p["node"] == 3 and p["link"] == "gone"
                                                                for p in n1.routes()["peers"]), deadline_s=2.5)
            print("graceful leave: ok")

            # A node with the wrong secret is refused and never links.
            n4 = Node(4, wrong, [n1.cluster])
            nodes.append(n4)
            wait_for("node 1 refuses node 4", lambda: refused(n1) >= 1)
            assert all(p["node"] != 4 for p in n1.routes()["peers"]), n1.routes()
            print("wrong secret refused:", refused(n1), "time(s); peers of node 1:",
                  [(p["node"], p["link"]) for p in n1.routes()["peers"]])
            assert refused(n1) >= 1

            metrics = n1.metrics()
            forwards = [l for l in metrics.splitlines() if l.startswith("estuary_cluster_forwards_out_total")]
            print(forwards[0])
            pub.loop_stop()
            sub.loop_stop()
        finally:
            for node in reversed(nodes):
                node.stop()
        print("clean SIGTERM shutdown: ok")


if __name__ == "__main__":
    main()
