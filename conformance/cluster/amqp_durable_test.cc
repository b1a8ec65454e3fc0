// AMQP durable subscriptions on partitions (issue 7 point 2, docs/amqp.md
// "Durable subscriptions in a cluster"): a durable link (terminus durable,
// expiry-policy never) claims its session id in the cluster's registry as
// an MQTT CONNECT claims its client id, and its session is kept on the
// partition of that id. A durable receiver detached from node 3 reattaches
// on node 1 and gets every message acknowledged to the publisher while it
// was away, both when node 3 is still up and when it was killed (kill -9)
// after the publishes; messages published after its death wait on the
// survivor that took the subscription over (task transfer). Counts of
// lost and duplicated messages are printed.
#include <proton/binary.hpp>
#include <proton/value.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "conformance/amqp/amqp_client.h"
#include "conformance/cluster/cluster_fixture.h"

namespace estuary::conformance {
namespace {

using Kind = AmqpEvent::Kind;

std::string BodyOf(const AmqpEvent& event) {
  const proton::value& body = event.message.body();
  if (body.type() == proton::BINARY) return std::string(proton::get<proton::binary>(body));
  if (body.type() == proton::STRING) return proton::get<std::string>(body);
  return {};
}

int IndexOf(const AmqpEvent& event) {
  try {
    return std::stoi(BodyOf(event));
  } catch (const std::exception&) {
    return -1;
  }
}

// Indexes below `count` that never came, and deliveries of an index seen before.
std::pair<int, int> LostAndDuplicated(const std::vector<int>& indexes, int count) {
  std::vector<int> seen(size_t(count) + 1, 0);
  int duplicated = 0;
  for (int index : indexes) {
    if (index >= 0 && index <= count && seen[size_t(index)]++ > 0) ++duplicated;
  }
  int lost = 0;
  for (int index = 0; index < count; ++index) lost += seen[size_t(index)] == 0;
  return {lost, duplicated};
}

std::unique_ptr<AmqpClient> ConnectAmqp(NodeProcess& node, const std::string& container_id) {
  auto client = std::make_unique<AmqpClient>("127.0.0.1", node.amqp_port(), AmqpClientOptions{.container_id = container_id});
  std::string error;
  if (!client->WaitOpen(&error)) ADD_FAILURE() << "AMQP open failed on node " << node.id() << ": " << error;
  return client;
}

// Attaches the durable receiver `name`, again while the server refuses it
// (a claim refused while the id's partition elects a leader); the last
// refusal in `why`.
bool AttachDurable(AmqpClient& client, const std::string& name, const std::string& topic, int credit,
                   std::string* why) {
  const auto deadline = testing::Clock::now() + kConverge;
  while (testing::Clock::now() < deadline) {
    client.OpenReceiver(name, topic, {.durable = true, .credit = credit});
    if (!client.Wait(Kind::kReceiverOpen, name)) {
      *why = "no attach for " + name;
      continue;
    }
    // A refusal is our attach and its detach together.
    if (auto closed = client.Wait(Kind::kLinkClose, name, std::chrono::milliseconds(300))) {
      *why = closed->condition + ": " + closed->description;
      continue;
    }
    return true;
  }
  return false;
}

// Takes messages on `link` (accepting each) until every index below
// `count` came, or the deadline.
std::vector<int> DrainUntil(AmqpClient& client, const std::string& link, int count) {
  std::vector<int> indexes;
  const auto deadline = testing::Clock::now() + kDeliver;
  while (LostAndDuplicated(indexes, count).first > 0 && testing::Clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now());
    auto message = client.Wait(Kind::kMessage, link, left);
    if (!message) break;
    indexes.push_back(IndexOf(*message));
    client.Settle(message->delivery, AmqpClient::Outcome::kAccept);
  }
  return indexes;
}

void ExpectDurableSubscriptionMoves(bool kill_node_3) {
  constexpr int kBefore = 20;  // published while node 3 holds the subscription
  constexpr int kAfter = 10;   // after node 3's death: queued by the survivor that took it over
  const int kMessages = kill_node_3 ? kBefore + kAfter : kBefore;
  ClusterProcess::Options options;
  options.durable = true;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("amqp/durable/");
  const std::string container = UniqueName("durable-container-");
  std::string why;
  {
    auto subscriber = ConnectAmqp(cluster->node(3), container);
    ASSERT_TRUE(AttachDurable(*subscriber, "sub", topic, 0, &why)) << "no durable attach on node 3: " << why;
    subscriber->Detach("sub");  // not closed: the subscription stays
    ASSERT_TRUE(subscriber->Wait(Kind::kLinkClose, "sub"));
    subscriber->Close();
  }
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  auto publisher = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  for (int i = 0; i < kBefore; ++i) publisher[0]->Publish(topic, std::to_string(i), 1);  // each acknowledged
  if (kill_node_3) {
    cluster->node(3).Kill();
    ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;
    // Task transfer: a survivor takes the subscription over and holds its route.
    bool routed = false;
    const auto deadline = testing::Clock::now() + kConverge;
    while (!routed && testing::Clock::now() < deadline) {
      routed = cluster->WaitRoute(1, topic, true, std::chrono::milliseconds(100)) ||
               cluster->WaitRoute(2, topic, true, std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(routed) << "no survivor took over the durable subscription's route";
    for (int i = kBefore; i < kMessages; ++i) publisher[0]->Publish(topic, std::to_string(i), 1);
  }

  auto resumed = ConnectAmqp(cluster->node(1), container);
  ASSERT_TRUE(AttachDurable(*resumed, "sub", topic, kMessages + 10, &why)) << "no durable attach on node 1: " << why;
  auto indexes = DrainUntil(*resumed, "sub", kMessages);
  auto [lost, duplicated] = LostAndDuplicated(indexes, kMessages);
  std::printf("[counts] AMQP durable subscription reattached on node 1 (node 3 %s): acknowledged=%d delivered=%zu "
              "lost=%d duplicated=%d\n",
              kill_node_3 ? "killed, 10 published after" : "alive", kMessages, indexes.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);  // at least once: a duplicate is allowed, counted above

  // Its route is on node 1 now: later publishes reach it there.
  ASSERT_TRUE(cluster->WaitRoute(1, topic, true, kConverge, &why)) << why;
  publisher[0]->Publish(topic, std::to_string(kMessages), 1);
  auto later = resumed->Wait(Kind::kMessage, "sub", kDeliver);
  ASSERT_TRUE(later.has_value()) << "a message published after the reattach did not arrive";
  EXPECT_EQ(IndexOf(*later), kMessages);
}

TEST(ClusterAmqpDurableTest, ADurableSubscriptionReattachesOnAnotherNodeWithItsQueue) {
  ExpectDurableSubscriptionMoves(false);
}

TEST(ClusterAmqpDurableTest, ADurableSubscriptionReattachesOnAnotherNodeAfterItsNodeIsKilled) {
  ExpectDurableSubscriptionMoves(true);
}

// The same durable link attached on another node while still attached on
// node 3: the newer attach wins there too, and node 3 detaches its link
// with amqp:link:stolen (the claim told it).
TEST(ClusterAmqpDurableTest, ADurableLinkAttachedOnAnotherNodeIsStolenFromTheFirst) {
  auto cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("amqp/stolen/");
  const std::string container = UniqueName("stolen-container-");
  std::string why;
  auto first = ConnectAmqp(cluster->node(3), container);
  ASSERT_TRUE(AttachDurable(*first, "sub", topic, 10, &why)) << why;
  auto second = ConnectAmqp(cluster->node(1), container);
  ASSERT_TRUE(AttachDurable(*second, "sub", topic, 10, &why)) << why;
  auto stolen = first->Wait(Kind::kLinkClose, "sub", kDeliver);
  ASSERT_TRUE(stolen.has_value()) << "node 3 kept the link attached on node 1";
  EXPECT_EQ(stolen->condition, "amqp:link:stolen");
  ASSERT_TRUE(cluster->WaitRoute(1, topic, true, kConverge, &why)) << why;
  auto publisher = ConnectClients(*cluster, {{2, UniqueName("pub")}});
  publisher[0]->Publish(topic, "0", 1);
  auto message = second->Wait(Kind::kMessage, "sub", kDeliver);
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(IndexOf(*message), 0);
}

// A durable attach is answered only once its claim commits: a node left
// alone by two kill -9s refuses it (our attach, then a detach with
// amqp:internal-error), so a link cannot hold a subscription there while
// the majority side gives it to another.
TEST(ClusterAmqpDurableTest, ANodeWithoutAMajorityRefusesADurableAttach) {
  auto cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("amqp/alone/");
  const std::string container = UniqueName("alone-container-");
  std::string why;
  auto client = ConnectAmqp(cluster->node(1), container);
  ASSERT_TRUE(AttachDurable(*client, "sub", topic, 10, &why)) << why;  // its partition is open and led somewhere
  client->Detach("sub");
  ASSERT_TRUE(client->Wait(Kind::kLinkClose, "sub"));
  ASSERT_TRUE(cluster->WaitVoters(1, 3, kConverge, &why)) << why;  // formed: node 1 alone is no majority
  cluster->node(2).Kill();
  cluster->node(3).Kill();
  client->OpenReceiver("sub", topic, {.durable = true, .credit = 10});
  auto refused = client->Wait(Kind::kLinkClose, "sub", kDeliver);
  ASSERT_TRUE(refused.has_value()) << "node 1 alone neither attached nor refused the durable link";
  EXPECT_EQ(refused->condition, "amqp:internal-error") << refused->description;
  EXPECT_NE(refused->description.find("no quorum"), std::string::npos) << refused->description;
  // A link that is not durable claims nothing: node 1 alone still serves it.
  client->OpenReceiver("plain", topic, {.credit = 10});
  ASSERT_TRUE(client->Wait(Kind::kReceiverOpen, "plain"));
  EXPECT_FALSE(client->Wait(Kind::kLinkClose, "plain", std::chrono::milliseconds(300)).has_value());
}

}  // namespace
}  // namespace estuary::conformance
