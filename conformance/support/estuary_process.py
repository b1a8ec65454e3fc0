"""What the Python smoke scripts share (server/cluster_smoke.py,
server/monitoring_check.py, server/reload_process.py,
conformance/mqtt/smoke_paho_python.py, conformance/amqp/uamqp_suite.py,
conformance/amqp/link_recovery.py, conformance/security/*.py,
conformance/ws/ws_process.py): an estuaryd or estuary-lb child on free
loopback ports whose endpoints come from its ready line (read with a
deadline), stopped by pid (stop_process); a wait on observed state with a
deadline; a child's output read a line at a time with a deadline
(LineReader); and the "ok: ..." / "FAIL: ..." checks the process scripts
print (check, FAILURES). Standard library only.

A script finds this module through its own location:
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
"""

import os
import selectors
import signal
import subprocess
import time
import urllib.request

DEADLINE = 10  # seconds for any single wait

# One node for a smoke test: two shards, quiet, no $SYS publishing, a short
# shutdown grace.
SINGLE_NODE_FLAGS = ("--shards", "2", "--log-level", "warn", "--sys-interval", "0", "--shutdown-grace", "500")


# What check() found false, in order: a script's summary reports these and
# exits non-zero if there are any. Mutated in place, never rebound, so
# `from estuary_process import FAILURES` sees every check.
FAILURES = []


def check(condition, what):
    """Prints "ok: what" or "FAIL: what" (flushed, so it interleaves with the
    children's output) and records a failure in FAILURES."""
    print(("ok: " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def wait_for(what, predicate, deadline_s=DEADLINE):
    """Returns predicate()'s first true value; AssertionError after deadline_s."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)  # polling interval, not a correctness sleep
    raise AssertionError(f"timed out waiting for {what}")


class LineReader:
    """A child's stdout read a line at a time, each within DEADLINE (read
    unbuffered: a buffered reader would hold lines the selector no longer
    sees). `process`: a Popen with stdout=PIPE."""

    def __init__(self, process):
        self.fd = process.stdout.fileno()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.buffer = b""

    def line(self, timeout=DEADLINE):
        """The next line, or None if none came within `timeout` s or the pipe closed."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def lines_until(self, *prefixes, deadline_s=DEADLINE):
        """The lines (stripped, blank ones left out) up to and including the
        first that starts with one of `prefixes`; fewer if the pipe closed
        or deadline_s passed first."""
        lines = []
        end = time.monotonic() + deadline_s
        while True:
            line = self.line(max(0.0, end - time.monotonic()))
            if line is None:
                return lines
            line = line.strip()
            if not line:
                continue
            lines.append(line)
            if line.startswith(prefixes):
                return lines


def port_of(address):
    """The port of "HOST:PORT" as an int."""
    return int(address.rsplit(":", 1)[1])


def ready_fields(line):
    """The KEY=VALUE words of a ready line ("estuaryd ready node=1 mqtt=...") as a dict."""
    return dict(word.split("=", 1) for word in line.split()[2:] if "=" in word)


def stop_process(process, deadline_s=DEADLINE):
    """SIGTERM; the exit status, or -1 (and kill -9) if it did not exit within deadline_s."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(deadline_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return -1


class _Child:
    """A started program: `process` (the Popen), stopped by pid."""

    def stop(self):
        """SIGTERM; the exit status, or -1 (and kill -9) if it did not exit within DEADLINE."""
        return stop_process(self.process)

    def kill(self):
        """kill -9, and reap it."""
        self.process.kill()
        self.process.wait()


class Estuaryd(_Child):
    """estuaryd started with --mqtt/--amqp/--admin/--cluster 127.0.0.1:0 and
    then `flags`. Raises SystemExit("FAIL: ...") if no ready line comes
    within DEADLINE. Attributes: ready_line, fields (its KEY=VALUE words),
    host, mqtt_port, amqp_port, admin and cluster ("HOST:PORT"), mqtts_port
    and amqps_port (None unless --mqtts/--amqps), process (the Popen). `stderr` (a file)
    takes its log; None: the caller's stderr."""

    def __init__(self, binary, *flags, stderr=None):
        self.process = subprocess.Popen(
            [binary, "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--admin", "127.0.0.1:0",
             "--cluster", "127.0.0.1:0", *flags],
            stdout=subprocess.PIPE, stderr=stderr)
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        if not selector.select(DEADLINE):
            self.process.kill()
            raise SystemExit("FAIL: no ready line from %s" % binary)
        line = self.process.stdout.readline().decode().strip()
        if not line.startswith("estuaryd ready "):
            self.process.kill()
            raise SystemExit("FAIL: unexpected first line %r" % line)
        self.ready_line = line
        fields = ready_fields(line)
        self.fields = fields
        self.mqtts_port = port_of(fields["mqtts"]) if "mqtts" in fields else None
        self.amqps_port = port_of(fields["amqps"]) if "amqps" in fields else None
        self.host = fields["mqtt"].rsplit(":", 1)[0]
        self.mqtt_port = port_of(fields["mqtt"])
        self.amqp_port = port_of(fields["amqp"])
        self.admin = fields["admin"]
        self.cluster = fields["cluster"]


class EstuaryLb(_Child):
    """estuary-lb started with --mqtt/--amqp/--heartbeat/--admin 127.0.0.1:0
    and then `flags`. Its first stdout line is read within DEADLINE and not
    judged here (the scripts check it): ready_line ("" if none came), fields
    (its KEY=VALUE words; {} unless it is "estuary-lb ready ..."), admin
    (fields' "admin" or None), process (the Popen). `stderr` as Estuaryd's."""

    def __init__(self, binary, *flags, stderr=None):
        self.process = subprocess.Popen(
            [binary, "--mqtt", "127.0.0.1:0", "--amqp", "127.0.0.1:0", "--heartbeat", "127.0.0.1:0",
             "--admin", "127.0.0.1:0", *flags],
            stdout=subprocess.PIPE, stderr=stderr)
        self.ready_line = LineReader(self.process).line() or ""
        self.fields = ready_fields(self.ready_line) if self.ready_line.startswith("estuary-lb ready ") else {}
        self.admin = self.fields.get("admin")


def metric(broker, name, labels=""):
    """The sum of a /metrics series' values (those whose labels contain
    `labels`), from `broker.admin` (HOST:PORT, plain HTTP)."""
    with urllib.request.urlopen("http://%s/metrics" % broker.admin, timeout=DEADLINE) as response:
        text = response.read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
