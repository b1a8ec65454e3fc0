"""The randomized nemesis: a schedule of faults drawn from a seed
(random.Random(seed), nothing else), then applied to a cluster.Cluster, each
fault undone before the next, the last one ending `quiet_s` before the end so
the final reads see a healed cluster. The same seed and minutes give the same
schedule (kinds, targets, times); what the cluster does under it is not
deterministic, which is why a failing run keeps its history and logs.

Faults (README.md, "Faults"):
  partition-one       node K cut from the other two, both ways
  partition-one-in    one way: K receives nothing from the others
  partition-one-out   one way: the others receive nothing from K
  partition-bridge    K sees both others, they do not see each other
  loss                30% of packets between K and the others dropped, both ways
                      (nft numgen: this kernel has no sch_netem, see netem_error)
  pause               SIGSTOP K for longer than the failure detector's down
                      (3 s, docs/membership.md), then SIGCONT
  kill                kill -9 K, restarted with the same argv at the end
  storage-truncate    kill -9 K, the newest data file of one of its stores cut
                      short inside its records, restarted
  storage-bitflip     kill -9 K, one bit flipped in the last 4 KiB of records of
                      that file, restarted
  clock-offset        kill -9 K, restarted with its wall clock 5-60 s ahead or
                      behind (libfaketime; monotonic clock true), and at the end
                      kill -9 and restarted with the true clock (skipped, with
                      the reason, where libfaketime is not installed)
Node 1 is the publishers' node, so a third of the faults hit the node the
clients use."""

import glob
import os
import random
import subprocess
import threading

NETWORK = ["partition-one", "partition-one-in", "partition-one-out", "partition-bridge", "loss"]
PROCESS = ["pause", "kill", "storage-truncate", "storage-bitflip", "clock-offset"]
KILLS = ("kill", "storage-truncate", "storage-bitflip", "clock-offset")
LOSS_PERCENT = 30


def netem_error(namespace):
    """None if `tc qdisc add ... netem` works in `namespace` (then removed),
    else the error text."""
    add = subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "eth0", "root", "netem",
                          "delay", "10ms"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if add.returncode != 0:
        return add.stdout.strip() or "exit %d" % add.returncode
    subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "eth0", "root"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return None


def schedule(seed, seconds, nodes=3, warmup_s=4.0, quiet_s=15.0, kinds=None):
    """[{id, at, fault, node, duration, detail}] in time order. A kill-like
    fault never takes the last node still run by the launcher itself (it
    exits, and removes the namespaces, once none of its own children runs)."""
    rng = random.Random(seed)
    kinds = list(kinds or NETWORK + PROCESS)
    originals = set(range(1, nodes + 1))
    faults, at = [], warmup_s
    while True:
        kind = rng.choice(kinds)
        duration = rng.uniform(4.5, 8.0) if kind == "pause" else rng.uniform(4.0, 10.0)
        target = rng.randint(1, nodes)
        if kind in KILLS and originals == {target}:
            target = rng.choice([n for n in range(1, nodes + 1) if n != target])
        if at + duration > seconds - quiet_s:
            break
        detail = {}
        if kind in KILLS:
            originals.discard(target)
        if kind.startswith("storage-"):
            detail = {"pick": rng.random(), "bits": rng.randint(0, 7), "cut": rng.randint(1, 4096)}
        if kind == "clock-offset":
            detail = {"offset_s": rng.choice((-1, 1)) * rng.randint(5, 60)}
        faults.append({"id": len(faults) + 1, "at": round(at, 2), "fault": kind, "node": target,
                       "duration": round(duration, 2), "detail": detail})
        at += duration + rng.uniform(2.0, 5.0)
    return faults


def _used_length(path):
    """Bytes up to the last non-zero one: Bitcask preallocates data files
    and leaves a zero tail (docs/bitcask_format.md), which is not data."""
    with open(path, "rb") as data:
        return len(data.read().rstrip(b"\0"))


def _newest_data_file(data_dir, pick):
    """The newest .data file holding records of one of the node's stores
    (partitions, meta, shard-N), the store chosen by `pick` in [0, 1)."""
    candidates = []
    for store in sorted(glob.glob(os.path.join(data_dir, "*"))):
        files = [f for f in sorted(glob.glob(os.path.join(store, "*.data"))) if _used_length(f) > 0]
        if files:
            candidates.append(files[-1])
    return candidates[int(pick * len(candidates))] if candidates else None


def corrupt(path, kind, detail):
    """In the part of the file that holds records: cuts `detail["cut"]`
    bytes off its end (the file is truncated there, keeping at least one
    byte), or flips one bit in its last 4 KiB; returns what was done."""
    used = _used_length(path)
    size = os.path.getsize(path)
    if kind == "storage-truncate":
        new_size = max(1, used - detail["cut"])
        os.truncate(path, new_size)
        return "truncated %s from %d bytes (%d used) to %d" % (path, size, used, new_size)
    offset = max(0, used - 1 - int(detail["pick"] * min(used, 4096)))
    with open(path, "r+b") as data:
        data.seek(offset)
        byte = data.read(1)[0]
        data.seek(offset)
        data.write(bytes([byte ^ (1 << detail["bits"])]))
    return "flipped bit %d of byte %d of %s (%d bytes used)" % (detail["bits"], offset, path, used)


class Nemesis:
    """Applies a schedule on its own thread; records fault start and end in
    the history (process "nemesis")."""

    def __init__(self, cluster, history, faults):
        self.cluster = cluster
        self.history = history
        self.faults = faults
        self.stopped = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self, clock_zero):
        self.clock_zero = clock_zero  # history time at which the schedule's 0 is
        self.thread.start()

    def stop(self):
        self.stopped.set()
        self.thread.join(60)

    def _wait_until(self, t):
        # A schedule, not a condition: the fault is due at a time.
        delay = self.clock_zero + t - self.history.now()
        return delay <= 0 or not self.stopped.wait(delay)

    def _run(self):
        for fault in self.faults:
            if not self._wait_until(fault["at"]):
                break
            try:
                note = self._begin(fault)
                self.history.record("nemesis", "info", "fault", phase="start", id=fault["id"], fault=self.name(fault),
                                    note=note)
                self._wait_until(fault["at"] + fault["duration"])
                self._end(fault)
                self.history.record("nemesis", "info", "fault", phase="end", id=fault["id"], fault=self.name(fault))
            except Exception as error:  # noqa: BLE001 - recorded, the run goes on healed
                self.errors.append("fault %d (%s): %s" % (fault["id"], self.name(fault), error))
                self.history.record("nemesis", "fail", "fault", phase="end", id=fault["id"], fault=self.name(fault),
                                    error=str(error))
                self._heal_quietly()

    @staticmethod
    def name(fault):
        return "%s n%d" % (fault["fault"], fault["node"])

    def _others(self, node):
        return [n for n in self.cluster.nodes if n != node]

    def _begin(self, fault):
        kind, node, c = fault["fault"], fault["node"], self.cluster
        others = self._others(node)
        if kind == "partition-one":
            for other in others:
                c.drop(other, node)
                c.drop(node, other)
        elif kind == "partition-one-in":
            for other in others:
                c.drop(other, node)
        elif kind == "partition-one-out":
            for other in others:
                c.drop(node, other)
        elif kind == "partition-bridge":
            c.drop(others[0], others[1])
            c.drop(others[1], others[0])
            return "n%d bridges n%d|n%d" % (node, others[0], others[1])
        elif kind == "loss":
            for other in others:
                c.drop(other, node, LOSS_PERCENT)
                c.drop(node, other, LOSS_PERCENT)
        elif kind == "pause":
            c.nodes[node].pause()
        elif kind == "clock-offset":
            c.nodes[node].kill9()
            c.nodes[node].restart(clock_offset_s=fault["detail"]["offset_s"])
            return "n%d restarted with its wall clock %+d s off" % (node, fault["detail"]["offset_s"])
        elif kind in KILLS:
            c.nodes[node].kill9()
            if kind != "kill":
                path = _newest_data_file(c.nodes[node].data_dir(), fault["detail"]["pick"])
                return corrupt(path, kind, fault["detail"]) if path else "no data file"
        return ""

    def _end(self, fault):
        kind, node = fault["fault"], fault["node"]
        if kind in NETWORK:
            self.cluster.heal_network()
        elif kind == "pause":
            self.cluster.nodes[node].resume()
        elif kind == "clock-offset":
            self.cluster.nodes[node].kill9()
            self.cluster.nodes[node].restart()
        else:
            self.cluster.nodes[node].restart()

    def _heal_quietly(self):
        try:
            self.cluster.heal_network()
            self.cluster.heal_processes()
        except Exception as error:  # noqa: BLE001
            self.errors.append("heal: %s" % error)
