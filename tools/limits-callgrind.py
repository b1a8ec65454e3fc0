#!/usr/bin/python3
"""Instructions estuaryd executes per QoS 0 message (callgrind: stable run to
run) with the abuse limits off and set but never reached, against a baseline
estuaryd (docs/security.md "Abuse limits", "What it costs when nothing is
set"). Runs two message counts per variant; the difference in instructions
divided by the extra messages is the cost per message without start-up.
One shard, one publisher, one subscriber, 64-byte payloads.

usage: /usr/bin/python3 tools/limits-callgrind.py BASELINE_ESTUARYD ESTUARYD ESTUARY_BENCH [LOW HIGH]
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance", "support"))
import estuary_process  # noqa: E402

estuary_process.DEADLINE = 60  # estuaryd under valgrind starts slowly
BASELINE, ESTUARYD, BENCH = sys.argv[1:4]
LOW, HIGH = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (20000, 60000)
LIMITS = ["--max-connections-per-ip", "1000", "--connect-rate-per-ip", "1000", "--max-pending-connections", "10000",
          "--max-publish-rate", "100000000", "--max-publish-bytes-rate", "100000000000"]
VARIANTS = [("baseline", BASELINE, []), ("no limit", ESTUARYD, []), ("limits set", ESTUARYD, LIMITS)]


def instructions(binary, flags, count):
    work = tempfile.mkdtemp(prefix="estuary-callgrind-")
    wrapper = os.path.join(work, "run.sh")
    with open(wrapper, "w") as script:
        script.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/out.%%p %s \"$@\"\n"
                     % (work, binary))
    os.chmod(wrapper, 0o755)
    broker = estuary_process.Estuaryd(wrapper, "--shards", "1", "--log-level", "warn", "--sys-interval", "0", *flags,
                                      stderr=subprocess.DEVNULL)
    run = subprocess.run([BENCH, "--broker", "127.0.0.1:%d" % broker.mqtt_port, "-P", "1", "-S", "1", "-q", "0",
                          "-s", "64", "-n", str(count), "--json", "--drain-timeout", "30"],
                         capture_output=True, text=True, timeout=600)
    broker.stop()
    received = int(re.search(r'"received":(\d+)', run.stdout).group(1))
    total = 0
    for path in glob.glob(os.path.join(work, "out.*")):
        for line in open(path):
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return received, total


def main():
    for name, binary, flags in VARIANTS:
        low_received, low = instructions(binary, flags, LOW)
        high_received, high = instructions(binary, flags, HIGH)
        per_message = (high - low) / max(high_received - low_received, 1)
        print("%-10s %d and %d messages: %d and %d instructions; %.1f per message" %
              (name, low_received, high_received, low, high, per_message), flush=True)


if __name__ == "__main__":
    main()
