#!/usr/bin/python3
"""Link recovery (AMQP 1.0 §2.6.13) against a real estuaryd, from a client
that sends what no Proton client can: an attach carrying its `unsettled`
map. Proton-C (and so Proton C++ and Python) always sends that field null
and drops the one it receives, so this client writes the frames itself
(§2.3 framing, §2.7 performatives); python3-qpid-proton's Data type is used
only to encode and decode AMQP values.

Checks, on a durable subscription (§3.5.3 durable, §3.5.6 expiry-policy
never) detached with five deliveries unsettled:
  - the reattach's unsettled map says m1 accepted, m2 rejected, m3 released,
    m5 null (held, no outcome yet), and does not mention m4;
  - the broker's attach answers with its own unsettled map: m4 and m5
    (Proton-C writes that field null; the broker rewrites the frame);
  - m1 and m2 are not sent again (their outcome is terminal at the client);
  - m3, m4, m5 are sent again in that order with delivery-count >= 1
    (§3.2.1): m3 under a new tag (the client still holds the old one,
    released), m4 under its tag, m5 under its tag with resume set (§2.7.5;
    Proton-C always sends false, the broker rewrites the frame);
  - once those are accepted, a reattach with an empty map gets nothing and
    the broker's attach has an empty map.

Starts its own estuaryd on free ports and stops it with SIGTERM, expecting
exit status 0. Waits only on socket reads with deadlines, never sleeps.

usage: /usr/bin/python3 link_recovery.py path/to/estuaryd
"""

import os
import socket
import struct
import sys
import time

from proton import Data, Described, symbol, ubyte, uint, ulong

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from estuary_process import DEADLINE, SINGLE_NODE_FLAGS, Estuaryd  # noqa: E402

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SOURCE, TARGET = 0x28, 0x29
ACCEPTED, REJECTED, RELEASED = 0x24, 0x25, 0x26
HEADER, DATA = 0x70, 0x75


def fail(message):
    raise SystemExit("FAIL: " + message)


def encode(value):
    data = Data()
    data.put_object(value)
    return data.encode()


def performative(code, fields):
    return Described(ulong(code), fields)


class Frame:
    def __init__(self, code, fields, payload):
        self.code, self.fields, self.payload = code, fields, payload

    def field(self, index):
        return self.fields[index] if index < len(self.fields) else None


class Client:
    """One AMQP connection without SASL (the node lets anonymous clients in
    by default), one session on channel 0."""

    def __init__(self, broker, container_id):
        self.sock = socket.create_connection((broker.host, broker.amqp_port), timeout=DEADLINE)
        self.buffer = b""
        self.pending = []  # frames read while waiting for another
        self.sock.sendall(b"AMQP\x00\x01\x00\x00")
        if self.read_exact(8) != b"AMQP\x00\x01\x00\x00":
            fail("no AMQP protocol header back")
        self.send(OPEN, [container_id])
        self.expect(OPEN)
        self.send(BEGIN, [None, uint(0), uint(2048), uint(2048)])
        begin = self.expect(BEGIN)
        self.next_incoming_id = begin.field(1)
        self.next_outgoing_id = 0

    def read_exact(self, n):
        deadline = time.monotonic() + DEADLINE
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                fail("connection closed by the broker")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, code, fields, payload=b"", channel=0):
        body = encode(performative(code, fields)) + payload
        self.sock.sendall(struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body)

    def read_frame(self, timeout=DEADLINE):
        """The next non-empty frame, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            while len(self.buffer) < 8:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.sock.settimeout(left)
                try:
                    chunk = self.sock.recv(65536)
                except socket.timeout:
                    return None
                if not chunk:
                    fail("connection closed by the broker")
                self.buffer += chunk
            size, doff = struct.unpack(">IB", self.buffer[:5])
            frame = self.read_exact(size)
            body = frame[doff * 4:]
            if not body:
                continue  # heartbeat
            data = Data()
            consumed = data.decode(body)
            described = data.get_object()
            return Frame(int(described.descriptor), list(described.value), body[consumed:])

    def expect(self, code, timeout=DEADLINE):
        while True:
            frame = self.read_frame(timeout)
            if frame is None:
                fail("no performative 0x%x in time" % code)
            if frame.code == code:
                return frame
            if frame.code in (CLOSE, END) or (frame.code == DETACH and code != DETACH):
                fail("unexpected 0x%x %r" % (frame.code, frame.fields))
            self.pending.append(frame)

    def attach_receiver(self, name, handle, address, unsettled=None):
        source = Described(ulong(SOURCE), [address, uint(2), symbol("never"), uint(0), False])
        self.send(ATTACH, [name, uint(handle), True, None, None, source, Described(ulong(TARGET), []),
                           unsettled])
        return self.expect(ATTACH)

    def attach_sender(self, name, handle, address):
        self.send(ATTACH, [name, uint(handle), False, ubyte(0), None, Described(ulong(SOURCE), []),
                           Described(ulong(TARGET), [address]), None, None, uint(0)])
        self.expect(ATTACH)
        while True:  # credit for it
            flow = self.expect(FLOW)
            if flow.field(4) == handle and (flow.field(6) or 0) > 0:
                return

    def flow_receiver(self, handle, delivery_count, credit):
        self.send(FLOW, [uint(self.next_incoming_id), uint(2048), uint(self.next_outgoing_id), uint(2048),
                         uint(handle), uint(delivery_count), uint(credit), None, False])

    def send_message(self, handle, tag, body):
        message = encode(Described(ulong(DATA), body))
        self.send(TRANSFER, [uint(handle), uint(self.next_outgoing_id), tag, uint(0), False, False], message)
        self.next_outgoing_id += 1

    def receive(self, count, timeout=DEADLINE):
        """Up to `count` transfers: (delivery-id, tag, body, delivery-count, resume)."""
        out = []
        while len(out) < count:
            frame = self.pending.pop(0) if self.pending else self.read_frame(timeout)
            if frame is None:
                break
            if frame.code != TRANSFER:
                continue
            self.next_incoming_id = frame.field(1) + 1
            out.append((frame.field(1), bytes(frame.field(2)), *decode_message(frame.payload),
                        bool(frame.field(8))))
        return out

    def accept(self, delivery_id):
        self.send(DISPOSITION, [True, uint(delivery_id), uint(delivery_id), True,
                                Described(ulong(ACCEPTED), [])])

    def detach(self, handle):
        self.send(DETACH, [uint(handle), False])
        self.expect(DETACH)

    def close(self):
        self.send(CLOSE, [])
        self.expect(CLOSE)
        self.sock.close()


def decode_message(payload):
    body, delivery_count = None, 0
    while payload:
        data = Data()
        consumed = data.decode(payload)
        section = data.get_object()
        payload = payload[consumed:]
        code = int(section.descriptor)
        if code == HEADER and len(section.value) > 4 and section.value[4] is not None:
            delivery_count = int(section.value[4])
        elif code == DATA:
            body = bytes(section.value)
    return body, delivery_count


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    broker = Estuaryd(sys.argv[1], *SINGLE_NODE_FLAGS)
    ok = False
    try:
        container = "link-recovery-%d" % broker.amqp_port
        first = Client(broker, container)
        first.attach_receiver("sub", 0, "recovery/t")
        first.attach_sender("pub", 1, "recovery/t")
        for i in range(1, 6):
            first.send_message(1, b"p%d" % i, b"m%d" % i)
        accepted = 0
        while accepted < 5:  # the broker accepts each once it is routed
            disposition = first.expect(DISPOSITION)
            last = disposition.field(2) if disposition.field(2) is not None else disposition.field(1)
            accepted += last - disposition.field(1) + 1
        first.flow_receiver(0, 0, 5)
        got = first.receive(5)
        if [body for _, _, body, _, _ in got] != [b"m1", b"m2", b"m3", b"m4", b"m5"]:
            fail("first attach got %r" % got)
        if any(resume for *_, resume in got):
            fail("a first transfer had resume set: %r" % got)
        tags = {body: tag for _, tag, body, _, _ in got}
        first.detach(0)  # durable: kept, with all five unsettled
        first.close()

        second = Client(broker, container)
        attach = second.attach_receiver("sub", 0, "recovery/t", {
            tags[b"m1"]: Described(ulong(ACCEPTED), []),
            tags[b"m2"]: Described(ulong(REJECTED), [None]),
            tags[b"m3"]: Described(ulong(RELEASED), []),
            tags[b"m5"]: None,
        })
        ours = attach.field(7)
        print("broker's attach unsettled map:", ours)
        if not isinstance(ours, dict) or sorted(bytes(tag) for tag in ours) != sorted([tags[b"m4"], tags[b"m5"]]):
            fail("the broker's attach should list m4 and m5 as unsettled, got %r" % (ours,))
        second.flow_receiver(0, 0, 10)
        again = second.receive(10, timeout=2)
        print("sent again after reattach:", [(body, tag, count, resume) for _, tag, body, count, resume in again])
        bodies = [body for _, _, body, _, _ in again]
        if bodies != [b"m3", b"m4", b"m5"]:
            fail("expected m3, m4, m5 again (m1 accepted, m2 rejected at the client), got %r" % bodies)
        for delivery_id, tag, body, count, resume in again:
            if (tag == tags[body]) != (body != b"m3"):
                fail("%s came back with tag %r, was %r" % (body, tag, tags[body]))
            if tag in [tags[b] for b in tags if b != body]:
                fail("%s came back under another delivery's tag %r" % (body, tag))
            if resume != (body == b"m5"):
                fail("%s came back with resume %s" % (body, resume))
            if count < 1:
                fail("%s came back with delivery-count %d" % (body, count))
            second.accept(delivery_id)
        second.detach(0)

        attach = second.attach_receiver("sub", 0, "recovery/t", {})
        if attach.field(7) != {}:
            fail("nothing is unsettled now, yet the broker's attach lists %r" % (attach.field(7),))
        second.flow_receiver(0, 0, 10)
        leftover = second.receive(10, timeout=1)
        if leftover:
            fail("accepted deliveries came again: %r" % leftover)
        second.close()
        ok = True
    finally:
        status = broker.stop()
    if status != 0:
        fail("estuaryd exited with %d" % status)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
