// Nodes joining, leaving and crashing while traffic flows (issue 6, point 7).
// Each test starts its own cluster of real estuaryd processes, runs a QoS 1
// publisher on node 1 on its own thread, changes the cluster, and checks
// from observed state (members, routes, deliveries) that the others keep
// delivering. Counts of sent / acknowledged / delivered / lost are printed.
#include <cstdio>
#include <optional>

#include "conformance/cluster/cluster_fixture.h"
#include "conformance/support/wait_for.h"

namespace estuary::conformance {
namespace {

void PrintCounts(const char* test, const TrafficPublisher& publisher, const std::string& where, size_t delivered,
                 int lost, int duplicated) {
  std::printf("[counts] %s: sent=%d acknowledged=%d delivered(%s)=%zu lost=%d duplicated=%d\n", test,
              publisher.sent(), publisher.acknowledged(), where.c_str(), delivered, lost, duplicated);
}

// Every acknowledged index must be in `indexes`; returns how many are not
// (lost) and how many came twice (duplicated).
std::pair<int, int> LostAndDuplicated(const std::vector<int>& indexes, int acknowledged) {
  std::vector<int> seen(size_t(acknowledged) + indexes.size() + 1, 0);
  int duplicated = 0;
  for (int index : indexes) {
    if (index >= 0 && size_t(index) < seen.size() && seen[size_t(index)]++ > 0) ++duplicated;
  }
  int lost = 0;
  for (int index = 0; index < acknowledged; ++index) lost += seen[size_t(index)] == 0;
  return {lost, duplicated};
}

// Takes messages until every index below `acknowledged` came (or the deadline).
std::vector<int> DrainUntil(PahoClient& client, std::vector<int> indexes, int acknowledged) {
  const auto deadline = testing::Clock::now() + kDeliver;
  while (LostAndDuplicated(indexes, acknowledged).first > 0 && testing::Clock::now() < deadline) {
    auto message = client.Next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now()));
    if (!message) break;
    indexes.push_back(std::stoi(message->to_string()));
  }
  return indexes;
}

std::vector<int> TakeIndexes(PahoClient& client, size_t count) { return Indexes(client.Take(count, kDeliver)); }

// A node joins while node 1 publishes to a subscriber on node 2: node 2's
// subscriber misses nothing, and a subscriber on the new node receives
// once its route has reached node 1.
TEST(ClusterChurnTest, NodeJoiningDuringTraffic) {
  ClusterProcess::Options options;
  options.nodes = 2;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/join/");
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("s2-")}});
  clients[1]->Subscribe(topic, 1);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;

  TrafficPublisher publisher(*clients[0], topic, 1);
  ASSERT_TRUE(publisher.WaitAcknowledged(50, kDeliver)) << publisher.error();
  std::string error;
  ASSERT_NE(cluster->AddNode(&error), nullptr) << error;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  auto newcomer = ConnectClients(*cluster, {{3, UniqueName("s3-")}});
  newcomer[0]->Subscribe(topic, 1);
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  auto on_new_node = TakeIndexes(*newcomer[0], 50);
  publisher.Stop();
  EXPECT_TRUE(publisher.error().empty()) << publisher.error();

  ASSERT_EQ(on_new_node.size(), 50u) << "the subscriber on the new node got too little";
  EXPECT_TRUE(Contiguous(on_new_node));
  auto on_node_two = DrainUntil(*clients[1], {}, publisher.acknowledged());
  const auto [lost, duplicated] = LostAndDuplicated(on_node_two, publisher.acknowledged());
  PrintCounts("join", publisher, "node 2", on_node_two.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
}

// Node 3 leaves (SIGTERM) while node 1 publishes to subscribers on nodes
// 2 and 3: it exits cleanly, the others stop listing it as up and drop its
// route, and node 2's subscriber misses nothing.
TEST(ClusterChurnTest, NodeLeavingDuringTraffic) {
  auto cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/leave/");
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("s2-")}, {3, UniqueName("s3-")}});
  clients[1]->Subscribe(topic, 1);
  clients[2]->Subscribe(topic, 1);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;

  TrafficPublisher publisher(*clients[0], topic, 1);
  ASSERT_TRUE(publisher.WaitAcknowledged(50, kDeliver)) << publisher.error();
  EXPECT_EQ(cluster->node(3).Stop(), 0) << "node 3 did not exit cleanly:\n" << cluster->node(3).Log();
  ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;
  EXPECT_TRUE(cluster->WaitMemberState(3, "left", kConverge, &why)) << "a graceful leave: " << why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, false, kConverge, &why)) << "node 3's route stayed: " << why;
  ASSERT_TRUE(publisher.WaitAcknowledged(50, kDeliver)) << "publishing stalled after the leave: " << publisher.error();
  publisher.Stop();
  EXPECT_TRUE(publisher.error().empty()) << publisher.error();

  auto on_node_two = DrainUntil(*clients[1], {}, publisher.acknowledged());
  const auto [lost, duplicated] = LostAndDuplicated(on_node_two, publisher.acknowledged());
  PrintCounts("leave", publisher, "node 2", on_node_two.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
}

// kill -9 of node 3 during traffic and its restart: the others see it go
// and come back, node 2 keeps receiving throughout, a subscriber on the
// restarted node receives again, and the route of the subscription that
// died with the crash (clean session, in memory) does not come back.
TEST(ClusterChurnTest, KilledNodeRestartsRejoinsAndLeavesNoStaleRoute) {
  auto cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/kill/");
  const std::string stale = UniqueName("churn/stale/");
  auto clients = ConnectClients(*cluster, {{1, UniqueName("pub")}, {2, UniqueName("s2-")}, {3, UniqueName("s3-")}});
  clients[1]->Subscribe(topic, 1);
  clients[2]->Subscribe(stale, 1);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, stale, true, kConverge, &why)) << why;

  TrafficPublisher publisher(*clients[0], topic, 1);
  ASSERT_TRUE(publisher.WaitAcknowledged(50, kDeliver)) << publisher.error();
  cluster->node(3).Kill();
  ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << "node 3 still up after kill -9: " << why;
  ASSERT_TRUE(publisher.WaitAcknowledged(50, kDeliver)) << "publishing stalled after the crash: " << publisher.error();
  // Failure detection: suspect, then down on both survivors.
  EXPECT_TRUE(cluster->WaitMemberState(3, "down", kConverge, &why)) << why;
  ASSERT_TRUE(cluster->WaitRoute(3, stale, false, kConverge, &why)) << "the dead node's route stayed: " << why;

  std::string error;
  ASSERT_NE(cluster->Restart(3, &error), nullptr) << error;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << "node 3 did not rejoin: " << why;
  const std::string fresh = UniqueName("churn/fresh/");
  auto restarted = ConnectClients(*cluster, {{3, UniqueName("s3-again-")}});
  restarted[0]->Subscribe(fresh, 1);
  ASSERT_TRUE(cluster->WaitRoute(3, fresh, true, kConverge, &why)) << why;
  // Node 3's new route set has reached every node; the crashed
  // subscription is not in it.
  for (int observer : {1, 2}) {
    auto routes = cluster->Routes(observer);
    ASSERT_TRUE(routes);
    EXPECT_EQ(routes->count({3, stale}), 0u) << "stale route on node " << observer;
  }
  clients[0]->Publish(stale, "nobody", 1);
  clients[0]->Publish(fresh, "fresh", 1);
  auto message = restarted[0]->Next(kDeliver);
  ASSERT_TRUE(message);
  EXPECT_EQ(message->to_string(), "fresh");
  ASSERT_TRUE(publisher.WaitAcknowledged(20, kDeliver)) << publisher.error();
  publisher.Stop();

  auto on_node_two = DrainUntil(*clients[1], {}, publisher.acknowledged());
  const auto [lost, duplicated] = LostAndDuplicated(on_node_two, publisher.acknowledged());
  PrintCounts("kill -9 and restart", publisher, "node 2", on_node_two.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(duplicated, 0);
}

// kill -9 and an immediate restart, before the others can declare the node
// down: they still hold its old routes when it comes back, and its first
// RouteReset under its new boot id must replace them (no stale route left
// behind; docs/cluster.md "Routes").
TEST(ClusterChurnTest, NodeRestartedAtOnceAfterKillReplacesItsStaleRoutes) {
  auto cluster = StartCluster({});
  ASSERT_NE(cluster, nullptr);
  const std::string stale = UniqueName("churn/quick-stale/");
  {
    auto doomed = ConnectClients(*cluster, {{3, UniqueName("doomed-")}});
    doomed[0]->Subscribe(stale, 1);
    std::string why;
    ASSERT_TRUE(cluster->WaitRoute(3, stale, true, kConverge, &why)) << why;
    cluster->node(3).Kill();
  }
  std::string error;
  ASSERT_NE(cluster->Restart(3, &error), nullptr) << error;
  std::string why;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  const std::string fresh = UniqueName("churn/quick-fresh/");
  // The restarted node's client-id claims may be refused (Server
  // unavailable) while its partitions and metadata catch up; a client
  // retries, as this one does (at most 3 times; counted).
  std::vector<std::unique_ptr<PahoClient>> clients;
  int refused = 0;
  for (;;) {
    try {
      clients = ConnectClients(*cluster, {{3, UniqueName("s3-")}, {1, UniqueName("pub")}});
      break;
    } catch (const paho::exception& refusal) {
      ASSERT_EQ(refusal.get_return_code(), 3) << refusal.what();
      if (++refused >= 3) {
        for (int node : {1, 3}) {
          for (const char* path : {"/api/cluster/meta", "/api/cluster/partitions"}) {
            auto reply = testing::AdminGet(cluster->node(node).admin_port(), path);
            std::printf("node %d %s: %s\n", node, path, reply ? reply->body.substr(0, 3000).c_str() : "(none)");
          }
        }
        FAIL() << "connects refused three times after the restart";
      }
    }
  }
  std::printf("[counts] quick restart: %d connect attempts refused before one was accepted\n", refused);
  clients[0]->Subscribe(fresh, 1);
  ASSERT_TRUE(cluster->WaitRoute(3, fresh, true, kConverge, &why)) << why;
  EXPECT_TRUE(cluster->WaitRoute(3, stale, false, kConverge, &why)) << "stale route after the restart: " << why;
  clients[1]->Publish(stale, "nobody", 1);
  clients[1]->Publish(fresh, "fresh", 1);
  auto message = clients[0]->Next(kDeliver);
  ASSERT_TRUE(message);
  EXPECT_EQ(message->to_string(), "fresh");
}

// A persistent session on a durable node survives its kill -9: after the
// restart its route is back and the client, coming back without a clean
// session, gets what was published since. The route comes back from node
// 3's store when it restarted before it was declared down, or from the
// survivor that took the session over when the verdict came first (about
// 0.55 s after the kill since the faster down; the client's reconnect to
// node 3 then moves the session back).
TEST(ClusterChurnTest, PersistentSessionRouteReturnsAfterRestartOfDurableNode) {
  ClusterProcess::Options options;
  options.durable = true;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/durable/");
  const std::string client_id = UniqueName("durable-");
  {
    auto session = ConnectClients(*cluster, {{3, client_id}}, /*clean=*/false);
    session[0]->Subscribe(topic, 1);
    session[0]->Disconnect();
  }
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  cluster->node(3).Kill();
  ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;
  std::string error;
  ASSERT_NE(cluster->Restart(3, &error), nullptr) << error;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  const bool routed = testing::WaitFor(
      [&] {
        for (int holder : {3, 1, 2}) {
          if (cluster->WaitRoute(holder, topic, true, std::chrono::milliseconds(0), &why)) return true;
        }
        return false;
      },
      kConverge, std::chrono::milliseconds(50));
  ASSERT_TRUE(routed) << "the persistent route did not come back: " << why;

  auto publisher = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  for (int i = 0; i < 10; ++i) publisher[0]->Publish(topic, std::to_string(i), 1);
  auto session = ConnectClients(*cluster, {{3, client_id}}, /*clean=*/false);
  auto indexes = TakeIndexes(*session[0], 10);
  EXPECT_EQ(indexes, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// Sessions anywhere (issue 7 point 4, docs/partitions.md "Sessions on
// partitions"): a persistent session is kept on the partition of its client
// id as well as on its node, so its client resumes on another node with
// every message acknowledged to the publisher while it was away, both when
// it simply moves and when its node was killed (kill -9). QoS 2 as well:
// each message once.
void ExpectResumesElsewhere(bool kill_first_node, int qos) {
  ClusterProcess::Options options;
  options.durable = true;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/anywhere/");
  const std::string client_id = UniqueName("anywhere-");
  {
    auto session = ConnectClients(*cluster, {{3, client_id}}, /*clean=*/false);
    session[0]->Subscribe(topic, qos);
    session[0]->Disconnect();
  }
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  auto publisher = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  for (int i = 0; i < 20; ++i) publisher[0]->Publish(topic, std::to_string(i), qos);  // each acknowledged
  if (kill_first_node) {
    cluster->node(3).Kill();
    ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;
  }
  PahoClient resumed(cluster->node(2).mqtt_uri(), client_id, MQTTVERSION_3_1_1);
  PahoClient::ConnectOptions connect;
  connect.clean = false;
  // The first tries may meet a partition whose leader died with node 3.
  std::optional<paho::connect_response> response;
  const auto deadline = testing::Clock::now() + kConverge;
  while (!response && testing::Clock::now() < deadline) {
    try {
      response = resumed.Connect(connect);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  ASSERT_TRUE(response.has_value()) << "no CONNECT on node 2: " << why;
  EXPECT_TRUE(response->is_session_present()) << "node 2 did not resume the session";
  auto indexes = DrainUntil(resumed, {}, 20);
  auto [lost, duplicated] = LostAndDuplicated(indexes, 20);
  std::printf("[counts] resume on node 2 (node 3 %s, QoS %d): acknowledged=20 delivered=%zu lost=%d duplicated=%d\n",
              kill_first_node ? "killed" : "alive", qos, indexes.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);
  if (qos == 2) {
    EXPECT_EQ(duplicated, 0);
  }
  // The session's route is on node 2 now: later publishes reach it there.
  ASSERT_TRUE(cluster->WaitRoute(2, topic, true, kConverge, &why)) << why;
  publisher[0]->Publish(topic, "20", qos);
  auto later = TakeIndexes(resumed, 1);
  EXPECT_EQ(later, (std::vector<int>{20}));
}

TEST(ClusterChurnTest, APersistentSessionResumesOnAnotherNodeWithItsQueue) { ExpectResumesElsewhere(false, 1); }

TEST(ClusterChurnTest, APersistentSessionResumesOnAnotherNodeAfterItsNodeIsKilled) {
  ExpectResumesElsewhere(true, 2);
}

// Task transfer (issue 7 point 6, docs/partitions.md "Sessions on
// partitions"): when a node is gone, a survivor takes over its persistent
// sessions from their partitions, so messages published while their
// clients are away are queued (not lost with the node), and the will of a
// client whose connection died with the node is published.
TEST(ClusterChurnTest, AGoneNodesSessionsAreTakenOverAndQueueUntilTheirClientsReturn) {
  ClusterProcess::Options options;
  options.durable = true;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string topic = UniqueName("churn/transfer/");
  const std::string will_topic = UniqueName("churn/will/");
  const std::string client_id = UniqueName("transfer-");
  auto watcher = ConnectClients(*cluster, {{1, UniqueName("will-watch-")}});
  watcher[0]->Subscribe(will_topic, 1);
  {
    auto session = ConnectClients(*cluster, {{3, client_id}}, /*clean=*/false);
    session[0]->Subscribe(topic, 1);
    session[0]->Disconnect();
  }
  // A client still connected to node 3 when it dies, with a will.
  PahoClient willing(cluster->node(3).mqtt_uri(), UniqueName("willing-"), MQTTVERSION_3_1_1);
  PahoClient::ConnectOptions with_will;
  with_will.clean = false;
  with_will.will = paho::will_options(will_topic, std::string("node 3 died"), 1, false);
  willing.Connect(with_will);
  std::string why;
  ASSERT_TRUE(cluster->WaitRoute(3, topic, true, kConverge, &why)) << why;
  auto publisher = ConnectClients(*cluster, {{1, UniqueName("pub")}});
  for (int i = 0; i < 10; ++i) publisher[0]->Publish(topic, std::to_string(i), 1);

  cluster->node(3).Kill();
  ASSERT_TRUE(cluster->WaitMembers({1, 2}, kConverge, &why)) << why;
  auto will = watcher[0]->Next(kDeliver);
  ASSERT_NE(will, nullptr) << "the will of a client of the dead node was not published";
  EXPECT_EQ(will->to_string(), "node 3 died");
  // A survivor holds the session's route now.
  bool routed = false;
  const auto deadline = testing::Clock::now() + kConverge;
  while (!routed && testing::Clock::now() < deadline) {
    routed = cluster->WaitRoute(1, topic, true, std::chrono::milliseconds(100)) ||
             cluster->WaitRoute(2, topic, true, std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(routed) << "no survivor took over the session's route";
  for (int i = 10; i < 30; ++i) publisher[0]->Publish(topic, std::to_string(i), 1);

  auto session = ConnectClients(*cluster, {{1, client_id}}, /*clean=*/false);
  auto indexes = DrainUntil(*session[0], {}, 30);
  auto [lost, duplicated] = LostAndDuplicated(indexes, 30);
  std::printf("[counts] taken over from node 3: acknowledged=30 (20 after its death) delivered=%zu lost=%d "
              "duplicated=%d\n",
              indexes.size(), lost, duplicated);
  EXPECT_EQ(lost, 0);

  // Node 3 comes back with its store: its copies of both sessions are
  // stale (served elsewhere now) and are dropped, the will not published
  // again, and later messages reach the client once.
  std::string error;
  ASSERT_NE(cluster->Restart(3, &error), nullptr) << error;
  ASSERT_TRUE(cluster->WaitMembersUp(kConverge, &why)) << why;
  const bool dropped = testing::WaitFor(
      [&] {
        auto metrics = testing::AdminGet(cluster->node(3).admin_port(), "/metrics");
        return metrics && metrics->body.find("estuary_cluster_recovered_sessions_stale_total{node=\"3\"} 2") !=
                              std::string::npos;
      },
      kConverge, std::chrono::milliseconds(50));
  EXPECT_TRUE(dropped) << "node 3 kept its stale copies";
  EXPECT_EQ(watcher[0]->Next(std::chrono::milliseconds(1000)), nullptr) << "the will was published again";
  publisher[0]->Publish(topic, "30", 1);
  EXPECT_EQ(TakeIndexes(*session[0], 1), (std::vector<int>{30}));
  EXPECT_EQ(session[0]->Next(std::chrono::milliseconds(500)), nullptr) << "a second copy arrived";
}

// One client id per cluster (docs/cluster.md): a CONNECT is accepted only
// once its claim is committed by a majority of the id's partition. A node
// left alone by two kill -9s refuses with Server unavailable (0x88), so a
// client cannot hold an id there while the majority side gives it to
// another connection.
//
// The cluster must have formed first: a partition opened while the others
// were joining has node 1 as its only voter until they are added, and node
// 1 alone is then its majority. (With the faster down on a refused redial,
// nodes killed during that growth are removed from it at once and it stays
// node 1's alone; with the 3 s down they were promoted first.)
TEST(ClusterChurnTest, ANodeWithoutAMajorityRefusesConnects) {
  ClusterProcess::Options options;
  options.nodes = 3;
  auto cluster = StartCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::string id = UniqueName("alone-");
  ConnectClients(*cluster, {{1, id}})[0]->Disconnect();  // its partition is open and led somewhere
  std::string why;
  ASSERT_TRUE(cluster->WaitVoters(1, 3, kConverge, &why)) << why;
  cluster->node(2).Kill();
  cluster->node(3).Kill();
  PahoClient lonely(cluster->node(1).mqtt_uri(), id, MQTTVERSION_5);
  try {
    lonely.Connect();
    ADD_FAILURE() << "node 1 alone accepted a CONNECT";
  } catch (const paho::exception& error) {
    EXPECT_EQ(error.get_return_code(), int(paho::ReasonCode::SERVER_UNAVAILABLE)) << error.what();
  }
  auto metrics = testing::AdminGet(cluster->node(1).admin_port(), "/metrics");
  ASSERT_TRUE(metrics.has_value());
  EXPECT_NE(metrics->body.find("estuary_client_id_claims_refused_total{node=\"1\",shard=\"0\"} 1"), std::string::npos)
      << "the refusal was not counted";
}

}  // namespace
}  // namespace estuary::conformance
