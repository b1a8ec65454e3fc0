#!/usr/bin/python3
"""Totals over many runs' report.json files (run.py writes one per seed):
runs, publishes, every anomaly class with the seeds it showed in, and
availability per fault kind (publishes invoked during faults of that kind
that were not acknowledged within the checker's ack timeout).

With the histories of failed runs (kept in their directories), each
anomaly is also attributed to the last fault that started before it (for a
duplicate: before its second copy; for a loss: before the publish).

usage: summarize.py DIR...   (each DIR holds seed-S/report.json)"""

import collections
import glob
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
import history  # noqa: E402


def reports(dirs):
    for directory in dirs:
        for path in sorted(glob.glob(os.path.join(directory, "seed-*", "report.json"))):
            with open(path) as report:
                yield json.load(report)


def main(dirs):
    runs = 0
    totals = {"invoked": 0, "ok": 0, "unknown": 0, "fail": 0, "deliveries": 0, "recovered": 0,
              "duplicates_at_least_once": 0}
    anomalies = {"lost": {}, "unexpected": {}, "duplicates_exactly_once": {}, "order_violations": {},
                 "unverified_subscribers": {}, "stalls": {}, "sessions_lost": {}, "setup_error": {}, "nemesis_errors": {}}
    kinds = {}
    quiet = [0, 0]
    for report in reports(dirs):
        runs += 1
        for key in ("invoked", "ok", "unknown", "fail"):
            totals[key] += report["publishes"][key]
        totals["deliveries"] += report["deliveries"]
        totals["recovered"] += report["recovered"]
        totals["duplicates_at_least_once"] += report["duplicates_at_least_once"]
        for key in anomalies:
            value = report.get(key)
            count = len(value) if isinstance(value, list) else (1 if value else 0)
            if count:
                anomalies[key][report["seed"]] = count
        for window in report["availability"]:
            kind = window["fault"].split()[0]
            entry = kinds.setdefault(kind, [0, 0, 0])
            entry[0] += 1
            entry[1] += window["ops"]
            entry[2] += window["failed_or_timed_out"]
        quiet[0] += report["quiet"]["ops"]
        quiet[1] += report["quiet"]["failed_or_timed_out"]
    print("runs: %d" % runs)
    print("publishes: " + " ".join("%s=%d" % item for item in totals.items()))
    for key, seeds in anomalies.items():
        print("%s: %d in %d run(s)%s" % (key, sum(seeds.values()), len(seeds),
                                         (" seeds " + " ".join(map(str, sorted(seeds)))) if seeds else ""))
    print("%-20s %7s %8s %9s %7s" % ("fault", "windows", "ops", "unserved", "share"))
    for kind, (windows, ops, unserved) in sorted(kinds.items()):
        print("%-20s %7d %8d %9d %7.3f" % (kind, windows, ops, unserved, unserved / ops if ops else 0.0))
    print("%-20s %7s %8d %9d %7.3f" % ("(no fault)", "-", quiet[0], quiet[1], quiet[1] / quiet[0] if quiet[0] else 0))


def attribute(dirs):
    """{class: {fault: [count, set of seeds]}} over the kept histories."""
    found = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, set()]))
    for directory in dirs:
        for run in sorted(glob.glob(os.path.join(directory, "seed-*"))):
            path = os.path.join(run, "history.jsonl")
            if not os.path.exists(path) or not os.path.exists(os.path.join(run, "report.json")):
                continue  # passed (history removed) or still running
            events = history.load(path)
            report = checker.check(events)
            starts = [(e["t"], e["fault"]) for e in events if e["op"] == "fault" and e.get("phase") == "start"]
            copies = collections.defaultdict(list)
            for e in events:
                if e["op"] == "deliver":
                    copies[(e["process"], e["msg"])].append(e["t"])
            seed = run.rsplit("seed-", 1)[1]

            def note(kind, t):
                before = [name for start, name in starts if start <= t]
                entry = found[kind][before[-1] if before else "(before any fault)"]
                entry[0] += 1
                entry[1].add(seed)

            for x in report["lost"]:
                note("lost", x["invoked_at"])
            for x in report["duplicates_exactly_once"]:
                note("duplicates_exactly_once", copies[(x["subscriber"], x["msg"])][1])
            for x in report["order_violations"]:
                note("order_violations", x["t"])
            for x in report["stalls"]:
                inside = [start for start, _ in starts if x["from"] <= start <= x["to"]]
                note("stalls", inside[0] if inside else x["from"])  # the fault that began it
    return found


def print_attribution(dirs):
    for kind, faults in attribute(dirs).items():
        print("%s, by the last fault before each:" % kind)
        for fault, (count, seeds) in sorted(faults.items(), key=lambda item: -item[1][0]):
            print("  %-26s %5d in %d run(s): %s" % (fault, count, len(seeds), " ".join(sorted(seeds))))


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
    print_attribution(sys.argv[1:] or ["."])
