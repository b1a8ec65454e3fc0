#!/usr/bin/env python3
"""Per cell (sync, bytes, batch) of estuary-storage-bench --json files: the
Bitcask/RocksDB ratio of append and ack msg/s (min / median / max over the
files) and the steady phase's p99 per run (Bitcask/RocksDB, microseconds).
Usage: summarize_matrix.py RUN.json ... (see run_matrix.sh)."""
import json
import statistics
import sys
from collections import defaultdict


def main(paths):
    cells = defaultdict(list)  # (sync, bytes, batch) -> [(bitcask run, rocksdb run)]
    for path in paths:
        with open(path) as f:
            runs = json.load(f)["runs"]
        by_key = {}
        for run in runs:
            if run.get("error"):
                print(f"{path}: {run['engine']} failed: {run['error']}", file=sys.stderr)
                continue
            by_key[(run["sync"], run["message_bytes"], run["batch"], run["engine"])] = run
        for (sync, size, batch, engine), run in by_key.items():
            if engine == "bitcask" and (sync, size, batch, "rocksdb") in by_key:
                cells[(sync, size, batch)].append((run, by_key[(sync, size, batch, "rocksdb")]))
    order = {"always": 0, "interval": 1, "none": 2}
    print("| sync | bytes | batch | append ratio min / median / max | ack ratio min / median / max "
          "| steady p99 µs B/R, per run |")
    print("|---|---|---|---|---|---|")
    for key in sorted(cells, key=lambda k: (order.get(k[0], 9), k[1], k[2])):
        pairs = cells[key]

        def ratios(phase):
            values = [b[phase]["messages_per_s"] / r[phase]["messages_per_s"] for b, r in pairs]
            return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"

        p99 = " · ".join(f"{b['steady']['p99_us_per_op']:,.0f}/{r['steady']['p99_us_per_op']:,.0f}"
                         for b, r in pairs)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {ratios('append')} | {ratios('ack')} | {p99} |")


if __name__ == "__main__":
    main(sys.argv[1:])
