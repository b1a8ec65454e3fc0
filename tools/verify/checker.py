"""The history checker: check(events) -> report, a pure function over a
history (history.py's events, in the order they were recorded).

What it counts, per run (README.md says why each rule is what it is):

- per message sent: invoked, ok (acknowledged: PUBACK/PUBCOMP, AMQP
  accepted), fail (a definite refusal), unknown (neither: timed out, or the
  connection went first);
- lost: an acknowledged message never delivered to a subscriber that should
  have had it: the subscriber's subscribe was acknowledged before the publish
  was invoked, its filter matches the topic, min(publish QoS, subscription
  QoS) >= 1, and the subscriber finished its final read (op final-read, ok:
  reconnected with its session and drained until quiet). A subscriber
  without a successful final read is listed as unverified, not judged;
- recovered: an unknown outcome (or fail) that was delivered anyway; a
  delivered *fail* is listed again as failed_but_delivered (a refusal that
  took effect);
- unexpected: a delivery whose id no publish invoked, or whose topic is not
  the topic it was published to;
- duplicates: a message delivered more than once to one subscriber;
  exactly-once ones (min QoS 2) are violations, at-least-once ones are
  allowed and only counted;
- order violations (MQTT 3.1.1 and 5.0 section 4.6, "Message ordering": the
  server sends the PUBLISH packets of one topic and QoS to a consumer in the
  order it received them from any given client): per subscriber, publisher,
  topic and QoS >= 1, the *first* deliveries of messages must come in
  increasing publisher sequence. Redeliveries (second and later copies) are
  left out: a session resumed after a lost acknowledgement resends older
  messages, which section 4.4 allows. MQTT subscribers of MQTT publishers
  only;
- availability: per fault window (the nemesis's fault start and end), the
  share of publishes invoked in it that were not acknowledged within
  `ack_timeout` seconds (failed or timed out); the same for the time outside
  every fault ("quiet").

- sessions lost: a reconnect with clean start 0 answered session present 0
  after the subscription was made (the messages it missed show as lost);
- stalls (liveness, not validity): a subscriber that received nothing for
  more than `stall_s` seconds while messages promised to it were being
  acknowledged (at least one acknowledged in the gap).

valid is false on any lost, unexpected, exactly-once duplicate or order
violation.
"""


def topic_matches(topic_filter, topic):
    """MQTT topic filter matching (MQTT 5.0 section 4.7): `+` one level,
    `#` the rest (and the parent level), `$` topics not matched by a
    leading wildcard."""
    if topic_filter.startswith("$share/"):
        topic_filter = topic_filter.split("/", 2)[2]
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    filter_levels = topic_filter.split("/")
    topic_levels = topic.split("/")
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index >= len(topic_levels):
            return False
        if level != "+" and level != topic_levels[index]:
            return False
    return len(filter_levels) == len(topic_levels)


class _Message:
    __slots__ = ("id", "process", "protocol", "topic", "qos", "seq", "invoked_at", "ok_at", "failed", "unknown")

    def __init__(self, event):
        self.id = event["msg"]
        self.process = event["process"]
        self.protocol = event.get("protocol", "")
        self.topic = event.get("topic", "")
        self.qos = int(event.get("qos", 1))
        self.seq = event.get("seq")
        self.invoked_at = event["t"]
        self.ok_at = None
        self.failed = False
        self.unknown = False

    def outcome(self):
        if self.ok_at is not None:
            return "ok"
        return "fail" if self.failed and not self.unknown else "unknown"


class _Subscription:
    __slots__ = ("process", "protocol", "filter", "qos", "at")

    def __init__(self, event):
        self.process = event["process"]
        self.protocol = event.get("protocol", "")
        self.filter = event["filter"]
        self.qos = int(event.get("qos", 1))
        self.at = event["t"]


def _read(events):
    messages, subscriptions, deliveries, final_reads, faults = {}, [], [], {}, []
    open_faults = {}
    for event in events:
        op, kind = event.get("op"), event.get("type")
        if op == "publish":
            if kind == "invoke":
                messages.setdefault(event["msg"], _Message(event))
                continue
            message = messages.get(event.get("msg"))
            if message is None:
                continue
            if kind == "ok" and message.ok_at is None:
                message.ok_at = event["t"]
            elif kind == "fail":
                message.failed = True
            elif kind == "info":
                message.unknown = True
        elif op == "subscribe" and kind == "ok":
            subscriptions.append(_Subscription(event))
        elif op == "deliver" and kind == "ok":
            deliveries.append(event)
        elif op == "final-read":
            final_reads[event["process"]] = final_reads.get(event["process"], False) or kind == "ok"
        elif op == "fault":
            key = event.get("id", event.get("fault"))
            if event.get("phase") == "start":
                open_faults[key] = event
            elif event.get("phase") == "end" and key in open_faults:
                start = open_faults.pop(key)
                faults.append({"id": key, "fault": start.get("fault", ""), "start": start["t"], "end": event["t"]})
    for key, start in open_faults.items():
        end = events[-1]["t"] if events else start["t"]
        faults.append({"id": key, "fault": start.get("fault", ""), "start": start["t"], "end": end, "unhealed": True})
    return messages, subscriptions, deliveries, final_reads, faults


def _guarantee(message, subscription):
    """0, 1 or 2: what the subscription promises for this message."""
    if not topic_matches(subscription.filter, message.topic) or message.invoked_at < subscription.at:
        return 0
    return min(message.qos, subscription.qos)


def _best_guarantee(message, subscriptions_of):
    return max((_guarantee(message, s) for s in subscriptions_of), default=0)


def _deliveries_by_subscriber(deliveries, messages, report):
    """{subscriber: [(event, message)]} for deliveries of known messages; the
    rest go to report["unexpected"]."""
    by_subscriber = {}
    for event in deliveries:
        message = messages.get(event.get("msg"))
        if message is None or (event.get("topic") is not None and event["topic"] != message.topic):
            report["unexpected"].append({"subscriber": event["process"], "msg": event.get("msg"),
                                         "topic": event.get("topic"), "t": event["t"]})
            continue
        by_subscriber.setdefault(event["process"], []).append((event, message))
    return by_subscriber


def _duplicates_and_order(by_subscriber, subscriptions, report):
    for subscriber, received in by_subscriber.items():
        subscriptions_of = [s for s in subscriptions if s.process == subscriber]
        counts = {}
        for _, message in received:
            counts[message.id] = counts.get(message.id, 0) + 1
        for message_id, count in counts.items():
            if count < 2:
                continue
            message = received[[m.id for _, m in received].index(message_id)][1]
            entry = {"subscriber": subscriber, "msg": message_id, "copies": count, "publisher": message.process}
            if _best_guarantee(message, subscriptions_of) >= 2:
                report["duplicates_exactly_once"].append(entry)
            else:
                report["duplicates_at_least_once"] += count - 1
        if not subscriptions_of or not all(s.protocol.startswith("mqtt") for s in subscriptions_of):
            continue
        seen, highest = set(), {}
        for event, message in received:
            if message.id in seen:
                continue
            seen.add(message.id)
            if not message.protocol.startswith("mqtt") or message.seq is None:
                continue
            if _best_guarantee(message, subscriptions_of) < 1:
                continue
            stream = (message.process, message.topic, message.qos)
            previous = highest.get(stream)
            if previous is not None and message.seq < previous[0]:
                report["order_violations"].append({"subscriber": subscriber, "publisher": message.process,
                                                   "topic": message.topic, "qos": message.qos, "seq": message.seq,
                                                   "after_seq": previous[0], "t": event["t"]})
            else:
                highest[stream] = (message.seq, message.id)


def _lost(messages, subscriptions, by_subscriber, final_reads, report):
    delivered_to = {}
    for subscriber, received in by_subscriber.items():
        for _, message in received:
            delivered_to.setdefault(message.id, set()).add(subscriber)
    subscribers = sorted({s.process for s in subscriptions})
    report["unverified_subscribers"] = [s for s in subscribers if not final_reads.get(s)]
    for message in messages.values():
        if message.outcome() != "ok":
            continue
        for subscriber in subscribers:
            if not final_reads.get(subscriber) or subscriber in delivered_to.get(message.id, ()):
                continue
            guarantee = _best_guarantee(message, [s for s in subscriptions if s.process == subscriber])
            if guarantee >= 1:
                report["lost"].append({"subscriber": subscriber, "msg": message.id, "publisher": message.process,
                                       "topic": message.topic, "qos": message.qos, "seq": message.seq,
                                       "invoked_at": message.invoked_at, "ok_at": message.ok_at})
    for message in messages.values():
        if message.outcome() != "ok" and message.id in delivered_to:
            report["recovered"] += 1
            if message.outcome() == "fail":
                report["failed_but_delivered"].append(message.id)


def _availability(messages, faults, ack_timeout):
    def served(message):
        return message.ok_at is not None and message.ok_at - message.invoked_at <= ack_timeout

    windows = []
    in_any = set()
    for fault in sorted(faults, key=lambda f: f["start"]):
        inside = [m for m in messages.values() if fault["start"] <= m.invoked_at < fault["end"]]
        in_any.update(m.id for m in inside)
        unserved = sum(1 for m in inside if not served(m))
        windows.append(dict(fault, ops=len(inside), failed_or_timed_out=unserved,
                            share=round(unserved / len(inside), 3) if inside else None))
    quiet = [m for m in messages.values() if m.id not in in_any]
    unserved = sum(1 for m in quiet if not served(m))
    return windows, {"ops": len(quiet), "failed_or_timed_out": unserved,
                     "share": round(unserved / len(quiet), 3) if quiet else None}


def _stalls(messages, subscriptions, by_subscriber, stall_s):
    stalls = []
    for subscriber in sorted({s.process for s in subscriptions}):
        subscriptions_of = [s for s in subscriptions if s.process == subscriber]
        since = min(s.at for s in subscriptions_of)
        times = [since] + sorted(event["t"] for event, _ in by_subscriber.get(subscriber, []))
        promised = sorted(m.ok_at for m in messages.values()
                          if m.ok_at is not None and _best_guarantee(m, subscriptions_of) >= 1)
        if promised and promised[-1] > times[-1]:
            times.append(promised[-1])  # nothing came after the last acknowledgement
        for start, end in zip(times, times[1:]):
            if end - start > stall_s and any(start < t < end or t == end for t in promised):
                stalls.append({"subscriber": subscriber, "from": start, "to": end, "seconds": round(end - start, 1)})
    return stalls


def check(events, ack_timeout=5.0, stall_s=10.0):
    """The report (a dict) for one run's events; see the module comment."""
    messages, subscriptions, deliveries, final_reads, faults = _read(events)
    outcomes = [m.outcome() for m in messages.values()]
    report = {
        "publishes": {"invoked": len(messages), "ok": outcomes.count("ok"), "fail": outcomes.count("fail"),
                      "unknown": outcomes.count("unknown")},
        "deliveries": len(deliveries),
        "lost": [], "recovered": 0, "failed_but_delivered": [], "unexpected": [],
        "duplicates_exactly_once": [], "duplicates_at_least_once": 0, "order_violations": [],
        "unverified_subscribers": [],
    }
    report["sessions_lost"] = [{"subscriber": e["process"], "t": e["t"]} for e in events
                               if e.get("op") == "session" and e.get("present") is False]
    by_subscriber = _deliveries_by_subscriber(deliveries, messages, report)
    _duplicates_and_order(by_subscriber, subscriptions, report)
    _lost(messages, subscriptions, by_subscriber, final_reads, report)
    report["availability"], report["quiet"] = _availability(messages, faults, ack_timeout)
    report["stalls"] = _stalls(messages, subscriptions, by_subscriber, stall_s)
    report["valid"] = not (report["lost"] or report["unexpected"] or report["duplicates_exactly_once"]
                           or report["order_violations"])
    return report


def summary(report):
    """A few lines for people: the counts and the first few of each anomaly."""
    p = report["publishes"]
    lines = [
        "publishes: invoked=%d ok=%d fail=%d unknown=%d; deliveries=%d"
        % (p["invoked"], p["ok"], p["fail"], p["unknown"], report["deliveries"]),
        "lost=%d recovered=%d unexpected=%d duplicates(exactly-once)=%d duplicates(at-least-once)=%d "
        "order-violations=%d failed-but-delivered=%d"
        % (len(report["lost"]), report["recovered"], len(report["unexpected"]),
           len(report["duplicates_exactly_once"]), report["duplicates_at_least_once"],
           len(report["order_violations"]), len(report["failed_but_delivered"])),
    ]
    for stall in report["stalls"]:
        lines.append("stall: %(subscriber)s received nothing from %(from).1fs to %(to).1fs (%(seconds)s s) while "
                     "messages for it were acknowledged" % stall)
    for lost_session in report["sessions_lost"]:
        lines.append("session lost: %(subscriber)s reconnected at %(t).1fs to no session" % lost_session)
    if report["unverified_subscribers"]:
        lines.append("unverified subscribers (no final read): " + ", ".join(report["unverified_subscribers"]))
    for window in report["availability"]:
        lines.append("fault %-40s %6.1fs-%6.1fs ops=%-4d unserved=%-4d share=%s"
                     % (window["fault"][:40], window["start"], window["end"], window["ops"],
                        window["failed_or_timed_out"], window["share"]))
    q = report["quiet"]
    lines.append("quiet (no fault) ops=%d unserved=%d share=%s" % (q["ops"], q["failed_or_timed_out"], q["share"]))
    for key in ("lost", "unexpected", "duplicates_exactly_once", "order_violations"):
        for item in report[key][:5]:
            lines.append("%s: %s" % (key, item))
    lines.append("valid" if report["valid"] else "INVALID")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys

    sys.dont_write_bytecode = True
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
    import history

    result = check(history.load(sys.argv[1]))
    print(summary(result))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w", encoding="utf-8") as out:
            json.dump(result, out, indent=1)
    sys.exit(0 if result["valid"] else 1)
