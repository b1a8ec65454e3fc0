// AMQP durable subscriptions survive kill -9 (issue 4, with issue 3's
// durable terminus: durability unsettled-state, expiry-policy never, keyed
// by container-id and link name). A Proton C++ receiver attaches a durable
// subscription; an MQTT publisher streams QoS 1 messages and the node is
// SIGKILLed mid-stream; after a restart on the same data dir the receiver
// reattaches by container-id and link name and must get every message
// whose PUBACK the publisher saw (duplicates allowed: at-least-once).
// Repeated for both engines (docs/amqp.md, docs/storage.md).
#include <gtest/gtest.h>
#include <proton/binary.hpp>
#include <proton/value.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "conformance/amqp/amqp_client.h"
#include "conformance/durability/durability_fixture.h"

namespace estuary::conformance {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Kind = AmqpEvent::Kind;

// The batch published while the node is killed (PublishAcrossKill): within
// the 1000-message queue limit.
constexpr uint16_t kLastBatch = 400;

struct Received {
  std::map<std::string, int> count;  // body -> times received
  std::map<std::string, uint32_t> first_delivery_count;
  std::string first_body;
};

class AmqpDurabilityTest : public DurableNodeTest {
 protected:
  static std::string Body(const AmqpEvent& event) {
    const proton::value& body = event.message.body();
    if (body.type() == proton::BINARY) return std::string(proton::get<proton::binary>(body));
    if (body.type() == proton::STRING) return proton::get<std::string>(body);
    return "<" + proton::type_name(body.type()) + ">";
  }

  static std::unique_ptr<AmqpClient> OpenClient(BrokerProcess& node, const std::string& container) {
    auto client = std::make_unique<AmqpClient>(node.host(), node.amqp_port(),
                                               AmqpClientOptions{.container_id = container});
    std::string error;
    if (!client->WaitOpen(&error, seconds(10))) {
      ADD_FAILURE() << "AMQP open failed: " << error;
      return nullptr;
    }
    return client;
  }

  // A client `container` on `node` with the durable receiver "sub" on
  // `filter` attached with `credit`; null (the failure recorded) otherwise.
  static std::unique_ptr<AmqpClient> AttachDurable(BrokerProcess& node, const std::string& container,
                                                   const std::string& filter, int credit) {
    auto client = OpenClient(node, container);
    if (client == nullptr) return nullptr;
    client->OpenReceiver("sub", filter, {.durable = true, .credit = credit});
    if (!client->Wait(Kind::kReceiverOpen, "sub")) {
      ADD_FAILURE() << "the durable receiver on " << filter << " did not attach";
      return nullptr;
    }
    return client;
  }

  // Takes messages on `link`, accepting each, until every payload in
  // `wanted` came or nothing arrives for `quiet`.
  static Received ReceiveAll(AmqpClient& client, const std::string& link, const std::set<std::string>& wanted,
                             milliseconds quiet = milliseconds(10'000)) {
    Received got;
    size_t missing = wanted.size();
    while (missing > 0) {
      auto event = client.Wait(Kind::kMessage, link, quiet);
      if (!event) break;
      if (!event->settled) client.Settle(event->delivery, AmqpClient::Outcome::kAccept);
      const std::string body = Body(*event);
      if (got.count.empty()) got.first_body = body;
      if (++got.count[body] == 1) {
        got.first_delivery_count[body] = event->delivery_count;
        if (wanted.count(body) != 0) --missing;
      }
    }
    return got;
  }

  // `accepted` were received and accepted before the kill: not lost if
  // they do not come again.
  void Report(const char* test, size_t sent, const std::set<std::string>& acknowledged, const Received& got,
              const std::set<std::string>& accepted, size_t* lost_out) {
    size_t lost = 0;
    size_t duplicates = 0;
    for (const auto& payload : acknowledged) {
      lost += got.count.count(payload) == 0 && accepted.count(payload) == 0 ? 1 : 0;
    }
    for (const auto& [payload, count] : got.count) duplicates += static_cast<size_t>(count - 1);
    size_t accepted_again = 0;
    for (const auto& payload : accepted) accepted_again += got.count.count(payload);
    std::printf("amqp-durability(%s, %s): sent %zu, acknowledged %zu, delivered %zu distinct after the restart "
                "(%zu of %zu accepted before the kill came again), lost %zu, duplicated %zu\n",
                GetParam().c_str(), test, sent, acknowledged.size(), got.count.size(), accepted_again,
                accepted.size(), lost, duplicates);
    EXPECT_LE(got.count.size(), sent);
    *lost_out = lost;
  }
};

// §3.5.3 durable (unsettled-state), §3.5.6 expiry-policy never, §2.6.3
// detach without closing: the subscription and what it queued while the
// link was detached survive kill -9.
TEST_P(AmqpDurabilityTest, DetachedDurableSubscriptionGetsEveryAcknowledgedMessageAfterKill9) {
  const std::string container = IdOnShard("amqp-durable", 0);
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  {
    auto receiver = AttachDurable(*node, container, "adur/#", 0);
    ASSERT_NE(receiver, nullptr);
    receiver->Detach("sub");
    ASSERT_TRUE(receiver->Wait(Kind::kLinkClose, "sub"));
    receiver->Close();
    ASSERT_TRUE(receiver->Wait(Kind::kConnectionClose));
  }
  size_t sent = 0;
  const auto acknowledged =
      PublishAcrossKill(*node, IdOnShard("amqp-dur-pub", 1), "adur", kLastBatch, [&] { Kill9(*node); }, &sent);
  ASSERT_GE(acknowledged.size(), 510u);

  node = StartNode();
  ASSERT_NE(node, nullptr);
  auto receiver = AttachDurable(*node, container, "adur/#", 1000);
  ASSERT_NE(receiver, nullptr);
  const Received got = ReceiveAll(*receiver, "sub", acknowledged);
  size_t lost = 0;
  Report("detached", sent, acknowledged, got, {}, &lost);
  EXPECT_EQ(lost, 0u);
  receiver->Close();
  EXPECT_EQ(node->Stop(), 0);
}

// The receiver is attached when the node dies, holding deliveries it has
// not settled (and some accepted): after the restart the unsettled ones
// come again first (delivery-count incremented), then the rest; nothing
// acknowledged to the publisher is lost.
TEST_P(AmqpDurabilityTest, AttachedReceiverWithUnsettledDeliveriesLosesNothingAcrossKill9) {
  const std::string container = IdOnShard("amqp-attached", 1);
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  constexpr int kCredit = 50;
  auto receiver = AttachDurable(*node, container, "aatt/#", kCredit);
  ASSERT_NE(receiver, nullptr);

  std::set<std::string> held;      // received before the kill and never settled
  std::set<std::string> accepted;  // received and accepted before the kill
  std::set<std::string> before;    // everything received before the kill
  size_t sent = 0;
  const auto acknowledged = PublishAcrossKill(
      *node, IdOnShard("amqp-dur-pub", 1), "aatt", kLastBatch,
      [&] {
        auto events = receiver->TakeMessages("sub", kCredit, seconds(10));
        EXPECT_EQ(events.size(), size_t{kCredit});
        for (size_t i = 0; i < events.size(); ++i) {
          before.insert(Body(events[i]));
          if (i < 20) {
            receiver->Settle(events[i].delivery, AmqpClient::Outcome::kAccept);
            accepted.insert(Body(events[i]));
          } else {
            held.insert(Body(events[i]));
          }
        }
        Kill9(*node);
      },
      &sent);
  ASSERT_GE(acknowledged.size(), 510u);
  receiver.reset();  // its connection died with the node

  node = StartNode();
  ASSERT_NE(node, nullptr);
  receiver = AttachDurable(*node, container, "aatt/#", 1000);
  ASSERT_NE(receiver, nullptr);
  std::set<std::string> wanted;
  for (const auto& payload : acknowledged) {
    if (accepted.count(payload) == 0) wanted.insert(payload);
  }
  const Received got = ReceiveAll(*receiver, "sub", wanted);
  size_t lost = 0;
  Report("attached", sent, acknowledged, got, accepted, &lost);
  EXPECT_EQ(lost, 0u);
  for (const auto& body : held) {
    auto it = got.first_delivery_count.find(body);
    ASSERT_NE(it, got.first_delivery_count.end()) << body << " was unsettled at the kill and never came again";
    EXPECT_GE(it->second, 1u) << body << ": a redelivery has delivery-count >= 1 (§3.2.1)";
  }
  // Accepted ones whose outcome was not yet durable may come again too.
  EXPECT_EQ(before.count(got.first_body), 1u) << "deliveries in flight at the kill come first";
  receiver->Close();
  EXPECT_EQ(node->Stop(), 0);
}

// Deliveries in flight at a detach stay stored until they are sent again
// and settled: a reattach without credit (nothing can be sent) and then
// kill -9 loses none of them (regression: they used to leave the store on
// reattach and wait in memory for credit).
TEST_P(AmqpDurabilityTest, InFlightDeliveriesSurviveAReattachWithoutCreditAndKill9) {
  const std::string container = IdOnShard("amqp-nocredit", 0);
  auto node = StartNode();
  ASSERT_NE(node, nullptr);
  auto receiver = AttachDurable(*node, container, "anc/#", 10);
  ASSERT_NE(receiver, nullptr);
  {
    auto publisher = Connect(*node, IdOnShard("amqp-nocredit-pub", 1), true, 0);
    ASSERT_NE(publisher, nullptr);
    for (uint16_t id = 1; id <= 10; ++id) publisher->Send(Publish("anc/t", "n" + std::to_string(id), 1, id));
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(publisher->ReceiveAs<mqtt::AckPacket>()) << i;
  }
  ASSERT_EQ(receiver->TakeMessages("sub", 10, seconds(10)).size(), 10u);  // left unsettled
  receiver->Detach("sub");
  ASSERT_TRUE(receiver->Wait(Kind::kLinkClose, "sub"));
  receiver->OpenReceiver("sub", "anc/#", {.durable = true, .credit = 0});
  ASSERT_TRUE(receiver->Wait(Kind::kReceiverOpen, "sub"));
  Kill9(*node);
  receiver.reset();

  node = StartNode();
  ASSERT_NE(node, nullptr);
  receiver = AttachDurable(*node, container, "anc/#", 100);
  ASSERT_NE(receiver, nullptr);
  std::set<std::string> wanted;
  for (int id = 1; id <= 10; ++id) wanted.insert("n" + std::to_string(id));
  const Received got = ReceiveAll(*receiver, "sub", wanted);
  for (const auto& body : wanted) {
    auto it = got.first_delivery_count.find(body);
    ASSERT_NE(it, got.first_delivery_count.end()) << body << " was lost";
    EXPECT_GE(it->second, 1u) << body;
  }
  receiver->Close();
  EXPECT_EQ(node->Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, AmqpDurabilityTest, ::testing::Values("bitcask", "rocksdb"), EngineName);

}  // namespace
}  // namespace estuary::conformance
