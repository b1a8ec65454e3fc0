"""The shipped configurations started for real, on loopback (deploy_check.py, part 5).

- Three machines: deploy/etc/estuaryd.toml for nodes 1-3 (node-id and the
  advertise-* addresses changed per node, as docs/deployment.md says),
  machine paths replaced by files made here (TLS and node certificates
  from openssl, the password file from `estuaryctl passwd`, an ACL, the
  secrets), addresses by free loopback ports; then the balancer pair from
  deploy/etc/estuary-lb.toml without its virtual IP (that would change
  this machine's interface). Each must print its ready line, the nodes
  must form one cluster, the active balancer must find the three eligible
  with the admin token, and alice subscribed through the active balancer
  must get what she publishes over TLS to node 3.
- The StatefulSet: the three pods' command lines as estuaryd-pod.sh makes
  them, with the ConfigMap's estuaryd.toml, the cluster's DNS names mapped
  to loopback ports; they must form one cluster; then pod 1 goes through
  a rolling update's steps (its preStop drain, SIGTERM, the same command
  on the same data) and must come back a member, not draining.
- The image's default estuaryd.toml: one node, /healthz answers.

While estuaryd lacks --bootstrap-expect, nodes that all have seeds wait
for a node without seeds to bootstrap, so node 1 and pod 0 are started
without theirs (printed as a skip). Processes are stopped by pid; every
wait has a deadline.
"""
import json
import os
import socket
import subprocess
import tomllib
import urllib.request

from estuary_process import LineReader, check, port_of, ready_fields, stop_process, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
MACHINE = ("/etc/estuary", "/var/lib/estuary", "10.0.0.", "0.0.0.0", "cluster.local")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)  # a TOML basic string is a JSON string for these values


def write_toml(path, config):
    with open(path, "w") as out:
        out.writelines(f"{key} = {toml_value(value)}\n" for key, value in config.items())
    leftover = [k for k, v in config.items() if any(m in json.dumps(v) for m in MACHINE)]
    check(not leftover, f"{os.path.basename(path)}: every machine path and address replaced (left: {leftover})")


def without_pending(config, pending, where):
    for key in pending:
        if key in config:
            print(f"skip: {where}: {key} left out of the live run (not in estuaryd --help yet)", flush=True)
            config.pop(key)
    return config


class Materials:
    """The files the configurations name, made in `scratch`."""

    def __init__(self, scratch, estuaryctl):
        self.dir = os.path.join(scratch, "etc")
        os.makedirs(self.dir)
        for name, text in (("cluster-secret", "a cluster secret for the deployment check\n"),
                           ("pair-secret", "a pair secret for the deployment check\n"),
                           ("admin-token", "deploy-check-admin-token-0123456789\n"),
                           ("acl", "user alice\ntopic readwrite demo/#\n")):
            self.write(name, text)
        subprocess.run([estuaryctl, "passwd", self.path("passwd"), "alice"], input="secret-pw\n", text=True,
                       capture_output=True, check=True)
        self.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=deploy check CA",
                     "-addext", "basicConstraints=critical,CA:TRUE")
        self.write("server.ext", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        self.write("node.ext", "extendedKeyUsage=serverAuth,clientAuth\n")
        self.certificate("server", "/CN=localhost", "server.ext")
        for node in (1, 2, 3):
            self.certificate(f"node-{node}", f"/CN=estuary-node-{node}", "node.ext")

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as out:
            out.write(text)
        os.chmod(self.path(name), 0o600)

    def openssl(self, *args):
        subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, check=True)

    def certificate(self, name, subject, extensions):
        self.openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                     name + ".key", "-out", name + ".csr", "-subj", subject)
        self.openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-days", "2", "-out", name + ".pem", "-extfile", extensions)

    def files(self, node):
        """Machine path -> the file made here, for node `node`."""
        return {"/etc/estuary/cluster-secret": self.path("cluster-secret"),
                "/etc/estuary/secret/cluster-secret": self.path("cluster-secret"),
                "/etc/estuary/admin-token": self.path("admin-token"),
                "/etc/estuary/secret/admin-token": self.path("admin-token"),
                "/etc/estuary/pair-secret": self.path("pair-secret"),
                "/etc/estuary/passwd": self.path("passwd"), "/etc/estuary/acl": self.path("acl"),
                "/etc/estuary/tls/server.pem": self.path("server.pem"),
                "/etc/estuary/tls/server.key": self.path("server.key"),
                "/etc/estuary/tls/cluster-ca.pem": self.path("ca.pem"),
                "/etc/estuary/tls/node.pem": self.path(f"node-{node}.pem"),
                "/etc/estuary/tls/node.key": self.path(f"node-{node}.key")}


class Started:
    """A program started with `argv`; its first stdout line read with a deadline."""

    def __init__(self, argv, log):
        self.log = log
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "w"))
        self.ready = LineReader(self.process).line() or ""
        self.fields = ready_fields(self.ready) if " ready " in self.ready else {}
        if not self.fields:
            self.process.kill()
            self.process.wait()
            print(open(log).read()[-2000:])

    def stop(self, what):
        if self.fields:
            check(stop_process(self.process) == 0, f"{what} stops on SIGTERM with status 0")


def get_json(address, path, token):
    request = urllib.request.Request(f"http://{address}{path}", headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=2) as reply:
            return json.load(reply)
    except (OSError, ValueError):
        return None


def formed(nodes, token, count):
    """Every member up, and one metadata group: every node knows the same
    leader and `count` members there (members alone link up without a
    bootstrap)."""
    answer = get_json(nodes[0].fields["admin"], "/api/cluster/members", token)
    members = (answer or {}).get("members", [])
    if len(members) != count or any(m.get("state") != "up" for m in members):
        return False
    metas = [get_json(n.fields["admin"], "/api/cluster/meta", token) or {} for n in nodes]
    leaders = {meta.get("leader") for meta in metas}
    return len(leaders) == 1 and 0 not in leaders and None not in leaders and \
        all(len(meta.get("members", [])) == count for meta in metas)


def all_up(nodes, token, count):
    try:
        return wait_for(f"{count} members up under one metadata leader", lambda: formed(nodes, token, count), 30)
    except AssertionError:
        return False


def node_config(base, node, ports, materials, scratch, pending, where):
    config = dict(base)
    files = materials.files(node)
    mine = ports[node]
    listeners = {"mqtt": mine["mqtt"], "amqp": mine["amqp"], "cluster": mine["cluster"], "admin": "127.0.0.1:0",
                 "mqtts": "127.0.0.1:0", "amqps": "127.0.0.1:0", "advertise-cluster": mine["cluster"],
                 "advertise-mqtt": mine["mqtt"], "advertise-amqp": mine["amqp"]}
    for key, value in base.items():
        if key in listeners:
            config[key] = listeners[key]
        elif isinstance(value, str) and value in files:
            config[key] = files[value]
    config["data-dir"] = os.path.join(scratch, f"{where}-data-{node}")
    if "node-id" in config:
        config["node-id"] = node
    if "seeds" in config:
        config["seeds"] = [ports[n]["cluster"] for n in sorted(ports)]
        if "bootstrap-expect" in pending and node == min(ports):
            print(f"skip: {where} node {node}: seeds left out, so it bootstraps as nodes did before "
                  "--bootstrap-expect (the others join it)", flush=True)
            config.pop("seeds")
    if "proxy-from" in config:
        config["proxy-from"] = ["127.0.0.1"]
    return without_pending(config, pending, f"{where} node {node}")


def three_machines(binaries, scratch, materials, pending):
    with open(os.path.join(HERE, "etc", "estuaryd.toml"), "rb") as source:
        base = tomllib.load(source)
    ports = {n: {k: f"127.0.0.1:{free_port()}" for k in ("mqtt", "amqp", "cluster")} for n in (1, 2, 3)}
    nodes = []
    for node in (1, 2, 3):
        path = os.path.join(scratch, f"estuaryd-{node}.toml")
        write_toml(path, node_config(base, node, ports, materials, scratch, pending, "machines"))
        nodes.append(Started([binaries["estuaryd"], "--config", path], path + ".log"))
        check(nodes[-1].fields.get("node") == str(node) and "mqtts" in nodes[-1].fields,
              f"etc/estuaryd.toml as node {node}: ready ({nodes[-1].ready})")
    balancers = []
    if all(n.fields for n in nodes):
        balancers = start_pair(binaries, scratch, materials, [n.fields["admin"] for n in nodes])
    token = open(materials.path("admin-token")).read().strip()
    if balancers and balancers[0].fields.get("admin"):
        def eligible():
            answer = get_json(balancers[0].fields["admin"], "/api/nodes", token) or {}
            return sum(1 for n in answer.get("nodes", []) if n.get("eligible")) == 3
        try:
            check(wait_for("3 eligible nodes", eligible), "the active balancer finds the 3 nodes eligible (token)")
        except AssertionError:
            check(False, "the active balancer finds the 3 nodes eligible (token)")
    if all(n.fields for n in nodes):
        cluster = all_up(nodes, token, 3)
        check(cluster, "the three machines form one cluster (members up, one metadata leader)")
        if cluster and balancers and balancers[0].fields:
            clients(balancers[0], nodes[2], materials, token)
    for i, balancer in enumerate(balancers):
        balancer.stop(f"balancer {i + 1}")
    for node, started in enumerate(nodes, 1):
        started.stop(f"node {node}")


def clients(balancer, node, materials, token):
    """A subscriber through the active balancer's MQTT port (password file, ACL,
    PROXY v2 to a node) gets what a publisher sends over TLS to another node.
    Routes reach the other nodes after SUBACK (docs/cluster.md, "Costs"), so
    the publish waits until the publisher's node holds the subscription's."""
    try:
        import paho.mqtt.client as mqtt
    except ImportError:
        print("skip: python3-paho-mqtt missing: no client through the balancer", flush=True)
        return
    received = []

    def client(name, port, tls):
        c = mqtt.Client(client_id=name, protocol=mqtt.MQTTv5)
        c.username_pw_set("alice", "secret-pw")
        if tls:
            c.tls_set(ca_certs=materials.path("ca.pem"))
        c.on_message = lambda _c, _u, message: received.append((message.topic, message.payload))
        c.connect("127.0.0.1", port)
        c.loop_start()
        return c

    subscriber = client("deploy-sub", port_of(balancer.fields["mqtt"]), False)
    publisher = client("deploy-pub", port_of(node.fields["mqtts"]), True)
    try:
        wait_for("both connected", lambda: subscriber.is_connected() and publisher.is_connected())
        granted = []
        subscriber.on_subscribe = lambda _c, _u, _mid, codes, *rest: granted.extend(c.value for c in codes)
        subscriber.subscribe([("demo/#", 1), ("private/#", 1)])
        wait_for("SUBACK", lambda: len(granted) == 2)
        check(granted[0] == 1 and granted[1] >= 0x80,
              f"the ACL grants alice demo/# and refuses private/# (SUBACK {granted})")
        wait_for("the route on node 3",
                 lambda: (get_json(node.fields["admin"], "/api/cluster/meta", token) or {}).get("routes_total", 0) >= 1)
        publisher.publish("demo/deploy", b"through the pair", qos=1).wait_for_publish(5)
        wait_for("the message", lambda: received)
        check(received == [("demo/deploy", b"through the pair")],
              "alice subscribed through the active balancer gets alice's publish over TLS to node 3")
    except AssertionError as error:
        check(False, f"a client through the balancer and one over TLS: {error}")
    finally:
        for c in (subscriber, publisher):
            c.disconnect()
            c.loop_stop()


def start_pair(binaries, scratch, materials, admins):
    with open(os.path.join(HERE, "etc", "estuary-lb.toml"), "rb") as source:
        base = tomllib.load(source)
    print("skip: estuary-lb.toml's vip and vip-interface left out of the live run "
          "(they would add an address to this machine's interface)", flush=True)
    heartbeats = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    files = materials.files(1)
    started = []
    for i, role in enumerate(("active", "standby")):
        config = {k: v for k, v in base.items() if k not in ("vip", "vip-interface")}
        config.update({"role": role, "mqtt": "127.0.0.1:0", "amqp": "127.0.0.1:0", "admin": "127.0.0.1:0",
                       "heartbeat": heartbeats[i], "peer": heartbeats[1 - i], "nodes": admins})
        for key, value in base.items():
            if isinstance(value, str) and value in files:
                config[key] = files[value]
        path = os.path.join(scratch, f"estuary-lb-{role}.toml")
        write_toml(path, config)
        started.append(Started([binaries["estuary-lb"], "--config", path], path + ".log"))
        check(started[-1].fields.get("role") == role, f"etc/estuary-lb.toml as the {role}: ready ({started[-1].ready})")
    return started


def statefulset(binaries, scratch, materials, pending, k8s, argv_of_pod):
    base = tomllib.loads(k8s["config"])
    count = k8s["replicas"]
    ports = {n: {k: f"127.0.0.1:{free_port()}" for k in ("mqtt", "amqp", "cluster")} for n in range(1, count + 1)}
    pods, pod_argv = [], []
    for ordinal in range(count):
        node = ordinal + 1
        status, argv = argv_of_pod(f"estuary-{ordinal}")
        if status != 0:
            check(False, f"estuaryd-pod.sh for estuary-{ordinal}: exit {status}")
            continue
        path = os.path.join(scratch, f"pod-{ordinal}.toml")
        write_toml(path, node_config(base, node, ports, materials, scratch, pending, "pods"))
        names = {}
        for other in range(count):
            fqdn = f"estuary-{other}.estuary-nodes.mq.svc.cluster.local"
            for key, port in (("cluster", 7000), ("mqtt", 1883), ("amqp", 5672)):
                names[f"{fqdn}:{port}"] = ports[other + 1][key]
        flags, i = [], 0
        while i < len(argv):
            if argv[i][2:] in pending:
                print(f"skip: pod estuary-{ordinal}: {argv[i]} {argv[i + 1]} left out (not in --help yet)")
            elif argv[i] == "--seeds" and ordinal == 0 and "bootstrap-expect" in pending:
                print("skip: pod estuary-0: --seeds left out, so it bootstraps as nodes did before "
                      "--bootstrap-expect (the others join it)")
            elif argv[i] == "--config":
                flags += ["--config", path]
            else:
                flags += [argv[i], ",".join(names.get(part, part) for part in argv[i + 1].split(","))]
            i += 2
        # The listeners' fixed container ports, moved to this pod's loopback ports.
        flags += ["--mqtt", ports[node]["mqtt"], "--amqp", ports[node]["amqp"], "--cluster", ports[node]["cluster"]]
        pod_argv.append(([binaries["estuaryd"], *flags], path + ".log"))
        pods.append(Started(*pod_argv[-1]))
        check(pods[-1].fields.get("node") == str(node), f"pod estuary-{ordinal}: ready as node {node} ({pods[-1].ready})")
    token = open(materials.path("admin-token")).read().strip()
    if len(pods) == count and all(p.fields for p in pods):
        cluster = all_up(pods, token, count)
        check(cluster, f"the StatefulSet's {count} pods form one cluster (members up, one metadata leader)")
        if cluster:
            # Pod 1: it has its seeds in either mode (pod 0 may have been started without).
            restart_pod(binaries, pods, pod_argv, 1, k8s, materials, token)
    for ordinal, pod in enumerate(pods):
        pod.stop(f"pod estuary-{ordinal}")


def claim_client_ids(port, count):
    """Connects and disconnects `count` MQTT clients; how many got a CONNACK (0 without paho)."""
    try:
        import paho.mqtt.client as mqtt
    except ImportError:
        return 0
    connected = 0
    for i in range(count):
        c = mqtt.Client(client_id=f"deploy-claim-{i}", protocol=mqtt.MQTTv5)
        c.username_pw_set("alice", "secret-pw")
        try:
            c.connect("127.0.0.1", port)
            c.loop_start()
            wait_for("CONNACK", c.is_connected)
            connected += 1
        except (OSError, AssertionError):
            pass
        finally:
            c.disconnect()
            c.loop_stop()
    return connected


def restart_pod(binaries, pods, pod_argv, ordinal, k8s, materials, token):
    """What Kubernetes does to one pod in a rolling update: the preStop hook
    (the drain, which waits), SIGTERM, the same command again on the same
    volume. The pod must come back a member and not draining."""
    admin = pods[ordinal].fields["admin"]
    leading = lambda: (get_json(admin, "/api/cluster/partitions", token) or {}).get("leading")  # noqa: E731
    # Client ids claimed on the partitions open them (led about a third here), so the drain has work.
    claimed = claim_client_ids(port_of(pods[ordinal].fields["mqtt"]), 40)
    before = leading()
    if claimed:
        check(bool(before), f"{claimed} client ids claimed: pod {ordinal} leads {before} partitions")
    command = [binaries["estuaryctl"] if part == "/usr/bin/estuaryctl" else part for part in k8s["prestop"]]
    command = [admin if part == "127.0.0.1:8080" else part for part in command]
    command = [materials.path("admin-token") if part.endswith("/admin-token") else part for part in command]
    run = subprocess.run(command, capture_output=True, text=True, timeout=90)
    check(run.returncode == 0, f"pod {ordinal}'s preStop drain: exit {run.returncode} ({(run.stdout + run.stderr).strip()})")
    load = get_json(admin, "/api/load", token) or {}
    check(load.get("draining") is True and leading() == 0,
          f"after preStop, pod {ordinal} is draining and leads no partition (led {before})")
    pods[ordinal].stop(f"pod estuary-{ordinal} (after its preStop)")
    argv, log = pod_argv[ordinal]
    pods[ordinal] = Started(argv, log + ".restarted")
    check(bool(pods[ordinal].fields), f"pod estuary-{ordinal} restarted on its volume: ready ({pods[ordinal].ready})")
    if not pods[ordinal].fields:
        return
    admin = pods[ordinal].fields["admin"]

    def back():
        load = get_json(admin, "/api/load", token) or {}
        return formed(pods, token, len(pods)) and load.get("draining") is False
    try:
        wait_for("the restarted pod back", back, 30)
        check(True, f"pod estuary-{ordinal} is a member again and not draining (the leave ended the drain)")
    except AssertionError:
        load = get_json(admin, "/api/load", token) or {}
        members = (get_json(pods[0].fields["admin"], "/api/cluster/members", token) or {}).get("members", [])
        metas = [(get_json(n.fields["admin"], "/api/cluster/meta", token) or {}) for n in pods]
        check(False, f"pod estuary-{ordinal} is a member again and not draining (draining: {load.get('draining')}; "
                     f"members: {[(m.get('node'), m.get('state')) for m in members]}; metadata leaders: "
                     f"{[m.get('leader') for m in metas]}, members there: {[len(m.get('members', [])) for m in metas]})")
        return
    if before:
        try:
            check(bool(wait_for("leaderships back", leading, 30)),
                  f"pod estuary-{ordinal} leads partitions again ({leading()}; {before} before its drain)")
        except AssertionError:
            check(False, f"pod estuary-{ordinal} leads partitions again (0; {before} before its drain)")


def image_default(binaries, scratch):
    with open(os.path.join(HERE, "docker", "estuaryd.toml"), "rb") as source:
        config = tomllib.load(source)
    config.update({"data-dir": os.path.join(scratch, "image-data"), "mqtt": "127.0.0.1:0", "amqp": "127.0.0.1:0",
                   "admin": "127.0.0.1:0"})
    path = os.path.join(scratch, "image-estuaryd.toml")
    write_toml(path, config)
    node = Started([binaries["estuaryd"], "--config", path], path + ".log")
    check(bool(node.fields), f"docker/estuaryd.toml: ready ({node.ready})")
    if node.fields:
        with urllib.request.urlopen(f"http://{node.fields['admin']}/healthz", timeout=2) as reply:
            check(reply.read() == b"ok\n", "its /healthz (the image's HEALTHCHECK) answers ok")
        node.stop("the image's node")


def run_all(binaries, scratch, pending, k8s, argv_of_pod):
    if subprocess.run(["which", "openssl"], capture_output=True).returncode != 0:
        print("skip: openssl not installed: the live runs need its certificates", flush=True)
        return
    materials = Materials(scratch, binaries["estuaryctl"])
    three_machines(binaries, scratch, materials, pending)
    statefulset(binaries, scratch, materials, pending, k8s, argv_of_pod)
    image_default(binaries, scratch)
