#!/usr/bin/env python3
"""Summarises partition_fault_test's figure lines (one per run) into one
markdown row per case: docs/reliability.md "Silent partitions"."""
import re
import sys
from collections import OrderedDict

rows = OrderedDict()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if not line.startswith("| ") or " | victim " not in line:
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    name, victim, acked, lost, dup = cells[0], cells[2], int(cells[3]), int(cells[4]), int(cells[5])
    publishers = cells[6]
    case = rows.setdefault(name, dict(runs=0, victim=victim, acked=0, lost=0, dup=0, cut_acks=[],
                                      cut_last=[], majority_gap=[], heal=[], ends=0, refused=0,
                                      accepted=0, probes=0))
    case["runs"] += 1
    case["acked"] += acked
    case["lost"] += lost
    case["dup"] += dup
    for part in publishers.split(";"):
        m = re.search(r"node (\d+)( \(cut\))?: (\d+) acks in the cut, last at (-?\d+) ms, longest gap (\d+) ms, "
                      r"first after heal (-?\d+) ms", part)
        if not m:
            continue
        if m.group(2):
            case["cut_acks"].append(int(m.group(3)))
            case["cut_last"].append(int(m.group(4)))
            case["heal"].append(int(m.group(6)))
        else:
            case["majority_gap"].append(int(m.group(5)))
    m = re.search(r"majority side (\d+)", line)
    if m:
        case["ends"] += int(m.group(1))
    if "a new CONNECT" in line:
        case["probes"] += 1
        case["refused"] += "refused on the cut node" in line
        case["accepted"] += re.search(r"accepted on node \d", line) is not None


def span(values):
    return "-" if not values else f"{min(values)}-{max(values)}"


print("| case | runs | victim | acknowledged | lost | duplicated | cut node: acks in the cut (last at ms) |"
      " majority publisher's longest gap (ms) | cut node's first ack after the heal (ms) |"
      " sessions taken from the majority | new CONNECT: refused on the cut node / accepted on the majority |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, c in rows.items():
    probes = f"{c['refused']}/{c['probes']} / {c['accepted']}/{c['probes']}" if c["probes"] else "- (cut < 5 s)"
    print(f"| {name} | {c['runs']} | {c['victim']} | {c['acked']} | {c['lost']} | {c['dup']} | "
          f"{span(c['cut_acks'])} ({span(c['cut_last'])}) | {span(c['majority_gap'])} | {span(c['heal'])} | "
          f"{c['ends']} | {probes} |")
