#!/usr/bin/python3
"""Process test of mutual TLS on the inter-node links (docs/security.md
"Cluster links") and of estuary-cluster turning it on, with an admin token
(estuary-cluster start --admin-token). Checks, each printed as "ok: ..." or
"FAIL: ...":

  - estuary-cluster starts 3 nodes with --cluster-tls-* (certificates it made
    with openssl in DIR/tls) and the balancer pair with its heartbeat secret,
    and reports ready (it waited, sending the token, until every node saw
    every other up);
  - estuaryctl --token-file DIR/admin.token members lists 3 nodes up; the
    admin API without the token answers 401;
  - a message published through the balancer reaches 3 subscribers spread
    over at least two nodes (so over a TLS link), all clients mosquitto's;
  - a fourth node with the cluster secret but a certificate from another CA
    never shows up in node 1's member table, and node 1 logs the TLS refusal
    naming "unknown CA";
  - SIGHUP makes node 1 read the cluster TLS files and the token again;
  - a node with the secret and node 3's certificate but node id 5 is
    refused by node 1 (--cluster-tls-node-names, which estuary-cluster
    turns on), the log naming both;
  - `estuary-cluster stop` stops it all.

Every wait is on an observed event with a deadline; nothing sleeps.

usage: cluster_tls_process.py estuary-cluster estuaryd estuaryctl mosquitto_pub mosquitto_sub openssl
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, FAILURES, LineReader, check, wait_for  # noqa: E402

CLUSTER, ESTUARYD, ESTUARYCTL, PUB, SUB, OPENSSL = sys.argv[1:7]
WORK = tempfile.mkdtemp(prefix="estuary-cluster-tls-")
DIR = os.path.join(WORK, "cluster")


def token():
    with open(os.path.join(DIR, "admin.token")) as f:
        return f.readline().strip()


def admin_get(address, path, with_token=True):
    request = urllib.request.Request("http://%s%s" % (address, path))
    if with_token:
        request.add_header("Authorization", "Bearer " + token())
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def members(address):
    status, body = admin_get(address, "/api/cluster/members")
    if status != 200:
        return {}
    document = json.loads(body)
    listed = document["members"] if isinstance(document, dict) else document
    return {m["node"]: m["state"] for m in listed}


def other_ca_certificate():
    """A CA of its own and a node certificate from it, made like estuary-cluster's."""
    folder = os.path.join(WORK, "stranger")
    os.makedirs(folder)
    run = lambda *args: subprocess.run([OPENSSL, *args], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
        folder + "/ca.key", "-out", folder + "/ca.pem", "-days", "30", "-subj", "/CN=Another CA",
        "-addext", "basicConstraints=critical,CA:TRUE")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder + "/node.key",
        "-out", folder + "/node.csr", "-subj", "/CN=estuary-node-4")
    with open(folder + "/node.ext", "w") as f:
        f.write("extendedKeyUsage=serverAuth,clientAuth\n")
    run("x509", "-req", "-in", folder + "/node.csr", "-CA", folder + "/ca.pem", "-CAkey", folder + "/ca.key",
        "-CAcreateserial", "-days", "30", "-out", folder + "/node.pem", "-extfile", folder + "/node.ext")
    return folder + "/node.pem", folder + "/node.key"


def start_cluster():
    launcher = subprocess.Popen([CLUSTER, "start", "--nodes", "3", "--dir", DIR, "--storage", "memory",
                                 "--balancers", "--admin-token", "--estuaryd", ESTUARYD, "--",
                                 "--shards", "1", "--log-level", "info"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader = LineReader(launcher)
    lines = []
    while True:
        line = reader.line(60)
        if line is None:
            raise SystemExit("FAIL: estuary-cluster printed no ready line; output so far:\n" + "\n".join(lines))
        lines.append(line)
        if line.startswith("estuary-cluster ready "):
            return launcher, lines


def node_fields(lines):
    nodes = {}
    for line in lines:
        if line.startswith("estuaryd ready "):
            fields = dict(w.split("=", 1) for w in line.split()[2:])
            nodes[int(fields["node"])] = fields
    return nodes


def main():
    launcher, lines = start_cluster()
    try:
        output = "\n".join(lines)
        nodes = node_fields(lines)
        check(len(nodes) == 3, "estuary-cluster started 3 nodes (%d)" % len(nodes))
        check("cluster links: mutual TLS" in output, "estuary-cluster says the links are mutual TLS")
        for k in (1, 2, 3):
            with open(os.path.join(DIR, "node-%d.log" % k)) as f:
                log = f.read()
            refused = [l for l in log.splitlines() if "TLS handshake failed" in l]
            check(not refused, "node %d refused no TLS link of its own cluster %r" % (k, refused[:3]))
        with open(os.path.join(DIR, "lb-active.log")) as f:
            lb_log = f.read()
        check("heartbeats authenticated" in lb_log and "NOT authenticated" not in lb_log,
              "the balancer pair runs with its heartbeat secret")
        address = nodes[1]["admin"]
        done = subprocess.run([ESTUARYCTL, "--admin", address, "--token-file", os.path.join(DIR, "admin.token"),
                               "--json", "members"], capture_output=True, text=True, timeout=DEADLINE)
        listed = json.loads(done.stdout) if done.returncode == 0 else {}
        listed = listed["members"] if isinstance(listed, dict) else listed
        check(done.returncode == 0 and sorted(m["node"] for m in listed if m["state"] == "up") == [1, 2, 3],
              "estuaryctl --token-file members: nodes 1-3 up (%d %r)" % (done.returncode, done.stderr))
        check(admin_get(address, "/api/cluster/members", with_token=False)[0] == 401,
              "the nodes' admin API without the token: 401")

        # The nodes take clients only through the balancers (--proxy-from):
        # three subscribers and a publisher go through the active one, which
        # spreads them over the nodes; every subscriber must get the message,
        # whichever node it landed on, and frames must have crossed the links.
        lb_fields = [dict(w.split("=", 1) for w in l.split()[2:]) for l in lines if l.startswith("estuary-lb ready ")]
        lb_host, lb_port = lb_fields[0]["mqtt"].rsplit(":", 1)
        subscribers = []
        for i in range(3):
            subscribers.append(subprocess.Popen([SUB, "-h", lb_host, "-p", lb_port, "-t", "tls/check", "-C", "1",
                                                 "-W", str(DEADLINE), "-i", "sub-%d" % i, "-q", "1"],
                                                stdout=subprocess.PIPE, text=True))

        def subscriptions(k):
            status, body = admin_get(nodes[k]["admin"], "/metrics")
            return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines() if l.startswith("estuary_subscriptions{"))

        def routes_everywhere():
            # Every subscriber subscribed, and every node routes the topic
            # to every node that holds one of them.
            held = [k for k in (1, 2, 3) if subscriptions(k) > 0]
            if sum(subscriptions(k) for k in (1, 2, 3)) < 3:
                return False
            for k in (1, 2, 3):
                status, body = admin_get(nodes[k]["admin"], "/api/cluster/routes")
                if status != 200 or body.count('"tls/check"') < len(held):
                    return False
            return True
        wait_for("the subscriptions' routes on every node", routes_everywhere, 30)
        held = [k for k in (1, 2, 3) if subscriptions(k) > 0]
        check(len(held) >= 2, "the subscribers are on several nodes (%r): a delivery crosses a link" % held)
        subprocess.run([PUB, "-h", lb_host, "-p", lb_port, "-t", "tls/check", "-m", "over-tls", "-q", "1",
                        "-i", "pub-1"], check=True, timeout=DEADLINE)
        got = [s.communicate(timeout=DEADLINE + 5)[0].strip() for s in subscribers]
        check(got == ["over-tls"] * 3, "3 subscribers through the balancer all got the message (%r)" % got)
        forwards = 0
        for k in (1, 2, 3):
            status, body = admin_get(nodes[k]["admin"], "/metrics")
            for line in body.splitlines():
                if line.startswith("estuary_cluster_link_frames_out_total"):
                    forwards += float(line.rsplit(" ", 1)[1])
        check(forwards > 0, "frames went between the nodes (%d)" % forwards)

        # SIGHUP reads the cluster TLS files again (and the admin token).
        pids = {}
        for line in lines:
            words = line.split()
            if len(words) >= 3 and words[0].isdigit() and words[1].isdigit() and words[2].startswith("127."):
                pids[int(words[0])] = int(words[1])
        os.kill(pids[1], signal.SIGHUP)

        def reloaded():
            with open(os.path.join(DIR, "node-1.log")) as f:
                text = f.read()
            return "reload: cluster TLS certificate" in text and "reload: admin token file" in text
        wait_for("node 1 to log the reload", reloaded)
        check(True, "SIGHUP: node 1 reads the cluster TLS files and the admin token again")
        check(members(address).get(2) == "up", "after the reload node 1 still sees node 2 up")

        cert, key = other_ca_certificate()
        stranger_log = open(os.path.join(WORK, "stranger.log"), "w")
        stranger = subprocess.Popen([ESTUARYD, "--node-id", "4", "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0",
                                     "--admin", "127.0.0.1:0", "--cluster", "127.0.0.1:0", "--shards", "1",
                                     "--storage", "memory", "--cluster-secret-file",
                                     os.path.join(DIR, "cluster.secret"), "--seeds", nodes[1]["cluster"],
                                     "--cluster-tls-cert", cert, "--cluster-tls-key", key,
                                     "--cluster-tls-ca", os.path.join(DIR, "tls", "ca.pem")],
                                    stdout=subprocess.PIPE, stderr=stranger_log)
        try:
            check(LineReader(stranger).line() is not None, "the stranger node starts")

            def refused_in_log():
                with open(os.path.join(DIR, "node-1.log")) as f:
                    return any("TLS handshake failed" in l and "unknown CA" in l for l in f)
            wait_for("node 1 to log the stranger's refusal", refused_in_log)
            check(True, "node 1 logs the refusal of a certificate from another CA, naming unknown CA")
            check(members(address).get(4) != "up", "the stranger never shows up in node 1's member table")
        finally:
            stranger.send_signal(signal.SIGTERM)
            stranger.wait(DEADLINE)
            stranger_log.close()

        # --cluster-tls-node-names (estuary-cluster turns it on): node 3's
        # certificate, valid and from the cluster CA, does not let another
        # node id in.
        impostor_log = open(os.path.join(WORK, "impostor.log"), "w")
        impostor = subprocess.Popen([ESTUARYD, "--node-id", "5", "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0",
                                     "--admin", "127.0.0.1:0", "--cluster", "127.0.0.1:0", "--shards", "1",
                                     "--storage", "memory", "--cluster-secret-file",
                                     os.path.join(DIR, "cluster.secret"), "--seeds", nodes[1]["cluster"],
                                     "--cluster-tls-cert", os.path.join(DIR, "tls", "node-3.pem"),
                                     "--cluster-tls-key", os.path.join(DIR, "tls", "node-3.key"),
                                     "--cluster-tls-ca", os.path.join(DIR, "tls", "ca.pem")],
                                    stdout=subprocess.PIPE, stderr=impostor_log)
        try:
            check(LineReader(impostor).line() is not None, "the impostor node (id 5, node 3's certificate) starts")

            def impostor_refused():
                with open(os.path.join(DIR, "node-1.log")) as f:
                    return any("certificate names CN=estuary-node-3 but its hello node 5" in l for l in f)
            wait_for("node 1 to refuse node 3's certificate for node 5", impostor_refused)
            check(True, "node 1 refuses a certificate that names another node (CN=estuary-node-3 for node 5)")
            check(members(address).get(5) != "up", "the impostor never shows up in node 1's member table")
            check(members(address).get(3) == "up", "node 3 itself stays up")
        finally:
            impostor.send_signal(signal.SIGTERM)
            impostor.wait(DEADLINE)
            impostor_log.close()
    finally:
        stop = subprocess.run([CLUSTER, "stop", "--dir", DIR], capture_output=True, text=True, timeout=60)
        check(stop.returncode == 0, "estuary-cluster stop: 0 (%d %r)" % (stop.returncode, stop.stderr))
        try:
            launcher.wait(30)
        except subprocess.TimeoutExpired:
            launcher.kill()
    if FAILURES:
        print("%d check(s) failed; logs kept in %s" % (len(FAILURES), WORK))
        sys.exit(1)
    shutil.rmtree(WORK, ignore_errors=True)
    print("all checks passed")


if __name__ == "__main__":
    main()
