// QueueMachine (queue_machine.h): the codec, append/read/ack, offsets that
// are never handed out twice, bounds, expiry by entry time, assignment
// epochs, malformed input, snapshots; and on a simulated 3-replica
// partition, that a new leader serves every acknowledged append.
#include "cluster-core/partition/queue_machine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cluster-core/meta/raft_codec.h"
#include "cluster-core/partition/partition_sim_cluster.h"
#include "cluster-core/partition/partition_state.h"
#include "cluster-core/store/record_codec.h"
#include "model/hlc.h"

namespace estuary::partition {
namespace {

constexpr uint64_t kT0 = 1'800'000'000'000;  // wall ms

Message Publish(std::string payload, uint32_t sequence = 1, std::optional<int64_t> expiry_at_ms = std::nullopt) {
  Message message;
  message.topic = "orders/eu";
  message.payload = MakePayload(std::move(payload));
  message.qos = QoS::kAtLeastOnce;
  message.id = MessageId{2, HybridLogicalClock::Pack(kT0, 0), sequence};
  message.properties.expiry_at_ms = expiry_at_ms;
  return message;
}

raft::Entry EntryOf(std::string_view bytes, uint64_t ms) {
  raft::Entry entry;
  entry.index = 1;
  entry.term = 1;
  entry.timestamp = HybridLogicalClock::Pack(ms, 0);
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

// The Append's offset; fails the test on "full" or a malformed answer.
uint64_t Append(PartitionMachine& machine, std::string_view queue, const Message& message, uint64_t ms = kT0) {
  auto result = DecodeQueueAppendResult(machine.Apply(EntryOf(EncodeQueueAppend(queue, message), ms)));
  EXPECT_TRUE(result.has_value());
  EXPECT_FALSE(result.value_or(QueueAppendResult{true, 0}).full);
  return result ? result->offset : 0;
}

bool AppendIsFull(PartitionMachine& machine, std::string_view queue, const Message& message, uint64_t ms = kT0) {
  auto result = DecodeQueueAppendResult(machine.Apply(EntryOf(EncodeQueueAppend(queue, message), ms)));
  return result && result->full;
}

uint32_t Ack(PartitionMachine& machine, std::string_view queue, std::vector<uint64_t> offsets, uint64_t epoch = 0) {
  auto removed = DecodeQueueAckResult(machine.Apply(EntryOf(EncodeQueueAck(queue, epoch, offsets), kT0)));
  EXPECT_TRUE(removed.has_value());
  return removed.value_or(0);
}

std::string Assign(PartitionMachine& machine, std::string_view queue, NodeId node, uint64_t epoch) {
  return machine.Apply(EntryOf(EncodeQueueAssign(queue, node, epoch), kT0));
}

// (offset, payload) of a Read, and the queue's next offset.
struct Read {
  uint64_t next = 0;
  std::vector<std::pair<uint64_t, std::string>> messages;
};
Read ReadResultOf(std::string_view bytes) {
  auto decoded = DecodeQueueReadResult(bytes);
  EXPECT_TRUE(decoded.has_value());
  Read read;
  if (!decoded) return read;
  read.next = decoded->next_offset;
  for (const QueuedMessage& queued : decoded->messages) {
    auto message = core::store::DecodeMessage(queued.record);
    EXPECT_TRUE(message.has_value());
    if (message) read.messages.emplace_back(queued.offset, *(*message)->payload);
  }
  return read;
}
Read ReadQueue(const PartitionMachine& machine, std::string_view queue, uint64_t from = 0, uint32_t max_count = 1000,
               uint32_t max_bytes = 1 << 20) {
  return ReadResultOf(machine.Query(EncodeQueueRead(queue, from, max_count, max_bytes)));
}
using Offsets = std::vector<std::pair<uint64_t, std::string>>;

TEST(QueueMachineTest, CommandsAndResultsRoundTrip) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  Message message = Publish("m1");
  message.properties.content_type = "text/plain";
  message.properties.user_properties.push_back({"k", "v"});
  const uint64_t offset = Append(machine, "g/0", message);
  EXPECT_EQ(Assign(machine, "g/0", 3, 1), "1");
  auto read = DecodeQueueReadResult(machine.Query(EncodeQueueRead("g/0", 0, 10, 1000)));
  ASSERT_TRUE(read && read->messages.size() == 1);
  EXPECT_EQ(read->messages[0].offset, offset);
  EXPECT_EQ(read->messages[0].record, core::store::EncodeMessage(message));
  EXPECT_EQ(read->next_offset, offset + 1);
  auto stats = DecodeQueueStats(machine.Query(EncodeQueueStats()));
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(*stats, machine.Stats());
  const uint64_t bytes = core::store::EncodeMessage(message).size();
  EXPECT_EQ(*stats, (std::vector<QueueStats>{{"g/0", 1, bytes, offset, offset + 1, 3, 1}}));
  EXPECT_EQ(DecodeQueueAppendResult("full"), (QueueAppendResult{true, 0}));
  EXPECT_EQ(DecodeQueueAppendResult(std::string("\2\1\0\0\0\0\0\0", 8)), (QueueAppendResult{false, 258}));
  EXPECT_EQ(DecodeQueueAckResult(std::string("\5\0\0\0", 4)), 5u);
  EXPECT_EQ(QueueKey("g/0"), "queue/g/0");
}

// Reads go from an offset, in order, within count and bytes (but at least
// one message); acks remove, retried or unknown acks change nothing.
TEST(QueueMachineTest, AppendReadAndAck) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 5; ++i) offsets.push_back(Append(machine, "g/0", Publish("m" + std::to_string(i))));
  const uint64_t other = Append(machine, "g/1", Publish("x"));
  for (size_t i = 1; i < offsets.size(); ++i) EXPECT_GT(offsets[i], offsets[i - 1]);
  EXPECT_GT(other, offsets.back()) << "one counter per partition";

  Read all = ReadQueue(machine, "g/0");
  ASSERT_EQ(all.messages.size(), 5u);
  EXPECT_EQ(all.messages[2], std::make_pair(offsets[2], std::string("m2")));
  EXPECT_EQ(all.next, offsets.back() + 1);
  EXPECT_EQ(ReadQueue(machine, "g/0", offsets[3]).messages, (Offsets{{offsets[3], "m3"}, {offsets[4], "m4"}}));
  EXPECT_EQ(ReadQueue(machine, "g/0", 0, 2).messages.size(), 2u);
  EXPECT_EQ(ReadQueue(machine, "g/0", 0, 10, 1).messages, (Offsets{{offsets[0], "m0"}})) << "at least one";
  const uint32_t one = static_cast<uint32_t>(core::store::EncodeMessage(Publish("m0")).size());
  EXPECT_EQ(ReadQueue(machine, "g/0", 0, 10, 2 * one + 1).messages.size(), 2u);
  EXPECT_TRUE(ReadQueue(machine, "g/0", 0, 0).messages.empty());
  EXPECT_EQ(ReadQueue(machine, "g/0", offsets.back() + 1).messages.size(), 0u);
  EXPECT_EQ(ReadQueue(machine, "nope").next, 0u);

  EXPECT_EQ(Ack(machine, "g/0", {offsets[0], offsets[2]}), 2u);
  EXPECT_EQ(Ack(machine, "g/0", {offsets[0], offsets[2], 999'999}), 0u) << "a retried ack";
  EXPECT_EQ(Ack(machine, "g/0", {other}), 0u) << "another queue's offset";
  EXPECT_EQ(Ack(machine, "nope", {offsets[1]}), 0u);
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{offsets[1], "m1"}, {offsets[3], "m3"}, {offsets[4], "m4"}}));
  const QueueStats stats = machine.Stats().front();
  EXPECT_EQ(stats.depth, 3u);
  EXPECT_EQ(stats.bytes, 3u * one);
  EXPECT_EQ(stats.first_offset, offsets[1]);
  EXPECT_EQ(machine.malformed(), 0u);
}

// An offset is never handed out twice: not after acks empty the queue, not
// after a Drop and a queue of the same name, not on a restored replica
// (a retried ack must never remove a newer message).
TEST(QueueMachineTest, OffsetsAreNeverReused) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  const uint64_t first = Append(machine, "g/0", Publish("a"));
  const uint64_t second = Append(machine, "g/0", Publish("b"));
  EXPECT_EQ(Ack(machine, "g/0", {first, second}), 2u);
  const uint64_t third = Append(machine, "g/0", Publish("c"));
  EXPECT_GT(third, second);
  EXPECT_EQ(machine.Stats().front().first_offset, third);
  EXPECT_EQ(machine.Apply(EntryOf(EncodeQueueDrop("g/0"), kT0)), "1");
  EXPECT_EQ(machine.Apply(EntryOf(EncodeQueueDrop("g/0"), kT0)), "0");
  EXPECT_TRUE(machine.Stats().empty());
  const uint64_t fourth = Append(machine, "g/0", Publish("d"));
  EXPECT_GT(fourth, third);
  EXPECT_EQ(Ack(machine, "g/0", {first, second, third}), 0u) << "old acks after the drop";
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{fourth, "d"}}));

  EXPECT_EQ(Ack(machine, "g/0", {fourth}), 1u);
  QueueMachine copy([] { return static_cast<int64_t>(kT0); });
  ASSERT_TRUE(copy.Restore(machine.Snapshot()));
  EXPECT_EQ(copy.Snapshot(), machine.Snapshot());
  EXPECT_EQ(copy.Stats(), machine.Stats());
  EXPECT_EQ(ReadQueue(copy, "g/0").next, fourth + 1) << "an emptied queue keeps its next offset";
  EXPECT_EQ(Append(copy, "g/0", Publish("e")), Append(machine, "g/0", Publish("e")));
  EXPECT_GT(Append(copy, "g/9", Publish("f")), fourth + 1);
}

TEST(QueueMachineTest, AQueueAtItsBoundAnswersFull) {
  const uint64_t one = core::store::EncodeMessage(Publish("m")).size();
  QueueMachine by_count([] { return static_cast<int64_t>(kT0); }, QueueLimits{3, 1 << 20});
  for (int i = 0; i < 3; ++i) Append(by_count, "g/0", Publish("m"));
  EXPECT_TRUE(AppendIsFull(by_count, "g/0", Publish("m")));
  Append(by_count, "g/1", Publish("m"));  // the bound is per queue
  const uint64_t next = by_count.Stats().front().next_offset;
  EXPECT_EQ(Ack(by_count, "g/0", {by_count.Stats().front().first_offset}), 1u);
  EXPECT_GE(Append(by_count, "g/0", Publish("m")), next) << "room again after an ack";

  QueueMachine by_bytes([] { return static_cast<int64_t>(kT0); }, QueueLimits{100, 2 * one});
  Append(by_bytes, "g/0", Publish("m"));
  Append(by_bytes, "g/0", Publish("m"));
  EXPECT_TRUE(AppendIsFull(by_bytes, "g/0", Publish("m")));
  EXPECT_TRUE(AppendIsFull(by_bytes, "big", Publish(std::string(3 * one, 'x'))))
      << "a record larger than the bound never fits";
  ASSERT_EQ(by_bytes.Stats().size(), 1u) << "a refused first append makes no queue";
  EXPECT_EQ(by_bytes.Stats().front().depth, 2u);
}

// Expiry follows entry time (every replica drops the same messages at the
// same entry); a read never serves an expired message, swept or not.
TEST(QueueMachineTest, ExpiredMessagesAreSweptByEntryTimeAndNeverServed) {
  int64_t wall = static_cast<int64_t>(kT0);
  QueueMachine machine([&wall] { return wall; });
  const uint64_t expiring = Append(machine, "g/0", Publish("soon", 1, static_cast<int64_t>(kT0 + 500)));
  const uint64_t lasting = Append(machine, "g/0", Publish("later", 2, static_cast<int64_t>(kT0 + 3'600'000)));
  const uint64_t forever = Append(machine, "g/0", Publish("forever", 3));
  EXPECT_EQ(ReadQueue(machine, "g/0").messages.size(), 3u);
  wall = static_cast<int64_t>(kT0 + 600);
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{lasting, "later"}, {forever, "forever"}}));
  EXPECT_EQ(machine.Stats().front().depth, 3u) << "not swept before the interval";
  // An entry a sweep interval later drops it on every replica.
  const uint64_t sweep_ms = kT0 + QueueMachine::kSweepEveryMs;
  machine.Apply(EntryOf(EncodeQueueAssign("g/0", 1, 1), sweep_ms));
  EXPECT_EQ(machine.Stats().front().depth, 2u);
  EXPECT_EQ(machine.expired(), 1u);
  EXPECT_EQ(Ack(machine, "g/0", {expiring}), 0u);
  // Already expired on arrival: an offset (the publisher is answered), no message.
  const uint64_t dead = Append(machine, "g/0", Publish("dead", 4, static_cast<int64_t>(kT0)), sweep_ms);
  EXPECT_GT(dead, forever);
  EXPECT_EQ(machine.Stats().front().depth, 2u);
  EXPECT_EQ(machine.Stats().front().next_offset, dead + 1);

  // A full queue whose messages expired takes new ones.
  QueueMachine full([] { return static_cast<int64_t>(kT0); }, QueueLimits{2, 1 << 20});
  Append(full, "g/0", Publish("a", 1, static_cast<int64_t>(kT0 + 10)));
  Append(full, "g/0", Publish("b", 2));
  EXPECT_TRUE(AppendIsFull(full, "g/0", Publish("c"), kT0 + 5));
  Append(full, "g/0", Publish("c"), kT0 + 20);
  EXPECT_EQ(full.Stats().front().depth, 2u);
}

// Assignments only move forward; acks are applied whatever their epoch
// (the old consumer's ack still says its client got the message), and
// counted when stale.
TEST(QueueMachineTest, AssignmentEpochsOnlyGrowAndStaleAcksStillCount) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  EXPECT_EQ(Assign(machine, "g/0", 2, 0), "0");
  EXPECT_TRUE(machine.Stats().empty()) << "a refused assignment makes no queue";
  EXPECT_EQ(Assign(machine, "g/0", 2, 1), "1");
  EXPECT_EQ(Assign(machine, "g/0", 3, 1), "0");
  EXPECT_EQ(Assign(machine, "g/0", 3, 2), "1");
  EXPECT_EQ(Assign(machine, "g/0", 2, 1), "0") << "a late, older assignment";
  EXPECT_EQ(machine.Stats().front().consumer, 3);
  EXPECT_EQ(machine.Stats().front().epoch, 2u);
  EXPECT_EQ(machine.Stats().front().next_offset, 0u) << "assigned before any message";
  const uint64_t a = Append(machine, "g/0", Publish("a"));
  const uint64_t b = Append(machine, "g/0", Publish("b"));
  EXPECT_EQ(Ack(machine, "g/0", {a}, /*epoch=*/1), 1u);
  EXPECT_EQ(machine.stale_acks(), 1u);
  EXPECT_EQ(Ack(machine, "g/0", {b}, /*epoch=*/2), 1u);
  EXPECT_EQ(machine.stale_acks(), 1u);
  EXPECT_EQ(Assign(machine, "g/0", 0, 3), "1") << "nobody";
  EXPECT_EQ(machine.Stats().front().consumer, 0);
}

TEST(QueueMachineTest, MalformedInputIsCountedNotApplied) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  const uint64_t kept = Append(machine, "g/0", Publish("kept"));
  const std::vector<uint8_t> before = machine.Snapshot();
  const std::string append = EncodeQueueAppend("g/0", Publish("x"));
  base::LittleEndianWriter garbage_record;
  garbage_record.U8(0x40);
  garbage_record.Bytes("g/0");
  garbage_record.Bytes("not a record");
  base::LittleEndianWriter big_node;
  big_node.U8(0x42);
  big_node.Bytes("g/0");
  big_node.U32(0x10000);
  big_node.U64(9);
  const std::string bad[] = {
      "",
      "\x4f",
      append.substr(0, append.size() - 1),
      append + "z",
      garbage_record.Take(),
      EncodeQueueAck("g/0", 0, {kept}).substr(0, 20),
      std::string("\x41\0\0\0\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff", 17),  // a count beyond the bytes
      big_node.Take(),
      EncodeQueueDrop("g/0") + "z",
  };
  for (const std::string& bytes : bad) EXPECT_EQ(machine.Apply(EntryOf(bytes, kT0)), "0");
  EXPECT_EQ(machine.malformed(), std::size(bad));
  EXPECT_EQ(machine.Snapshot(), before);
  // Queries: nothing, which the decoders refuse.
  EXPECT_TRUE(machine.Query("").empty());
  EXPECT_TRUE(machine.Query("\x4f").empty());
  EXPECT_TRUE(machine.Query(EncodeQueueStats() + "z").empty());
  EXPECT_TRUE(machine.Query(EncodeQueueRead("g/0", 0, 1, 1).substr(0, 9)).empty());
  EXPECT_FALSE(DecodeQueueReadResult("").has_value());
  EXPECT_FALSE(DecodeQueueStats("").has_value());
  EXPECT_FALSE(DecodeQueueAppendResult("0").has_value());
  EXPECT_FALSE(DecodeQueueAckResult("0").has_value());
  EXPECT_FALSE(DecodeQueueReadResult(std::string(8, '\0') + std::string("\0\0\0\x05", 4)).has_value());
  EXPECT_FALSE(DecodeQueueStats(std::string("\xff\xff\xff\xff", 4)).has_value());
  // Snapshots that are not what this machine writes.
  std::vector<uint8_t> trailing = before;
  trailing.push_back(0);
  EXPECT_FALSE(machine.Restore(trailing));
  std::vector<uint8_t> version = before;
  version[0] = 9;
  EXPECT_FALSE(machine.Restore(version));
  base::LittleEndianWriter behind;  // an offset at the queue's next offset
  behind.U8(1);
  behind.U64(10);
  behind.U64(0);
  behind.U32(1);
  behind.Bytes("g/0");
  behind.U64(5);
  behind.U32(0);
  behind.U64(0);
  behind.U32(1);
  behind.U64(5);
  behind.Bytes(core::store::EncodeMessage(Publish("x")));
  const std::string behind_bytes = behind.Take();
  EXPECT_FALSE(machine.Restore({behind_bytes.begin(), behind_bytes.end()}));
  EXPECT_EQ(machine.Snapshot(), before) << "a refused snapshot leaves the state";
}

// The queues are one more section of every partition's snapshot; an older
// snapshot (without it) restores no queues.
TEST(QueueMachineTest, PartitionStateDispatchesAndSnapshotsQueues) {
  PartitionState state([] { return static_cast<int64_t>(kT0); });
  const uint64_t offset = Append(state, "g/0", Publish("p"));
  EXPECT_EQ(Assign(state, "g/0", 2, 4), "1");
  EXPECT_EQ(ReadQueue(state, "g/0").messages, (Offsets{{offset, "p"}}));
  EXPECT_EQ(state.queues().Stats().size(), 1u);
  EXPECT_EQ(DecodeQueueStats(state.Query(EncodeQueueStats())), state.queues().Stats());
  const std::string claim = EncodeRegistryCommand(ClaimClient{"dev-1", ClientOwner{2, 9, 1}});
  state.Apply(EntryOf(claim, kT0));

  PartitionState copy([] { return static_cast<int64_t>(kT0); });
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_EQ(copy.Snapshot(), state.Snapshot());
  EXPECT_EQ(copy.queues().Stats(), state.queues().Stats());

  // A partition that never saw a queue command writes the snapshot of
  // before the queues' section (which older binaries restore); restoring
  // one drops every queue.
  PartitionState older([] { return static_cast<int64_t>(kT0); });
  older.Apply(EntryOf(claim, kT0));
  ASSERT_TRUE(copy.Restore(older.Snapshot()));
  EXPECT_TRUE(copy.queues().Stats().empty());
  EXPECT_TRUE(copy.queues().pristine());
  EXPECT_EQ(copy.registry().owners().count("dev-1"), 1u);
  EXPECT_EQ(copy.Snapshot(), older.Snapshot());
  std::vector<uint8_t> three = older.Snapshot();  // and from before sessions
  three.resize(three.size() - 4 - SessionMachine(older.registry()).Snapshot().size());
  ASSERT_TRUE(copy.Restore(three));
  // Once used, the section stays, even with no queue left: the offset
  // counter must survive.
  EXPECT_EQ(state.Apply(EntryOf(EncodeQueueDrop("g/0"), kT0)), "1");
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  EXPECT_TRUE(copy.queues().Stats().empty());
  EXPECT_EQ(copy.queues().next_offset(), offset + 1);
  EXPECT_EQ(copy.Snapshot(), state.Snapshot());
  ASSERT_TRUE(copy.Restore(state.Snapshot()));
  ASSERT_TRUE(copy.Restore({}));
  EXPECT_TRUE(copy.queues().Stats().empty());
}

// The apply hooks tell the leader's pusher what applied (cluster_queues.cc):
// a stored append with its offset (not one expired on arrival, not a full
// queue's refusal, not a malformed command) and every Ack's offsets.
TEST(QueueMachineTest, ApplyHooksReportStoredAppendsAndAcks) {
  PartitionState state([] { return static_cast<int64_t>(kT0); }, QueueLimits{2, 1 << 20});
  std::vector<std::pair<std::string, uint64_t>> appended;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> acked;
  state.set_queue_hooks(QueueApplyHooks{
      [&](std::string_view queue, uint64_t offset) { appended.emplace_back(std::string(queue), offset); },
      [&](std::string_view queue, const std::vector<uint64_t>& offsets) {
        acked.emplace_back(std::string(queue), offsets);
      },
      nullptr});
  const uint64_t first = Append(state, "g/0", Publish("a"));
  const uint64_t second = Append(state, "g/1", Publish("b"));
  EXPECT_FALSE(AppendIsFull(state, "g/0", Publish("c", 2, static_cast<int64_t>(kT0) + 60'000)));
  EXPECT_TRUE(AppendIsFull(state, "g/0", Publish("d")));  // two held: full, not reported
  Append(state, "g/1", Publish("gone", 3, static_cast<int64_t>(kT0) - 1));  // expired on arrival: not reported
  state.Apply(EntryOf(std::string("\x40\x01"), kT0));  // malformed: not reported
  EXPECT_EQ(appended, (std::vector<std::pair<std::string, uint64_t>>{{"g/0", first}, {"g/1", second}, {"g/0", second + 1}}));

  EXPECT_EQ(Ack(state, "g/0", {first, 999}), 1u);
  EXPECT_EQ(Ack(state, "g/9", {5}), 0u);  // an unknown queue's Ack is not reported: no queue, no pusher
  EXPECT_EQ(acked, (std::vector<std::pair<std::string, std::vector<uint64_t>>>{{"g/0", {first, 999}}}));
}

// Hands (exactly-once across a consumer's death): a handed message is not
// read until acknowledged, handed back or settled; only its consumer (node
// and incarnation) may hand it on or back.
TEST(QueueMachineTest, AHandedMessageIsReadByNobodyUntilHandedBack) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  std::vector<std::pair<std::string, std::vector<uint64_t>>> released;
  machine.set_hooks(QueueApplyHooks{nullptr, nullptr, [&](std::string_view queue, const std::vector<uint64_t>& offsets) {
                                      released.emplace_back(std::string(queue), offsets);
                                    }});
  const uint64_t a = Append(machine, "g/0", Publish("a", 1));
  const uint64_t b = Append(machine, "g/0", Publish("b", 2));
  const QueueHand to_s{"s", 2, 7, 1};
  auto apply = [&](const std::string& command) { return machine.Apply(EntryOf(command, kT0)); };
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, to_s)), "1");
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{b, "b"}})) << "handed: not read";
  EXPECT_EQ(machine.handed(), 1u);
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, to_s)), "1") << "the same command applied again";
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"t", 3, 1, 1})), "0") << "another consumer";
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"s", 2, 8, 1})), "0") << "another process";
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"s", 2, 7, 2})), "0") << "another attempt of the same one";
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"t", 2, 7, 1})), "0") << "another member";
  EXPECT_EQ(apply(EncodeQueueUnhand("g/0", a, QueueHand{"s", 2, 7, 2})), "0") << "not handed so";
  EXPECT_TRUE(released.empty());
  EXPECT_EQ(apply(EncodeQueueUnhand("g/0", a, to_s)), "1");
  EXPECT_EQ(apply(EncodeQueueUnhand("g/0", a, to_s)), "0") << "handed back already";
  EXPECT_EQ(released, (std::vector<std::pair<std::string, std::vector<uint64_t>>>{{"g/0", {a}}}));
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{a, "a"}, {b, "b"}}));
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"t", 2, 7, 3})), "1") << "free again: anyone may hand it";
  EXPECT_EQ(apply(EncodeQueueUnhand("g/0", a, QueueHand{"t", 2, 7, 3})), "1");
  EXPECT_EQ(apply(EncodeQueueHand("g/0", 999, to_s)), "0") << "no such offset";
  EXPECT_EQ(apply(EncodeQueueHand("g/9", a, to_s)), "0") << "no such queue";
  EXPECT_EQ(apply(EncodeQueueHand("g/0", b, to_s)), "1");
  EXPECT_EQ(Ack(machine, "g/0", {b}), 1u) << "an ack removes a handed message";
  EXPECT_EQ(machine.handed(), 0u);
  EXPECT_EQ(machine.malformed(), 0u);
  EXPECT_EQ(apply(EncodeQueueHand("g/0", a, QueueHand{"s", 0, 1, 1})), "0") << "node 0 is malformed";
  EXPECT_EQ(machine.malformed(), 1u);
}

// A session that arrives on another node settles what was handed to it:
// what it holds leaves the queue, the rest is handed back; the new node's
// own hands are left alone, as are other sessions'.
TEST(QueueMachineTest, SettleRemovesWhatTheSessionHoldsAndHandsBackTheRest) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  std::vector<uint64_t> acked;
  std::vector<uint64_t> released;
  machine.set_hooks(QueueApplyHooks{
      nullptr, [&](std::string_view, const std::vector<uint64_t>& offsets) { acked = offsets; },
      [&](std::string_view, const std::vector<uint64_t>& offsets) { released = offsets; }});
  const Message held = Publish("held", 1);
  const Message lost = Publish("lost", 2);
  const Message mine = Publish("mine", 3);
  const Message other = Publish("other", 4);
  const uint64_t h = Append(machine, "g/0", held);
  const uint64_t l = Append(machine, "g/0", lost);
  const uint64_t m = Append(machine, "g/0", mine);
  const uint64_t o = Append(machine, "g/0", other);
  const uint64_t free = Append(machine, "g/0", Publish("free", 5));
  auto apply = [&](const std::string& command) { return machine.Apply(EntryOf(command, kT0)); };
  ASSERT_EQ(apply(EncodeQueueHand("g/0", h, QueueHand{"s", 2, 7, 1})), "1");  // the dead node's
  ASSERT_EQ(apply(EncodeQueueHand("g/0", l, QueueHand{"s", 3, 1, 1})), "1");  // and an earlier home's
  ASSERT_EQ(apply(EncodeQueueHand("g/0", m, QueueHand{"s", 4, 9, 1})), "1");  // the new node's own
  ASSERT_EQ(apply(EncodeQueueHand("g/0", o, QueueHand{"t", 2, 7, 2})), "1");  // another session's
  // Node 4 (incarnation 9) took "s" over; it holds "held" and "mine" (and
  // "free", which nobody handed it: nothing to do with the queue's copy).
  auto settled = DecodeQueueSettleResult(
      apply(EncodeQueueSettle("g/0", QueueHand{"s", 4, 9, 0}, {held.id, mine.id, Publish("free", 5).id})));
  ASSERT_TRUE(settled.has_value());
  EXPECT_EQ(*settled, (QueueSettleResult{1, 1}));
  EXPECT_EQ(acked, std::vector<uint64_t>{h});
  EXPECT_EQ(released, std::vector<uint64_t>{l});
  EXPECT_EQ(ReadQueue(machine, "g/0").messages, (Offsets{{l, "lost"}, {free, "free"}}));
  EXPECT_EQ(machine.handed(), 2u) << "the new node's own hand and the other session's stay";
  EXPECT_EQ(DecodeQueueSettleResult(apply(EncodeQueueSettle("g/0", QueueHand{"s", 4, 9, 0}, {}))),
            (QueueSettleResult{0, 0}))
      << "settled again: nothing left to settle";
  EXPECT_EQ(DecodeQueueSettleResult(apply(EncodeQueueSettle("g/9", QueueHand{"s", 4, 9, 0}, {}))),
            (QueueSettleResult{0, 0}));
  EXPECT_FALSE(DecodeQueueSettleResult("0").has_value());
}

// Hands are in the snapshot (version 2, only while one exists, so an older
// binary reads the others' snapshots).
TEST(QueueMachineTest, HandsSurviveASnapshotWrittenAsVersionTwoOnlyWhileHeld) {
  QueueMachine machine([] { return static_cast<int64_t>(kT0); });
  const uint64_t a = Append(machine, "g/0", Publish("a", 1));
  Append(machine, "g/0", Publish("b", 2));
  EXPECT_EQ(machine.Snapshot().at(0), 1) << "no hand: version 1";
  ASSERT_EQ(machine.Apply(EntryOf(EncodeQueueHand("g/0", a, QueueHand{"s", 2, 7, 1}), kT0)), "1");
  const std::vector<uint8_t> snapshot = machine.Snapshot();
  EXPECT_EQ(snapshot.at(0), 2);
  QueueMachine copy([] { return static_cast<int64_t>(kT0); });
  ASSERT_TRUE(copy.Restore(snapshot));
  EXPECT_EQ(copy.Snapshot(), snapshot);
  EXPECT_EQ(copy.handed(), 1u);
  EXPECT_EQ(ReadQueue(copy, "g/0").messages.size(), 1u);
  EXPECT_EQ(copy.Apply(EntryOf(EncodeQueueUnhand("g/0", a, QueueHand{"s", 2, 7, 1}), kT0)), "1");
  EXPECT_EQ(ReadQueue(copy, "g/0").messages.size(), 2u);
  std::vector<uint8_t> trailing = snapshot;
  trailing.push_back(0);
  EXPECT_FALSE(copy.Restore(trailing));
}

// Seeds for partition_state_fuzz (fuzz_corpus/partition_state), as
// retained_machine_test.cc's PartitionStateTest.SeedCorpus: the first byte
// picks the input.
TEST(QueueMachineTest, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  auto write = [&](const std::string& name, char selector, const std::string& body) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << selector << body;
  };
  auto entry = [](const std::string& bytes, uint8_t step_seconds) {
    EXPECT_LT(bytes.size(), 256u);
    return std::string(1, static_cast<char>(bytes.size())) + static_cast<char>(step_seconds) + bytes;
  };
  const std::string append = EncodeQueueAppend("g/0", Publish("m"));
  const std::string expiring = EncodeQueueAppend("g/0", Publish("e", 2, static_cast<int64_t>(kT0 + 1000)));
  write("queue_run", 0,
        entry(EncodeQueueAssign("g/0", 2, 1), 0) + entry(append, 0) + entry(expiring, 0) + entry(append, 1) +
            entry(EncodeQueueAck("g/0", 1, {0, 7}), 0) + entry(EncodeQueueRead("g/0", 0, 5, 100), 0) +
            entry(EncodeQueueStats(), 0) + entry(append, 90) + entry(EncodeQueueDrop("g/0"), 0) +
            entry(EncodeQueueAppend("g/1", Publish("n")), 0));
  PartitionState state([] { return static_cast<int64_t>(kT0); });
  state.Apply(EntryOf(EncodeQueueAssign("g/0", 2, 1), kT0));
  state.Apply(EntryOf(append, kT0));
  state.Apply(EntryOf(expiring, kT0));
  state.Apply(EntryOf(EncodeQueueAppend("g/1", Publish("n")), kT0));
  const std::vector<uint8_t> snapshot = state.Snapshot();
  write("queue_snapshot", 1, std::string(snapshot.begin(), snapshot.end()));
  write("queue_read_result", 2, state.Query(EncodeQueueRead("g/0", 0, 5, 1000)));
  write("queue_stats", 2, state.Query(EncodeQueueStats()));
  write("queue_append_result", 2, state.Apply(EntryOf(append, kT0)));
}

// On a simulated 3-replica partition.
using sim::PartitionCluster;

// Proposes and runs until answered; the result (nullopt if not ok).
std::optional<std::string> ProposeOk(PartitionCluster& cluster, NodeId on, PartitionId partition, std::string data) {
  auto outcome = std::make_shared<sim::Outcome>();
  cluster.partitions(on).Propose(partition, std::move(data), [outcome](PartitionResult result) {
    outcome->done = true;
    outcome->result = std::move(result);
  });
  EXPECT_TRUE(cluster.RunUntil([&] { return outcome->done; }, 10'000));
  if (outcome->result.status != meta::ProposeStatus::kOk) return std::nullopt;
  return outcome->result.result;
}

std::optional<std::string> ReadOk(PartitionCluster& cluster, NodeId on, PartitionId partition, std::string query) {
  auto outcome = std::make_shared<sim::Outcome>();
  cluster.partitions(on).Read(partition, std::move(query), [outcome](PartitionResult result) {
    outcome->done = true;
    outcome->result = std::move(result);
  });
  EXPECT_TRUE(cluster.RunUntil([&] { return outcome->done; }, 10'000));
  if (outcome->result.status != meta::ProposeStatus::kOk) return std::nullopt;
  return outcome->result.result;
}

// Every append acknowledged before the leader died is served by the new
// leader, under the same offset; acked ones stay gone; new offsets follow.
TEST(QueueMachineSim, ANewLeaderServesEveryAcknowledgedAppend) {
  for (uint64_t seed : sim::Seeds({21, 22})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    sim::StartAll(cluster, 3);
    const std::string queue = "group-a/0";
    const PartitionId partition = cluster.partitions(1).PartitionOf(QueueKey(queue));
    Offsets acknowledged;
    for (uint32_t i = 0; i < 20; ++i) {
      const std::string payload = "m" + std::to_string(i);
      auto result =
          ProposeOk(cluster, static_cast<NodeId>(1 + i % 3), partition, EncodeQueueAppend(queue, Publish(payload, i)));
      ASSERT_TRUE(result.has_value()) << "append " << i;
      auto appended = DecodeQueueAppendResult(*result);
      ASSERT_TRUE(appended && !appended->full);
      acknowledged.emplace_back(appended->offset, payload);
      if (i == 0) {
        ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters(partition).size() == 3; }, 5'000));
      }
    }
    auto acked =
        ProposeOk(cluster, 2, partition, EncodeQueueAck(queue, 0, {acknowledged[0].first, acknowledged[5].first}));
    ASSERT_TRUE(acked && DecodeQueueAckResult(*acked) == 2u);
    acknowledged.erase(acknowledged.begin() + 5);
    acknowledged.erase(acknowledged.begin());

    const NodeId leader = *cluster.Leader(partition);
    cluster.Crash(leader, /*gone=*/false);
    const NodeId survivor = leader == 1 ? 2 : 1;
    auto read = ReadOk(cluster, survivor, partition, EncodeQueueRead(queue, 0, 100, 1 << 20));
    ASSERT_TRUE(read.has_value());
    const Read served = ReadResultOf(*read);
    EXPECT_EQ(served.messages, acknowledged) << "none lost, offsets identical";
    ASSERT_NE(cluster.Leader(partition).value_or(leader), leader);
    auto after = ProposeOk(cluster, survivor, partition, EncodeQueueAppend(queue, Publish("after", 99)));
    ASSERT_TRUE(after.has_value());
    EXPECT_EQ(DecodeQueueAppendResult(*after).value_or(QueueAppendResult{true, 0}).offset, served.next)
        << "the counter continues, nothing reused";
  }
}

// A replica that was down while the leader compacted its log catches up
// from a snapshot and holds exactly the leader's queues.
TEST(QueueMachineSim, ALaggingReplicaCatchesUpFromASnapshot) {
  for (uint64_t seed : sim::Seeds({23})) {
    SCOPED_TRACE(seed);
    PartitionCluster cluster(seed);
    sim::StartAll(cluster, 3);
    const std::string queue = "group-b/1";
    const PartitionId partition = cluster.partitions(1).PartitionOf(QueueKey(queue));
    ASSERT_TRUE(ProposeOk(cluster, 1, partition, EncodeQueueAssign(queue, 2, 1)).has_value());
    ASSERT_TRUE(cluster.RunUntil([&] { return cluster.Voters(partition).size() == 3; }, 5'000));
    const NodeId leader = *cluster.Leader(partition);
    const NodeId lagging = leader == 3 ? 2 : 3;
    cluster.Crash(lagging, /*gone=*/false);
    // More entries than a snapshot interval (PartitionHostConfig::snapshot_every),
    // proposed in rounds so the run stays short.
    constexpr int kAppends = 1100;
    int answered = 0, ok = 0;
    for (int round = 0; round < kAppends / 100; ++round) {
      for (int i = 0; i < 100; ++i) {
        const uint32_t sequence = static_cast<uint32_t>(round * 100 + i);
        cluster.partitions(leader).Propose(partition, EncodeQueueAppend(queue, Publish("m", sequence)),
                                           [&answered, &ok](PartitionResult result) {
                                             ++answered;
                                             ok += result.status == meta::ProposeStatus::kOk ? 1 : 0;
                                           });
      }
      ASSERT_TRUE(cluster.RunUntil([&] { return answered == (round + 1) * 100; }, 20'000));
    }
    EXPECT_EQ(ok, kAppends);
    auto acked = ProposeOk(cluster, leader, partition, EncodeQueueAck(queue, 1, {1, 2, 3}));
    ASSERT_TRUE(acked.has_value());
    cluster.Start(lagging);
    const QueueMachine& ahead = cluster.state(leader, partition)->queues();
    ASSERT_TRUE(cluster.RunUntil(
        [&] {
          const PartitionState* state = cluster.state(lagging, partition);
          return state != nullptr && state->queues().Snapshot() == ahead.Snapshot();
        },
        20'000));
    EXPECT_GT(cluster.partitions(lagging).group(partition)->counters().snapshots_installed, 0u);
    EXPECT_EQ(cluster.state(lagging, partition)->queues().Stats().front().depth, static_cast<uint64_t>(kAppends - 3));
  }
}

}  // namespace
}  // namespace estuary::partition
