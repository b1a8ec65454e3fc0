"""A run's history: one JSON object a line, appended by every client and the
nemesis of a verification run (tools/verify/README.md lists the fields).

Every event has
  t        seconds since the history was opened (time.monotonic based)
  process  who acted: a client name ("pub-m5-q2", "sub-m3") or "nemesis"
  type     invoke | ok | fail | info   (info: the outcome is unknown, e.g. a
           timeout; a later ok for the same message still counts)
  op       publish | deliver | subscribe | connect | final-read | fault
and, by op, protocol (mqtt3 | mqtt5 | amqp), qos (0, 1, 2; for AMQP
1 = unsettled at-least-once, 2 = receiver settle mode second), topic,
filter, msg (the message id, unique per publish and carried in the
payload), seq (the publisher's sequence number), error, fault, phase.

Standard library only; thread safe (the Paho callbacks run on their own
threads)."""

import json
import threading
import time


def payload_for(message_id, publisher, seq):
    """The bytes a publisher sends: the id, its name and its sequence, so a
    delivery alone says what was sent."""
    return json.dumps({"id": message_id, "pub": publisher, "seq": seq}, separators=(",", ":")).encode()


def parse_payload(payload):
    """(id, publisher, seq) from payload_for's bytes, or (None, None, None)
    for bytes that are not one of ours."""
    try:
        fields = json.loads(payload.decode() if isinstance(payload, (bytes, bytearray)) else payload)
        return fields["id"], fields["pub"], int(fields["seq"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None, None


class History:
    """Events appended to `path` as JSON lines, flushed at once (a run that
    dies still leaves its history), and kept in memory for the checker."""

    def __init__(self, path):
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self.events = []
        # Wall clock of t=0, to line the history up with the nodes' logs.
        self.record("history", "info", "start", wall=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
                    + ".%03d" % (time.time() % 1 * 1000))

    def now(self):
        return time.monotonic() - self._start

    def record(self, process, type_, op, **fields):
        event = {"t": round(self.now(), 4), "process": process, "type": type_, "op": op}
        event.update(fields)
        with self._lock:
            self.events.append(event)
            self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
            self._file.flush()
        return event

    def close(self):
        with self._lock:
            self._file.close()


def load(path):
    """The events of a history file, in file order."""
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
