"""A 3-node cluster in network namespaces for a verification run, started by
`estuary-cluster start --netns` and controlled by pid: each node's argv is
read from /proc at start so a node killed with -9 is restarted with the same
command line in its own namespace (`ip netns exec`, which execs, so the
replacement's pid is the Popen's). Faults in the network are nft rules in a
table of our own (`inet verify`) in each node's namespace, dropping in the
input hook by source address: silent, no reset (as server/tests/netns_lab.cc).

Nothing here touches a namespace, table or process it did not create: the
namespaces are the ones the launcher we started names on its ready line,
the table is ours, the pids are the launcher's children we read from its
endpoint table or replacements we started."""

import os
import re
import signal
import subprocess
import time

TABLE = "verify"
# Debian's libfaketime (apt install libfaketime): the clock-offset fault.
FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def run(argv, check=True):
    """(returncode, output) of a short command."""
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError("`%s` failed (%d): %s" % (" ".join(argv), result.returncode, result.stdout.strip()))
    return result.returncode, result.stdout


def wait_until(what, predicate, deadline_s):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)  # polling interval, not a correctness sleep
    raise RuntimeError("timed out after %.0f s waiting for %s" % (deadline_s, what))


def _running(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Node:
    def __init__(self, cluster, node_id, pid, address):
        self.cluster = cluster
        self.id = node_id
        self.pid = pid
        self.address = address  # 10.80.X.K
        self.ns = cluster.tag + "n%d" % node_id
        self.log = os.path.join(cluster.dir, "node-%d.log" % node_id)
        with open("/proc/%d/cmdline" % pid, "rb") as cmdline:
            self.argv = [arg.decode() for arg in cmdline.read().split(b"\0") if arg]
        self.replacement = None  # the Popen of a node we restarted
        self.paused = False
        self.alive = True

    def data_dir(self):
        return self.argv[self.argv.index("--data-dir") + 1]

    def nft(self, *words):
        return run(["ip", "netns", "exec", self.ns, "nft", *words])

    def kill9(self):
        """kill -9 and reap; a node already dead (a restart that failed) is left as it is."""
        if not self.alive or (self.replacement is not None and self.replacement.poll() is not None):
            self.alive = False
            return
        if self.paused:
            self.resume()
        os.kill(self.pid, signal.SIGKILL)
        if self.replacement is not None:
            self.replacement.wait(10)
        else:
            wait_until("node %d to die" % self.id, lambda: not _running(self.pid), 10)
        self.alive = False

    def restart(self, deadline_s=30, clock_offset_s=None):
        """The same argv in the same namespace; returns once its log shows a
        new ready line. clock_offset_s: run it with its wall clock off by that
        many seconds (libfaketime; the monotonic clock left true)."""
        offset = os.path.getsize(self.log)
        env = None
        if clock_offset_s is not None:
            env = dict(os.environ, LD_PRELOAD=FAKETIME_LIBRARY, FAKETIME="%+ds" % clock_offset_s,
                       FAKETIME_DONT_FAKE_MONOTONIC="1")
        with open(self.log, "ab") as log:
            self.replacement = subprocess.Popen(["ip", "netns", "exec", self.ns, *self.argv], stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True, env=env)
        self.pid = self.replacement.pid
        self.alive = True

        def ready():
            if self.replacement.poll() is not None:
                raise RuntimeError("restarted node %d exited with %s; see %s" % (self.id, self.replacement.returncode,
                                                                                 self.log))
            with open(self.log, "rb") as log:
                log.seek(offset)
                return b"estuaryd ready node=%d" % self.id in log.read()

        try:
            wait_until("restarted node %d's ready line" % self.id, ready, deadline_s)
        except RuntimeError:
            self.alive = self.replacement.poll() is None
            raise

    def pause(self):
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        os.kill(self.pid, signal.SIGCONT)
        self.paused = False


class Cluster:
    """start() -> a running cluster; stop() always, in a finally."""

    def __init__(self, bin_dir, run_dir, estuaryd=None, nodes=3, extra_flags=()):
        self.bin_dir = bin_dir
        self.dir = os.path.join(run_dir, "cluster")
        self.estuaryd = estuaryd or os.path.join(bin_dir, "estuaryd")
        self.node_count = nodes
        self.extra_flags = list(extra_flags)
        self.launcher = None
        self.launcher_log = os.path.join(run_dir, "launcher.log")
        self.tag = None
        self.nodes = {}
        self.tables = []  # namespaces where we made our nft table

    def start(self, deadline_s=90):
        argv = [os.path.join(self.bin_dir, "estuary-cluster"), "start", "--netns", "--nodes", str(self.node_count),
                "--storage", "bitcask", "--sync", "always", "--dir", self.dir, "--estuaryd", self.estuaryd]
        if self.extra_flags:
            argv += ["--", *self.extra_flags]
        with open(self.launcher_log, "wb") as log:
            self.launcher = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True)

        def ready():
            if self.launcher.poll() is not None:
                raise RuntimeError("estuary-cluster exited with %d; see %s" % (self.launcher.returncode,
                                                                              self.launcher_log))
            with open(self.launcher_log, encoding="utf-8", errors="replace") as log:
                text = log.read()
            return text if "estuary-cluster ready " in text else None

        text = wait_until("estuary-cluster's ready line", ready, deadline_s)
        self.tag = re.search(r"^estuary-cluster ready .* netns=(\S+)", text, re.M).group(1)
        for match in re.finditer(r"^(\d+)\s+(\d+)\s+(\d+\.\d+\.\d+\.\d+):\d+\s", text, re.M):
            node = Node(self, int(match.group(1)), int(match.group(2)), match.group(3))
            self.nodes[node.id] = node
        if len(self.nodes) != self.node_count:
            raise RuntimeError("read %d nodes from the endpoint table in %s" % (len(self.nodes), self.launcher_log))
        for node in self.nodes.values():
            node.nft("add", "table", "inet", TABLE)
            self.tables.append(node)
            node.nft("add chain inet %s in { type filter hook input priority 0; policy accept; }" % TABLE)

    # Network faults: a rule in `to`'s input chain drops what comes from `frm`.
    def drop(self, frm, to, percent=None):
        words = ["add", "rule", "inet", TABLE, "in", "ip", "saddr", self.nodes[frm].address]
        if percent is not None:
            words += ["numgen", "random", "mod", "100", "<", str(percent)]
        self.nodes[to].nft(*words, "drop")

    def heal_network(self):
        for node in self.tables:
            node.nft("flush", "chain", "inet", TABLE, "in")

    def heal_processes(self):
        """Every paused node resumed, every killed node restarted."""
        for node in self.nodes.values():
            if node.paused:
                node.resume()
            if not node.alive:
                node.restart()

    def stop(self):
        """Our replacements by pid, our tables, then the launcher (which
        removes its namespaces). Safe to call after a failed start."""
        for node in self.nodes.values():
            if node.paused:
                try:
                    node.resume()
                except OSError:
                    pass
            if node.replacement is not None and node.replacement.poll() is None:
                node.replacement.terminate()
                try:
                    node.replacement.wait(15)
                except subprocess.TimeoutExpired:
                    node.replacement.kill()
                    node.replacement.wait()
        for node in self.tables:
            run(["ip", "netns", "exec", node.ns, "nft", "delete", "table", "inet", TABLE], check=False)
        self.tables = []
        if self.launcher is not None and self.launcher.poll() is None:
            run([os.path.join(self.bin_dir, "estuary-cluster"), "stop", "--dir", self.dir, "--timeout", "30000"],
                check=False)
            try:
                self.launcher.wait(40)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
                self.launcher.wait()
                run([os.path.join(self.bin_dir, "estuary-cluster"), "stop", "--dir", self.dir], check=False)
