"""checker.py over synthetic histories: one test per class the checker
reports (ctest verify_checker_test, fast, no root)."""

import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
import history  # noqa: E402


class Builder:
    """A history written as a test reads: each call appends one event at the
    next tick."""

    def __init__(self):
        self.events = []

    def add(self, process, type_, op, **fields):
        self.events.append(dict(t=float(len(self.events)), process=process, type=type_, op=op, **fields))
        return self

    def subscribe(self, subscriber, topic_filter="t/#", qos=2, protocol="mqtt5"):
        return self.add(subscriber, "ok", "subscribe", filter=topic_filter, qos=qos, protocol=protocol)

    def publish(self, publisher, message_id, seq, outcome="ok", topic="t/a", qos=2, protocol="mqtt5"):
        self.add(publisher, "invoke", "publish", msg=message_id, seq=seq, topic=topic, qos=qos, protocol=protocol)
        if outcome is not None:
            self.add(publisher, outcome, "publish", msg=message_id)
        return self

    def deliver(self, subscriber, message_id, topic="t/a"):
        return self.add(subscriber, "ok", "deliver", msg=message_id, topic=topic)

    def final_read(self, subscriber, ok=True):
        return self.add(subscriber, "ok" if ok else "fail", "final-read")

    def fault(self, name, phase):
        return self.add("nemesis", "info", "fault", fault=name, id=name, phase=phase)

    def check(self, **options):
        return checker.check(self.events, **options)


class TopicMatching(unittest.TestCase):
    def test_wildcards(self):
        self.assertTrue(checker.topic_matches("t/#", "t/a/b"))
        self.assertTrue(checker.topic_matches("t/#", "t"))
        self.assertTrue(checker.topic_matches("t/+/c", "t/b/c"))
        self.assertFalse(checker.topic_matches("t/+", "t/b/c"))
        self.assertFalse(checker.topic_matches("#", "$SYS/x"))
        self.assertTrue(checker.topic_matches("$share/g/t/+", "t/x"))


class Classes(unittest.TestCase):
    def test_a_clean_run_is_valid(self):
        b = Builder().subscribe("s").publish("p", "m1", 1).publish("p", "m2", 2)
        b.deliver("s", "m1").deliver("s", "m2").final_read("s")
        report = b.check()
        self.assertTrue(report["valid"])
        self.assertEqual(report["publishes"], {"invoked": 2, "ok": 2, "fail": 0, "unknown": 0})
        self.assertEqual(report["deliveries"], 2)

    def test_an_acknowledged_message_never_delivered_is_lost(self):
        b = Builder().subscribe("s").publish("p", "m1", 1).publish("p", "m2", 2).deliver("s", "m1").final_read("s")
        report = b.check()
        self.assertFalse(report["valid"])
        self.assertEqual([(x["msg"], x["subscriber"]) for x in report["lost"]], [("m2", "s")])

    def test_not_lost_when_not_promised(self):
        b = Builder().publish("p", "early", 1).subscribe("s", "t/#")  # published before the subscription
        b.publish("p", "other", 2, topic="u/a")  # filter does not match
        b.publish("p", "q0", 3, qos=0)  # QoS 0 promises nothing
        b.publish("p", "timeout", 4, outcome="info")  # never acknowledged
        b.final_read("s")
        report = b.check()
        self.assertEqual(report["lost"], [])
        self.assertTrue(report["valid"])

    def test_a_subscriber_without_final_read_is_unverified_not_judged(self):
        b = Builder().subscribe("s").subscribe("r").publish("p", "m1", 1).final_read("s", ok=False)
        report = b.check()
        self.assertEqual(report["lost"], [])
        self.assertEqual(report["unverified_subscribers"], ["r", "s"])

    def test_unknown_outcome_but_delivered_is_recovered(self):
        b = Builder().subscribe("s").publish("p", "m1", 1, outcome="info").deliver("s", "m1").final_read("s")
        b.publish("p", "m2", 2, outcome="fail").deliver("s", "m2")
        report = b.check()
        self.assertEqual(report["recovered"], 2)
        self.assertEqual(report["failed_but_delivered"], ["m2"])
        self.assertEqual(report["publishes"]["unknown"], 1)
        self.assertEqual(report["publishes"]["fail"], 1)
        self.assertTrue(report["valid"])

    def test_a_late_ok_after_a_timeout_counts_as_acknowledged(self):
        b = Builder().subscribe("s").publish("p", "m1", 1, outcome="info").add("p", "ok", "publish", msg="m1")
        b.final_read("s")
        report = b.check()
        self.assertEqual(report["publishes"]["ok"], 1)
        self.assertEqual(len(report["lost"]), 1)

    def test_delivered_but_never_sent_is_unexpected(self):
        b = Builder().subscribe("s").deliver("s", "ghost").final_read("s")
        b.publish("p", "m1", 1).deliver("s", "m1", topic="t/elsewhere")
        report = b.check()
        self.assertEqual(sorted(x["msg"] for x in report["unexpected"]), ["ghost", "m1"])
        self.assertFalse(report["valid"])

    def test_qos2_duplicate_is_a_violation_qos1_duplicate_is_counted(self):
        b = Builder().subscribe("s", qos=2).publish("p2", "a", 1, qos=2).publish("p1", "b", 1, qos=1)
        b.deliver("s", "a").deliver("s", "a").deliver("s", "b").deliver("s", "b").deliver("s", "b").final_read("s")
        report = b.check()
        self.assertEqual([(x["msg"], x["copies"]) for x in report["duplicates_exactly_once"]], [("a", 2)])
        self.assertEqual(report["duplicates_at_least_once"], 2)
        self.assertFalse(report["valid"])

    def test_qos1_subscription_downgrades_exactly_once(self):
        b = Builder().subscribe("s", qos=1).publish("p", "a", 1, qos=2).deliver("s", "a").deliver("s", "a")
        report = b.final_read("s").check()
        self.assertEqual(report["duplicates_exactly_once"], [])
        self.assertEqual(report["duplicates_at_least_once"], 1)
        self.assertTrue(report["valid"])

    def test_amqp_exactly_once_duplicate(self):
        b = Builder().subscribe("r", "t/a", qos=2, protocol="amqp").publish("snd", "x", 1, qos=2, protocol="amqp")
        report = b.deliver("r", "x").deliver("r", "x").final_read("r").check()
        self.assertEqual(len(report["duplicates_exactly_once"]), 1)

    def test_first_deliveries_out_of_publish_order_violate_4_6(self):
        b = Builder().subscribe("s").publish("p", "m1", 1).publish("p", "m2", 2).publish("p", "m3", 3)
        b.deliver("s", "m2").deliver("s", "m1").deliver("s", "m3").final_read("s")
        report = b.check()
        self.assertEqual([(x["seq"], x["after_seq"]) for x in report["order_violations"]], [(1, 2)])
        self.assertFalse(report["valid"])

    def test_redelivery_of_an_older_message_is_not_an_order_violation(self):
        b = Builder().subscribe("s", qos=1).publish("p", "m1", 1, qos=1).publish("p", "m2", 2, qos=1)
        b.deliver("s", "m1").deliver("s", "m2").deliver("s", "m1").deliver("s", "m2").final_read("s")
        report = b.check()
        self.assertEqual(report["order_violations"], [])
        self.assertEqual(report["duplicates_at_least_once"], 2)

    def test_order_is_per_publisher_topic_and_qos(self):
        b = Builder().subscribe("s")
        b.publish("p", "a2", 2, topic="t/a").publish("p", "b1", 1, topic="t/b").publish("q", "q1", 1)
        b.deliver("s", "a2").deliver("s", "b1", topic="t/b").deliver("s", "q1").final_read("s")
        self.assertEqual(b.check()["order_violations"], [])

    def test_availability_per_fault_window(self):
        b = Builder().subscribe("s").publish("p", "before", 1)  # quiet, served
        b.fault("cut n1", "start")
        b.publish("p", "in1", 2, outcome="info").publish("p", "in2", 3)  # one timed out, one ok
        b.fault("cut n1", "end")
        b.publish("p", "after", 4, outcome=None)  # quiet, never answered
        b.deliver("s", "before").deliver("s", "in1").deliver("s", "in2").final_read("s")
        report = b.check()
        window = report["availability"][0]
        self.assertEqual((window["fault"], window["ops"], window["failed_or_timed_out"], window["share"]),
                         ("cut n1", 2, 1, 0.5))
        self.assertEqual((report["quiet"]["ops"], report["quiet"]["failed_or_timed_out"]), (2, 1))

    def test_a_slow_ack_is_unserved(self):
        b = Builder().subscribe("s").add("p", "invoke", "publish", msg="m", seq=1, topic="t/a", qos=1)
        b.add("x", "info", "noop").add("x", "info", "noop").add("p", "ok", "publish", msg="m")
        b.deliver("s", "m").final_read("s")
        self.assertEqual(b.check(ack_timeout=1.0)["quiet"]["failed_or_timed_out"], 1)
        self.assertEqual(b.check(ack_timeout=5.0)["quiet"]["failed_or_timed_out"], 0)

    def test_a_subscriber_silent_while_its_messages_are_acknowledged_stalls(self):
        b = Builder().subscribe("s").publish("p", "m1", 1).deliver("s", "m1")
        for i in range(2, 16):  # acknowledged from tick 5 on, never delivered
            b.publish("p", "m%d" % i, i)
        b.final_read("s")
        stalls = b.check(stall_s=10.0)["stalls"]
        self.assertEqual([(x["subscriber"], x["from"]) for x in stalls], [("s", 3.0)])
        self.assertEqual(b.check(stall_s=100.0)["stalls"], [])

    def test_quiet_without_acknowledgements_is_no_stall(self):
        b = Builder().subscribe("s").publish("p", "m1", 1).deliver("s", "m1")
        for _ in range(20):
            b.add("x", "info", "noop")
        self.assertEqual(b.final_read("s").check(stall_s=5.0)["stalls"], [])

    def test_a_reconnect_to_no_session_is_reported(self):
        b = Builder().subscribe("s").add("s", "info", "session", present=False).final_read("s")
        self.assertEqual([x["subscriber"] for x in b.check()["sessions_lost"]], ["s"])


class Payloads(unittest.TestCase):
    def test_round_trip(self):
        self.assertEqual(history.parse_payload(history.payload_for("m-1", "p", 7)), ("m-1", "p", 7))
        self.assertEqual(history.parse_payload(b"\xffnot json"), (None, None, None))


if __name__ == "__main__":
    unittest.main()
