#!/usr/bin/python3
"""One or more verification runs (issue 24 points 4 and 5; README.md): per
seed, a 3-node cluster in network namespaces (estuary-cluster start --netns,
bitcask, sync always), Paho MQTT 3.1.1 and 5 publishers at QoS 1 and 2 on
node 1, persistent-session subscribers on nodes 2 and 3, the seeded nemesis,
then heal, the publishers' last acknowledgements, a final read (each
subscriber reconnects with its session and drains), stop, and the checker.

Exit 0: every run met the targets; 1: a run did not (its seed and the replay
command printed, its directory kept); 2: bad usage or the cluster could not
be set up; 77: not root (ctest's SKIP_RETURN_CODE), reason printed.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
import cluster as cluster_module  # noqa: E402
import history as history_module  # noqa: E402
import nemesis as nemesis_module  # noqa: E402

DEFAULT_BIN = os.environ.get("ESTUARY_BIN_DIR", "/work/main/build/bin")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", default=DEFAULT_BIN, help="where estuary-cluster (and estuaryd) are")
    parser.add_argument("--estuaryd", default=os.environ.get("ESTUARYD"),
                        help="estuaryd binary (default: $ESTUARYD, else BIN_DIR/estuaryd)")
    parser.add_argument("--seed", type=int, action="append", help="a run per --seed (repeatable)")
    parser.add_argument("--runs", type=int, default=0, help="this many more runs with seeds drawn at random")
    parser.add_argument("--minutes", type=float, default=1.0, help="length of each run's fault schedule")
    parser.add_argument("--faults", help="comma-separated fault kinds to draw from (default: all)")
    parser.add_argument("--out", help="directory for the runs (default: a new one under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep every run's directory, not only failed ones")
    parser.add_argument("--rate", type=float, default=10.0, help="publishes per second per publisher")
    parser.add_argument("--no-amqp", action="store_true", help="MQTT clients only (no Proton sender and receiver)")
    parser.add_argument("--schedule", help="replay this schedule.json (a run directory's) instead of the seed's")
    parser.add_argument("--print-schedule", action="store_true", help="print the seed's schedule and exit")
    args = parser.parse_args(argv)
    args.seeds = list(args.seed or [])
    args.seeds += [int.from_bytes(os.urandom(4), "big") for _ in range(args.runs)]
    if not args.seeds:
        args.seeds = [1]
    args.kinds = args.faults.split(",") if args.faults else None
    if args.kinds is None and not os.path.exists(cluster_module.FAKETIME_LIBRARY):
        print("no %s (Debian libfaketime): clock-offset faults left out" % cluster_module.FAKETIME_LIBRARY,
              flush=True)
        args.kinds = [k for k in nemesis_module.NETWORK + nemesis_module.PROCESS if k != "clock-offset"]
    for kind in args.kinds or []:
        if kind not in nemesis_module.NETWORK + nemesis_module.PROCESS:
            parser.error("unknown fault %r (known: %s)" % (kind, ", ".join(nemesis_module.NETWORK +
                                                                             nemesis_module.PROCESS)))
    return args


def unavailable(args):
    """Why these runs cannot happen here (then exit 77), or None."""
    if os.geteuid() != 0:
        return "not root: network namespaces and nft need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return "no `%s` on PATH (iproute2, nftables)" % tool
    launcher = os.path.join(args.bin_dir, "estuary-cluster")
    if not os.access(launcher, os.X_OK):
        return "no %s" % launcher
    return None


def launcher_error(args):
    """A setup problem that is a failure, not a skip."""
    help_text = subprocess.run([os.path.join(args.bin_dir, "estuary-cluster"), "start", "--help"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    if "--netns" not in help_text:
        return "%s/estuary-cluster has no --netns (built before it was merged?)" % args.bin_dir
    estuaryd = args.estuaryd or os.path.join(args.bin_dir, "estuaryd")
    if not os.access(estuaryd, os.X_OK):
        return "no estuaryd at %s (give --estuaryd)" % estuaryd
    return None


def wait_for(predicate, deadline_s, step=0.05):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)  # polling interval, not a correctness sleep
    return predicate()


def final_read(subscribers, publishers, recorder, deadline_s=90.0, quiet_s=8.0):
    """Each subscriber reconnects (to its first node, same session) and reads
    until it has every acknowledged message or nothing came for quiet_s."""
    acked = {e["msg"] for e in recorder.events if e["op"] == "publish" and e["type"] == "ok"}
    for subscriber in subscribers:
        subscriber.reconnect_fresh()
    for subscriber in subscribers:
        start = time.monotonic()

        def done(s=subscriber):
            if s.generation_before_final is None or s.connect_generation <= s.generation_before_final:
                return False  # not reconnected since the request
            if acked <= s.received:
                return True
            return time.monotonic() - max(s.last_delivery, s.connected_at) > quiet_s

        ok = wait_for(done, deadline_s - (time.monotonic() - start))
        recorder.record(subscriber.client_name, "ok" if ok and subscriber.connected else "fail", "final-read",
                        missing=len(acked - subscriber.received))


def one_run(args, seed, base_dir):
    import mqtt_clients  # paho: only once we know we run

    run_dir = os.path.join(base_dir, "seed-%d" % seed)
    os.makedirs(run_dir, exist_ok=True)
    seconds = args.minutes * 60.0
    if args.schedule:
        with open(args.schedule) as saved:
            faults = json.load(saved)
    else:
        faults = nemesis_module.schedule(seed, seconds, kinds=args.kinds)
    with open(os.path.join(run_dir, "schedule.json"), "w") as out:
        json.dump(faults, out, indent=1)
    recorder = history_module.History(os.path.join(run_dir, "history.jsonl"))
    # Session queues big enough that no run fills one (1000 by default, then
    # drop-new drops acknowledged messages by design): what is checked here
    # is loss under faults, not the queue bound.
    cluster = cluster_module.Cluster(args.bin_dir, run_dir, estuaryd=args.estuaryd,
                                     extra_flags=("--max-queued-messages", "100000"))
    clients, setup_error, nemesis, netem = [], None, None, None
    try:
        cluster.start()
        netem = nemesis_module.netem_error(cluster.nodes[1].ns)
        address = {n: cluster.nodes[n].address for n in cluster.nodes}
        subscribers = [mqtt_clients.Subscriber("sub-m3", 3, [address[2], address[3], address[1]], recorder),
                       mqtt_clients.Subscriber("sub-m5", 5, [address[3], address[2], address[1]], recorder)]
        publishers = [mqtt_clients.Publisher("pub-m%d-q%d" % (version, qos), version,
                                             [address[1], address[2], address[3]], recorder, qos, rate=args.rate)
                      for version in (3, 5) for qos in (1, 2)]
        if not args.no_amqp:
            import amqp_clients  # proton: only when asked for

            subscribers.append(amqp_clients.AmqpReceiver("rcv-amqp", [address[2], address[3], address[1]], recorder))
            publishers.append(amqp_clients.AmqpSender("snd-amqp", [address[1], address[2], address[3]], recorder,
                                                      rate=args.rate))
        clients = subscribers + publishers
        for client in clients:
            client.start()
        if not wait_for(lambda: all(s.subscribed.is_set() for s in subscribers), 30):
            raise RuntimeError("subscribers not subscribed within 30 s")
        if not wait_for(lambda: all(p.connected for p in publishers), 30):
            raise RuntimeError("publishers not connected within 30 s")
        for publisher in publishers:
            publisher.publishing.set()
        nemesis = nemesis_module.Nemesis(cluster, recorder, faults)
        nemesis.start(recorder.now())
        time.sleep(seconds)  # the schedule's length: the nemesis acts within it
        nemesis.stop()
        cluster.heal_network()
        cluster.heal_processes()
        for publisher in publishers:
            publisher.publishing.clear()
        wait_for(lambda: all(not p.outstanding for p in publishers), 60, step=0.2)
        final_read(subscribers, publishers, recorder)
    except Exception as error:  # noqa: BLE001 - reported as this run's setup error
        setup_error = "%s: %s" % (type(error).__name__, error)
    finally:
        for client in clients:
            client.stop()
        if nemesis is not None:
            nemesis.stop()
        cluster.stop()
        recorder.close()
    report = checker.check(history_module.load(os.path.join(run_dir, "history.jsonl")))
    report.update(seed=seed, minutes=args.minutes, run_dir=run_dir, netem_error=netem, setup_error=setup_error,
                  nemesis_errors=nemesis.errors if nemesis else [], faults=len(faults))
    with open(os.path.join(run_dir, "report.json"), "w") as out:
        json.dump(report, out, indent=1)
    return report


def passed(report):
    return (report["valid"] and not report["setup_error"] and not report["nemesis_errors"]
            and not report["unverified_subscribers"])


def _stop_on_signal(signum, frame):
    # SIGTERM or SIGINT (which a background job may have inherited as
    # ignored): unwind, so each run's finally stops its clients and cluster.
    raise SystemExit(128 + signum)


def main(argv):
    signal.signal(signal.SIGTERM, _stop_on_signal)
    signal.signal(signal.SIGINT, _stop_on_signal)
    args = parse_args(argv)
    if args.print_schedule:
        for seed in args.seeds:
            for fault in nemesis_module.schedule(seed, args.minutes * 60.0, kinds=args.kinds):
                print(json.dumps(fault))
        return 0
    why = unavailable(args)
    if why:
        print("SKIP: " + why, flush=True)
        return 77
    why = launcher_error(args)
    if why:
        print("FAIL: " + why, flush=True)
        return 2
    base_dir = args.out or tempfile.mkdtemp(prefix="estuary-verify-")
    os.makedirs(base_dir, exist_ok=True)
    failed = []
    totals = {"runs": 0, "faults": 0, "invoked": 0, "ok": 0, "lost": 0, "unexpected": 0, "dup_exactly_once": 0,
              "dup_at_least_once": 0, "order": 0, "recovered": 0, "stalls": 0}
    for seed in args.seeds:
        started = time.monotonic()
        print("run seed=%d minutes=%g dir=%s" % (seed, args.minutes, os.path.join(base_dir, "seed-%d" % seed)),
              flush=True)
        report = one_run(args, seed, base_dir)
        print(checker.summary(report), flush=True)
        if report["netem_error"]:
            print("netem unavailable (netem faults skipped): " + report["netem_error"], flush=True)
        for error in report["nemesis_errors"] + ([report["setup_error"]] if report["setup_error"] else []):
            print("error: " + error, flush=True)
        totals["runs"] += 1
        totals["faults"] += report["faults"]
        totals["invoked"] += report["publishes"]["invoked"]
        totals["ok"] += report["publishes"]["ok"]
        totals["lost"] += len(report["lost"])
        totals["unexpected"] += len(report["unexpected"])
        totals["dup_exactly_once"] += len(report["duplicates_exactly_once"])
        totals["dup_at_least_once"] += report["duplicates_at_least_once"]
        totals["order"] += len(report["order_violations"])
        totals["recovered"] += report["recovered"]
        totals["stalls"] += len(report.get("stalls", []))
        if passed(report):
            print("PASS seed=%d (%.0f s)" % (seed, time.monotonic() - started), flush=True)
            if not args.keep:  # the report and schedule stay for summaries
                shutil.rmtree(os.path.join(report["run_dir"], "cluster"), ignore_errors=True)
                os.remove(os.path.join(report["run_dir"], "history.jsonl"))
        else:
            failed.append(seed)
            print("FAILED seed=%d; replay: scripts/verify.sh --seed %d --minutes %g; kept %s"
                  % (seed, seed, args.minutes, report["run_dir"]), flush=True)
    print("total: " + " ".join("%s=%d" % item for item in totals.items()) + " failed=%d" % len(failed), flush=True)
    if failed:
        print("failed seeds: " + " ".join(map(str, failed)), flush=True)
    elif not args.keep and not args.out:
        shutil.rmtree(base_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
