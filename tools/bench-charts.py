#!/usr/bin/python3
"""bench-charts.py: the side-by-side tables of tools/bench-report.sh (and
tools/amqp-bench-report.sh) drawn as bar charts with gnuplot (Debian
gnuplot-nox).

    tools/bench-charts.py RESULTS_DIR OUT_DIR [--format png|svg] [--title T]

RESULTS_DIR holds estuary-bench --json results named BROKER-WORKLOAD-max.json
(as fast as possible) and BROKER-WORKLOAD-rate.json (at an equal offered
rate), as bench-report.sh writes them, or BROKER-WORKLOAD.json (one run per
workload, amqp-bench-report.sh). Writes OUT_DIR/throughput.FORMAT
(received messages/s per workload and broker) and OUT_DIR/latency.FORMAT
(p50 and p99 ms at the equal rate, log scale), and prints their paths.
The gnuplot data files are kept beside them (*.dat).
"""

import argparse
import json
import os
import re
import subprocess
import sys


def load_results(results):
    """{(kind, workload): {broker: result}} from the file names."""
    table = {}
    for name in sorted(os.listdir(results)):
        match = re.fullmatch(r"(.+?)-(.+)-(max|rate)\.json", name)
        plain = re.fullmatch(r"([a-z]+)-(.+)\.json", name)  # amqp-bench-report.sh: one run per workload
        if match:
            broker, workload, kind = match.groups()
        elif plain and not name.startswith("idle-"):
            (broker, workload), kind = plain.groups(), "max"
        else:
            continue
        try:
            with open(os.path.join(results, name)) as handle:
                result = json.load(handle)
        except ValueError:
            continue  # a failed run: the tables say so, the chart leaves a gap
        table.setdefault((kind, workload), {})[broker] = result
    return table


def write_data(path, workloads, brokers, value):
    """One row per workload, one column per broker ('-' where missing)."""
    with open(path, "w") as out:
        out.write("workload " + " ".join('"%s"' % b for b in brokers) + "\n")
        for workload, by_broker in workloads:
            cells = []
            for broker in brokers:
                result = by_broker.get(broker)
                cells.append("%.6g" % value(result) if result else "-")
            out.write('"%s" %s\n' % (workload, " ".join(cells)))


def draw(image, data, title, ylabel, columns, logscale=False):
    terminal = ("set terminal svg size 900,500 dynamic font 'sans,11'" if image.endswith(".svg")
                else "set terminal pngcairo size 900,500 font 'sans,10'")
    plots = ", ".join("'%s' using %d:xtic(1) title columnheader(%d)" % (data, c, c) for c in columns)
    script = "\n".join([
        terminal,
        "set output '%s'" % image,
        "set title '%s'" % title.replace("'", "''"),
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.8 border -1",
        "set datafile missing '-'",
        "set grid ytics",
        "set key outside right",
        "set ylabel '%s'" % ylabel,
        "set logscale y" if logscale else "set yrange [0:*]",
        "set xtics rotate by -15",
        "plot " + plots,
    ]) + "\n"
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("out")
    parser.add_argument("--format", choices=["png", "svg"], default="svg")
    parser.add_argument("--title", default="estuary-bench")
    args = parser.parse_args()
    table = load_results(args.results)
    if not table:
        print("bench-charts: no BROKER-WORKLOAD-(max|rate).json in %s" % args.results, file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    brokers = sorted({b for by_broker in table.values() for b in by_broker})
    order = sorted({w for (_, w) in table})
    written = []
    maxed = [(w, table.get(("max", w), {})) for w in order if ("max", w) in table]
    if maxed:
        data = os.path.join(args.out, "throughput.dat")
        write_data(data, maxed, brokers, lambda r: r["receive_rate"])
        image = os.path.join(args.out, "throughput." + args.format)
        draw(image, data, args.title + ": as fast as possible", "received messages / s",
             range(2, 2 + len(brokers)))
        written.append(image)
    rated = [(w, table.get(("rate", w), {})) for w in order if ("rate", w) in table]
    if rated:
        # Two columns per broker: p50 then p99, in ms.
        series = [(b, p) for b in brokers for p in ("p50", "p99")]
        data = os.path.join(args.out, "latency.dat")
        with open(data, "w") as out:
            out.write("workload " + " ".join('"%s %s"' % s for s in series) + "\n")
            for workload, by_broker in rated:
                cells = []
                for broker, percentile in series:
                    result = by_broker.get(broker)
                    cells.append("%.6g" % (result["latency_ns"][percentile] / 1e6) if result else "-")
                out.write('"%s" %s\n' % (workload, " ".join(cells)))
        image = os.path.join(args.out, "latency." + args.format)
        draw(image, data, args.title + ": latency at an equal offered rate", "ms (log scale)",
             range(2, 2 + len(series)), logscale=True)
        written.append(image)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
