// queue_flow.h: the push-pull credit machines, driven against a real
// QueueMachine (its Read answers and its Ack removing messages). Credit is
// never exceeded; with acks flowing every appended message is pushed once;
// after a Reset or a consumer change the unacknowledged ones are pushed
// again and the acknowledged ones never; acks out of order and repeated;
// the redelivery timeout; a new leader; the consumer's grants, duplicate
// drops and ack batches.
#include "cluster-core/partition/queue_flow.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/hlc.h"
#include "model/message.h"

namespace estuary::partition {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;
constexpr char kQueue[] = "g/f/0";

raft::Entry EntryOf(const std::string& bytes) {
  raft::Entry entry;
  entry.index = 1;
  entry.term = 1;
  entry.timestamp = HybridLogicalClock::Pack(kT0, 0);
  entry.data.assign(bytes.begin(), bytes.end());
  return entry;
}

// A draw in [0, n), the same on every platform.
uint32_t Draw(std::mt19937& random, uint64_t n) { return static_cast<uint32_t>(random() % n); }

std::vector<uint64_t> Offsets(const std::vector<QueuedMessage>& messages) {
  std::vector<uint64_t> offsets;
  for (const QueuedMessage& message : messages) offsets.push_back(message.offset);
  return offsets;
}

// The leader's machine with one queue, and how an agent would drive a
// pusher against it.
class Leader {
 public:
  // Appends `count` messages; tells `pusher` (if any) as the leader would.
  std::vector<uint64_t> Append(int count, QueuePusher* pusher = nullptr) {
    std::vector<uint64_t> offsets;
    for (int i = 0; i < count; ++i) {
      Message message;
      message.topic = "orders";
      message.payload = MakePayload("m" + std::to_string(sequence_));
      message.qos = QoS::kAtLeastOnce;
      message.id = MessageId{3, HybridLogicalClock::Pack(kT0, 0), ++sequence_};
      auto result = DecodeQueueAppendResult(machine_.Apply(EntryOf(EncodeQueueAppend(kQueue, message))));
      EXPECT_TRUE(result && !result->full);
      offsets.push_back(result->offset);
      if (pusher) pusher->OnAppended(result->offset);
    }
    return offsets;
  }
  // Issues reads while the pusher asks for them; returns everything pushed.
  std::vector<QueuedMessage> Pump(QueuePusher& pusher, int64_t now_ms = kT0) {
    std::vector<QueuedMessage> pushed;
    for (int guard = 0; guard < 10'000; ++guard) {
      auto read = pusher.NextRead();
      if (!read) return pushed;
      auto result = DecodeQueueReadResult(
          machine_.Query(EncodeQueueRead(kQueue, read->from, read->max_count, read->max_bytes)));
      EXPECT_TRUE(result.has_value());
      for (QueuedMessage& message : pusher.OnRead(read->token, *result, now_ms)) pushed.push_back(std::move(message));
    }
    ADD_FAILURE() << "the pusher kept asking for reads";
    return pushed;
  }
  // The Ack command committed (and the pusher told, if given).
  void CommitAck(const std::vector<uint64_t>& offsets, QueuePusher* pusher = nullptr) {
    machine_.Apply(EntryOf(EncodeQueueAck(kQueue, 1, offsets)));
    if (pusher) pusher->OnAck(offsets);
  }
  // A command whose answer is the string `expect` ("1": recorded).
  void Apply(const std::string& command, const std::string& expect = "1") {
    EXPECT_EQ(machine_.Apply(EntryOf(command)), expect);
  }
  uint64_t depth() const {
    auto stats = machine_.Stats();
    return stats.empty() ? 0 : stats.front().depth;
  }

 private:
  QueueMachine machine_{[] { return kT0; }};
  uint32_t sequence_ = 0;
};

TEST(QueuePusher, PushesNothingWithoutCreditAndNeverMoreThanGranted) {
  Leader leader;
  QueuePusher pusher(7, 1);
  const auto offsets = leader.Append(10, &pusher);
  EXPECT_FALSE(pusher.NextRead()) << "no credit, no read";
  EXPECT_FALSE(pusher.Grant(8, 1, 5)) << "not the consumer";
  EXPECT_FALSE(pusher.Grant(7, 2, 5)) << "not its epoch";
  ASSERT_TRUE(pusher.Grant(7, 1, 3));
  EXPECT_EQ(Offsets(leader.Pump(pusher)), std::vector<uint64_t>(offsets.begin(), offsets.begin() + 3));
  EXPECT_EQ(pusher.credit(), 0u);
  EXPECT_TRUE(leader.Pump(pusher).empty());
  ASSERT_TRUE(pusher.Grant(7, 1, 2));
  EXPECT_EQ(Offsets(leader.Pump(pusher)), std::vector<uint64_t>(offsets.begin() + 3, offsets.begin() + 5));
  ASSERT_TRUE(pusher.Grant(7, 1, 100));
  EXPECT_EQ(leader.Pump(pusher).size(), 5u);
  EXPECT_EQ(pusher.credit(), 95u) << "credit left for later appends";
  EXPECT_FALSE(pusher.NextRead()) << "caught up: no read until an append";
  leader.Append(1, &pusher);
  EXPECT_EQ(leader.Pump(pusher).size(), 1u);
  EXPECT_EQ(pusher.in_flight(), 11u);
}

TEST(QueuePusher, InFlightIsBoundedWhateverTheCredit) {
  Leader leader;
  QueuePusher pusher(7, 1, QueuePusherLimits{.max_in_flight = 4});
  const auto offsets = leader.Append(10, &pusher);
  pusher.Grant(7, 1, 1000);
  EXPECT_EQ(leader.Pump(pusher).size(), 4u);
  EXPECT_FALSE(pusher.NextRead());
  leader.CommitAck({offsets[1], offsets[3]}, &pusher);
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{offsets[4], offsets[5]}));
  EXPECT_EQ(pusher.in_flight(), 4u);
}

TEST(QueuePusher, AcksOutOfOrderRepeatedOrUnknownAreHarmless) {
  Leader leader;
  QueuePusher pusher(7, 1);
  const auto offsets = leader.Append(6, &pusher);
  pusher.Grant(7, 1, 6);
  ASSERT_EQ(leader.Pump(pusher).size(), 6u);
  EXPECT_EQ(pusher.OnAck({offsets[4], offsets[1], offsets[4]}), 2u);
  EXPECT_EQ(pusher.OnAck({offsets[1]}), 0u) << "a repeated ack";
  EXPECT_EQ(pusher.OnAck({offsets[5] + 1000}), 0u) << "an offset never pushed";
  EXPECT_EQ(pusher.in_flight(), 4u);
  EXPECT_EQ(pusher.OnAck({offsets[0], offsets[2], offsets[3], offsets[5]}), 4u);
  EXPECT_EQ(pusher.in_flight(), 0u);
}

// After a Reset (the link to the consumer went down and up) the consumer
// grants afresh and gets every unacknowledged message again, from the first
// one, and never one that was acknowledged: applied, or only announced by
// an ack frame whose command has not applied yet.
TEST(QueuePusher, AfterResetTheUnacknowledgedArePushedAgainAndTheAcknowledgedNever) {
  Leader leader;
  QueuePusher pusher(7, 1);
  const auto o = leader.Append(8, &pusher);
  pusher.Grant(7, 1, 6);
  ASSERT_EQ(leader.Pump(pusher).size(), 6u);
  leader.CommitAck({o[1], o[3]}, &pusher);  // applied
  pusher.OnAck({o[4]});                     // ack frame seen, command not applied yet
  leader.CommitAck({o[5]});                 // applied on the machine; the pusher not told
  pusher.Reset();
  EXPECT_EQ(pusher.credit(), 0u);
  EXPECT_TRUE(leader.Pump(pusher).empty()) << "no credit after a reset";
  pusher.Grant(7, 1, 3);
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[0], o[2], o[6]}));
  EXPECT_EQ(pusher.in_flight(), 3u) << "o[5] was no longer in the machine: forgotten";
  pusher.Grant(7, 1, 10);
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[7]}));
  EXPECT_EQ(pusher.repushed(), 2u);
}

// The redelivery timeout pushes again only what has waited too long, and
// spends credit for it like any push.
TEST(QueuePusher, UnacknowledgedPushesAreRedeliveredAfterTheTimeout) {
  Leader leader;
  QueuePusher pusher(7, 1, QueuePusherLimits{.redeliver_after_ms = 1000});
  const auto o = leader.Append(4, &pusher);
  pusher.Grant(7, 1, 10);
  ASSERT_EQ(leader.Pump(pusher, kT0).size(), 4u);
  leader.CommitAck({o[1]}, &pusher);
  EXPECT_EQ(pusher.NextDeadline(), kT0 + 1000);
  pusher.Tick(kT0 + 999);
  EXPECT_TRUE(leader.Pump(pusher, kT0 + 999).empty());
  leader.CommitAck({o[3]}, &pusher);
  pusher.Tick(kT0 + 1000);
  EXPECT_EQ(Offsets(leader.Pump(pusher, kT0 + 1000)), (std::vector<uint64_t>{o[0], o[2]}));
  EXPECT_EQ(pusher.credit(), 10u - 4 - 2);
  EXPECT_EQ(pusher.NextDeadline(), kT0 + 2000) << "their clocks restarted at the second push";
  // Due again, and then the link resets: pushed once more, within the
  // fresh credit only.
  pusher.Tick(kT0 + 2000);
  pusher.Reset();
  pusher.Grant(7, 1, 1);
  EXPECT_EQ(Offsets(leader.Pump(pusher, kT0 + 2000)), (std::vector<uint64_t>{o[0]}));
  EXPECT_EQ(pusher.NextDeadline(), kT0 + 3000);
}

// A new leader's fresh pusher may hear of an ack (the frame) before the
// command applies and before it has pushed that offset itself: the read
// still returns the message, which is not pushed.
TEST(QueuePusher, AnAckAheadOfTheCursorIsNotPushed) {
  Leader leader;
  QueuePusher pusher(7, 1);
  const auto o = leader.Append(3, &pusher);
  EXPECT_EQ(pusher.OnAck({o[1]}), 0u);
  pusher.Grant(7, 1, 3);
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[0], o[2]}));
  EXPECT_EQ(pusher.credit(), 1u);
}

TEST(QueuePusher, ARedeliveryOnlyRepushesTheDueOnes) {
  Leader leader;
  QueuePusher pusher(7, 1, QueuePusherLimits{.redeliver_after_ms = 1000});
  const auto o = leader.Append(3, &pusher);
  pusher.Grant(7, 1, 1);
  ASSERT_EQ(leader.Pump(pusher, kT0).size(), 1u);
  pusher.Grant(7, 1, 2);
  ASSERT_EQ(leader.Pump(pusher, kT0 + 600).size(), 2u);
  pusher.Grant(7, 1, 5);
  pusher.Tick(kT0 + 1000);
  EXPECT_EQ(Offsets(leader.Pump(pusher, kT0 + 1000)), (std::vector<uint64_t>{o[0]}));
  pusher.Tick(kT0 + 1600);
  EXPECT_EQ(Offsets(leader.Pump(pusher, kT0 + 1600)), (std::vector<uint64_t>{o[1], o[2]}));
}

TEST(QueuePusher, AnAnswerToAReadFromBeforeAResetIsIgnored) {
  Leader leader;
  QueuePusher pusher(7, 1);
  leader.Append(3, &pusher);
  pusher.Grant(7, 1, 3);
  auto read = pusher.NextRead();
  ASSERT_TRUE(read);
  EXPECT_FALSE(pusher.NextRead()) << "one read at a time";
  pusher.Reset();
  QueueReadResult stale{100, {{0, "x"}, {1, "y"}}};
  EXPECT_TRUE(pusher.OnRead(read->token, stale, kT0).empty());
  pusher.Grant(7, 1, 3);
  auto again = pusher.NextRead();
  ASSERT_TRUE(again);
  pusher.OnReadFailed(again->token);
  EXPECT_TRUE(pusher.NextRead()) << "a failed read may be issued again";
}

// Assign moves the queue to another node mid-flight: the old node's grants
// are refused, the new node is pushed everything unacknowledged (spending
// its own credit), and the old node's late acks still remove messages.
TEST(QueuePusher, AConsumerChangeMidFlightPushesTheUnacknowledgedToTheNewNode) {
  Leader leader;
  QueuePusher pusher(1, 4);
  const auto o = leader.Append(6, &pusher);
  pusher.Grant(1, 4, 4);
  ASSERT_EQ(leader.Pump(pusher).size(), 4u);
  leader.CommitAck({o[0]}, &pusher);
  pusher.OnConsumerChanged(2, 5);
  EXPECT_EQ(pusher.consumer(), 2);
  EXPECT_FALSE(pusher.Grant(1, 4, 10)) << "the old consumer's pull";
  leader.CommitAck({o[2]}, &pusher);  // the old consumer's client acked late
  ASSERT_TRUE(pusher.Grant(2, 5, 3));
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[1], o[3], o[4]}));
  pusher.Grant(2, 5, 3);
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[5]}));
  pusher.OnConsumerChanged(2, 6);
  EXPECT_EQ(pusher.credit(), 2u) << "the same node at a new epoch keeps its credit and flights";
  EXPECT_EQ(pusher.in_flight(), 4u);
}

// A message the dead consumer handed to a member session is pushed to
// nobody else until the session's new node settles it; one the session
// did not hold then goes to the new consumer, whatever was pushed before.
TEST(QueuePusher, AHandedMessageWaitsForItsSettlementThenGoesToTheNewConsumer) {
  Leader leader;
  QueuePusher pusher(1, 4);
  const auto o = leader.Append(4, &pusher);
  pusher.Grant(1, 4, 10);
  ASSERT_EQ(leader.Pump(pusher).size(), 4u);
  leader.Apply(EncodeQueueHand(kQueue, o[1], QueueHand{"s", 1, 7, 1}));
  leader.Apply(EncodeQueueHand(kQueue, o[2], QueueHand{"s", 1, 7, 2}));
  pusher.OnConsumerChanged(2, 5);  // node 1 died
  ASSERT_TRUE(pusher.Grant(2, 5, 10));
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[0], o[3]})) << "not the handed ones";
  EXPECT_EQ(pusher.in_flight(), 2u) << "the handed ones' flights are forgotten";
  // Node 3 took "s" over: it holds o[2] (the put made it), not o[1].
  Message held;
  held.id = MessageId{3, HybridLogicalClock::Pack(kT0, 0), 3};  // Append's third message
  leader.Apply(EncodeQueueSettle(kQueue, QueueHand{"s", 3, 1, 0}, {held.id}), std::string("\1\0\0\0\1\0\0\0", 8));
  pusher.OnAck({o[2]});
  pusher.OnReleased({o[1]});
  EXPECT_EQ(Offsets(leader.Pump(pusher)), (std::vector<uint64_t>{o[1]}));
  EXPECT_EQ(leader.depth(), 3u);
  pusher.OnReleased({});
  EXPECT_FALSE(pusher.NextRead());
}

TEST(QueuePuller, GrantsTheWindowThenWaitsForTheLowWaterMark) {
  QueuePuller puller(1, QueuePullerLimits{.window = 10, .low_water = 4});
  EXPECT_EQ(puller.TakeGrant(), 10u);
  EXPECT_EQ(puller.TakeGrant(), 0u);
  std::vector<QueuedMessage> push;
  for (uint64_t offset = 0; offset < 7; ++offset) push.push_back({offset * 2, "r"});
  EXPECT_EQ(puller.OnPush(push).size(), 7u);
  EXPECT_EQ(puller.unused_credit(), 3u);
  EXPECT_EQ(puller.TakeGrant(), 0u) << "7 held + 3 unused is above the low-water mark";
  for (uint64_t offset : {0, 2, 4}) EXPECT_TRUE(puller.Acked(offset));
  EXPECT_FALSE(puller.Acked(4));
  EXPECT_EQ(puller.TakeGrant(), 0u) << "4 held + 3 unused";
  EXPECT_TRUE(puller.Acked(6));
  EXPECT_TRUE(puller.Acked(8));
  EXPECT_EQ(puller.TakeGrant(), 0u) << "2 held + 3 unused";
  EXPECT_TRUE(puller.Acked(10));
  EXPECT_EQ(puller.TakeGrant(), 6u) << "1 held + 3 unused: up to the window";
  EXPECT_EQ(puller.held() + puller.unused_credit(), 10u);
}

TEST(QueuePuller, DropsDuplicatesAndAcknowledgesAgainThoseAlreadyAcknowledged) {
  QueuePuller puller(1, QueuePullerLimits{.window = 10, .low_water = 2});
  puller.TakeGrant();
  EXPECT_EQ(puller.OnPush({{1, "a"}, {2, "b"}, {3, "c"}}).size(), 3u);
  puller.Acked(1);
  puller.Acked(3);
  EXPECT_EQ(puller.TakeAcks(), (std::vector<uint64_t>{1, 3}));
  EXPECT_FALSE(puller.has_acks());
  // The leader died before applying them: its successor pushes all three.
  puller.Reset(1);
  EXPECT_EQ(puller.TakeGrant(), 10u - 1);
  EXPECT_TRUE(puller.OnPush({{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}}) == (std::vector<QueuedMessage>{{4, "d"}}));
  EXPECT_EQ(puller.duplicates(), 3u);
  EXPECT_EQ(puller.unused_credit(), 9u - 4) << "duplicates spent credit at the leader too";
  EXPECT_EQ(puller.TakeAcks(), (std::vector<uint64_t>{1, 3})) << "acknowledged again";
  EXPECT_EQ(puller.held(), 2u);
}

TEST(QueuePuller, AckBatchesAreBoundedAndAPushBeyondTheWindowIsDropped) {
  QueuePuller puller(1, QueuePullerLimits{.window = 5, .low_water = 1, .max_ack_batch = 2});
  EXPECT_EQ(puller.TakeGrant(), 5u);
  std::vector<QueuedMessage> push;
  for (uint64_t offset = 0; offset < 7; ++offset) push.push_back({offset, "r"});
  EXPECT_EQ(puller.OnPush(push).size(), 5u);
  EXPECT_EQ(puller.over_credit(), 2u);
  EXPECT_EQ(puller.overflowed(), 2u);
  for (uint64_t offset = 0; offset < 5; ++offset) puller.Acked(offset);
  EXPECT_EQ(puller.TakeAcks(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(puller.TakeAcks(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(puller.TakeAcks(), (std::vector<uint64_t>{4}));
  EXPECT_TRUE(puller.TakeAcks().empty());
}

// Leader, link and consumer node together, acks flowing at random: every
// appended message is pushed exactly once and delivered exactly once, the
// leader never pushes beyond the credit granted, the consumer never holds
// more than its window, and the queue ends empty.
TEST(QueueFlow, EveryMessageIsPushedOnceWhileAcksFlow) {
  const uint32_t seed = 1130;
  std::mt19937 random(seed);
  Leader leader;
  QueuePusher pusher(2, 1, QueuePusherLimits{.max_in_flight = 32, .max_read_count = 8});
  QueuePuller puller(1, QueuePullerLimits{.window = 12, .low_water = 4, .max_ack_batch = 5});
  std::map<uint64_t, int> pushes;
  std::map<uint64_t, int> delivered;
  std::vector<uint64_t> at_members;
  uint64_t granted = 0;
  uint64_t pushed = 0;
  size_t appended = 0;
  for (int step = 0; step < 3000 && (appended < 500 || leader.depth() > 0); ++step) {
    if (appended < 500 && Draw(random, 3) == 0) appended += leader.Append(static_cast<int>(1 + Draw(random, 4)), &pusher).size();
    if (uint32_t credit = puller.TakeGrant()) {
      granted += credit;
      ASSERT_TRUE(pusher.Grant(2, 1, credit));
    }
    for (const QueuedMessage& message : leader.Pump(pusher)) {
      ++pushes[message.offset];
      ++pushed;
      ASSERT_LE(pushed, granted) << "seed " << seed << " step " << step;
      for (const QueuedMessage& fresh : puller.OnPush({message})) {
        ++delivered[fresh.offset];
        at_members.push_back(fresh.offset);
      }
    }
    ASSERT_LE(puller.held(), 12u);
    // Members' clients acknowledge some of what they hold, in any order.
    std::shuffle(at_members.begin(), at_members.end(), random);
    const size_t acks = at_members.empty() ? 0 : Draw(random, at_members.size() + 1);
    for (size_t i = 0; i < acks; ++i) puller.Acked(at_members[i]);
    at_members.erase(at_members.begin(), at_members.begin() + static_cast<std::ptrdiff_t>(acks));
    if (Draw(random, 2) == 0) {
      if (auto batch = puller.TakeAcks(); !batch.empty()) leader.CommitAck(batch, &pusher);
    }
  }
  EXPECT_GE(appended, 500u);
  EXPECT_EQ(leader.depth(), 0u) << "seed " << seed;
  EXPECT_EQ(pushes.size(), appended);
  for (const auto& [offset, count] : pushes) EXPECT_EQ(count, 1) << "offset " << offset;
  for (const auto& [offset, count] : delivered) EXPECT_EQ(count, 1) << "offset " << offset;
  EXPECT_EQ(puller.duplicates(), 0u);
  EXPECT_EQ(pusher.in_flight(), 0u);
}

// The leader dies mid-flight: some acks were applied, some sent and lost
// with it, some not yet sent. A fresh pusher on the new leader (cursor 0)
// pushes every unacknowledged message again; the consumer drops the ones it
// holds or acknowledged, acknowledges those again, and its members see each
// message once. Nothing is lost.
TEST(QueueFlow, ANewLeaderPushesFromTheFirstUnacknowledgedAndNothingIsLost) {
  Leader leader;  // the machine survives: the new leader's replica has the same queue
  auto old_leader = std::make_unique<QueuePusher>(2, 1);
  QueuePuller puller(1, QueuePullerLimits{.window = 8, .low_water = 6});
  const auto o = leader.Append(10, old_leader.get());
  old_leader->Grant(2, 1, puller.TakeGrant());
  std::map<uint64_t, int> delivered;
  for (const QueuedMessage& message : puller.OnPush(leader.Pump(*old_leader))) ++delivered[message.offset];
  ASSERT_EQ(delivered.size(), 8u);
  puller.Acked(o[0]);
  puller.Acked(o[1]);
  leader.CommitAck(puller.TakeAcks());  // applied
  puller.Acked(o[2]);
  puller.TakeAcks();  // sent to the old leader, which died before proposing it
  puller.Acked(o[3]);  // not sent yet
  old_leader.reset();

  QueuePusher new_leader(2, 1);
  puller.Reset(1);
  ASSERT_TRUE(new_leader.Grant(2, 1, puller.TakeGrant()));
  for (int round = 0; round < 10 && leader.depth() > 0; ++round) {
    for (const QueuedMessage& message : puller.OnPush(leader.Pump(new_leader))) ++delivered[message.offset];
    for (uint64_t offset : o) puller.Acked(offset);
    if (auto batch = puller.TakeAcks(); !batch.empty()) leader.CommitAck(batch, &new_leader);
    if (uint32_t credit = puller.TakeGrant()) new_leader.Grant(2, 1, credit);
  }
  EXPECT_EQ(leader.depth(), 0u);
  EXPECT_EQ(delivered.size(), 10u);
  for (const auto& [offset, count] : delivered) EXPECT_EQ(count, 1) << "offset " << offset;
  // The new leader's first 4 credits went to o[2] (acknowledged again), o[3]
  // (its ack not sent yet), o[4] and o[5] (held).
  EXPECT_EQ(puller.duplicates(), 4u);
}

// The queue moves from node 1 to node 2 while node 1's members hold some
// of its messages: node 2 is pushed everything unacknowledged (never what
// was acknowledged before the move), node 1's late acks still remove
// messages, and every message reaches a member.
TEST(QueueFlow, AConsumerChangeMidFlightLosesNothing) {
  Leader leader;
  QueuePusher pusher(1, 1);
  QueuePuller node1(1, QueuePullerLimits{.window = 6, .low_water = 2});
  const auto o = leader.Append(10, &pusher);
  pusher.Grant(1, 1, node1.TakeGrant());
  std::map<uint64_t, int> delivered;
  std::set<uint64_t> to_node2;
  for (const QueuedMessage& message : node1.OnPush(leader.Pump(pusher))) ++delivered[message.offset];
  node1.Acked(o[0]);
  node1.Acked(o[1]);
  leader.CommitAck(node1.TakeAcks(), &pusher);

  pusher.OnConsumerChanged(2, 2);
  QueuePuller node2(2, QueuePullerLimits{.window = 6, .low_water = 2});
  EXPECT_FALSE(pusher.Grant(1, 1, node1.TakeGrant()));
  node1.Acked(o[2]);  // node 1's client acknowledged after the move
  node1.Acked(o[3]);
  leader.CommitAck(node1.TakeAcks(), &pusher);
  for (int round = 0; round < 10 && leader.depth() > 0; ++round) {
    if (uint32_t credit = node2.TakeGrant()) {
      ASSERT_TRUE(pusher.Grant(2, 2, credit));
    }
    for (const QueuedMessage& message : node2.OnPush(leader.Pump(pusher))) {
      ++delivered[message.offset];
      to_node2.insert(message.offset);
      node2.Acked(message.offset);
    }
    if (auto batch = node2.TakeAcks(); !batch.empty()) leader.CommitAck(batch, &pusher);
  }
  EXPECT_EQ(leader.depth(), 0u);
  EXPECT_EQ(delivered.size(), 10u);
  EXPECT_FALSE(to_node2.contains(o[0]) || to_node2.contains(o[1]) || to_node2.contains(o[2]) ||
               to_node2.contains(o[3]));
  for (size_t i = 4; i < 10; ++i) EXPECT_TRUE(to_node2.contains(o[i])) << i;
  EXPECT_EQ(delivered[o[4]], 2) << "held on node 1 when the queue moved: a duplicate at QoS 1";
}

}  // namespace
}  // namespace estuary::partition
