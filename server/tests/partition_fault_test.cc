// Silent network partitions (issue 29, docs/reliability.md "Silent
// partitions"): three estuaryd nodes, each in its own network namespace,
// ten persistent MQTT 5 sessions connected to node 3, publishers on nodes
// 1 and 2 at 250 a second each; one node is cut off from the others (or,
// in the pair_ cases, from one of them) by packets that vanish (nftables
// drops at the receiver, or blackhole routes), then the cut heals. Each case counts acknowledged messages lost
// (must be 0), QoS 2 duplicates (must be 0), and sessions taken away from a
// node on the majority side (must be none).
//
// ctest runs a share (the cases marked in_ci); ESTUARY_PARTITION_MATRIX=full
// runs every case, ESTUARY_PARTITION_RUNS=N each N times, and
// ESTUARY_PARTITION_SEED=S fixes the seed that picks when the cut starts.
// Root only (network namespaces): elsewhere each case is skipped with the
// reason printed.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "conformance/support/wait_for.h"
#include "server/tests/lab_cluster.h"
#include "server/tests/netns_lab.h"
#include "server/tests/partition_workload.h"

namespace estuary::server::testing {
namespace {

using std::chrono::milliseconds;

enum class Cut { kTwoWay, kOneWay, kBlackhole };
// Node 1 bootstraps the cluster: it leads the metadata group (checked) and
// hosts a publisher. Node 3 serves the ten sessions' connections.
enum class Victim { kNode1, kSessionsNode3, kDrainingNode1 };

struct PartitionCase {
  std::string name;
  Victim victim = Victim::kNode1;
  Cut cut = Cut::kTwoWay;
  int cut_ms = 5000;
  uint8_t qos = 1;
  bool in_ci = false;
  // Why it cannot pass today (its figures are still printed and its other
  // checks still hold); empty: it must pass.
  std::string expected_fail;
  // Why its QoS 2 duplicates are not 0 today (printed, not asserted; lost
  // is still asserted); empty: 0 duplicates asserted.
  std::string expected_duplicates;
  // Non-zero: only the link between the victim and this node is cut (both
  // still reach the third node, so no side loses its majority).
  int only_peer = 0;
};

void PrintTo(const PartitionCase& c, std::ostream* out) { *out << c.name; }

std::vector<PartitionCase> Cases() {
  return {
      {"minority_two_way_5s", Victim::kNode1, Cut::kTwoWay, 5000, 1, true, "", ""},
      {"minority_two_way_2s", Victim::kNode1, Cut::kTwoWay, 2000, 1, true, "", ""},
      {"minority_blackhole_15s_qos2", Victim::kNode1, Cut::kBlackhole, 15000, 2, true, "", ""},
      {"minority_two_way_30s", Victim::kNode1, Cut::kTwoWay, 30000, 1, false, "", ""},
      {"minority_one_way_5s", Victim::kNode1, Cut::kOneWay, 5000, 1, false, "", ""},
      {"minority_one_way_30s", Victim::kNode1, Cut::kOneWay, 30000, 1, false, "", ""},
      {"minority_two_way_5s_qos2", Victim::kNode1, Cut::kTwoWay, 5000, 2, false, "", ""},
      {"sessions_node_two_way_5s", Victim::kSessionsNode3, Cut::kTwoWay, 5000, 1, true, "", ""},
      {"sessions_node_two_way_30s_qos2", Victim::kSessionsNode3, Cut::kTwoWay, 30000, 2, false, "", ""},
      {"sessions_node_one_way_5s", Victim::kSessionsNode3, Cut::kOneWay, 5000, 1, false, "", ""},
      {"during_drain_two_way_5s", Victim::kDrainingNode1, Cut::kTwoWay, 5000, 1, false, "", ""},
      {"during_drain_two_way_30s_qos2", Victim::kDrainingNode1, Cut::kTwoWay, 30000, 2, false, "", ""},
      {"pair_1_3_two_way_5s", Victim::kNode1, Cut::kTwoWay, 5000, 1, true, "", "", 3},
      {"pair_1_3_two_way_30s_qos2", Victim::kNode1, Cut::kTwoWay, 30000, 2, false, "", "", 3},
  };
}

std::vector<PartitionCase> SelectedCases() {
  const char* matrix = std::getenv("ESTUARY_PARTITION_MATRIX");
  const bool full = matrix != nullptr && std::string(matrix) == "full";
  std::vector<PartitionCase> selected;
  for (const auto& c : Cases()) {
    if (full || c.in_ci) selected.push_back(c);
  }
  return selected;
}

// The fault lasts this long by design: a duration, not a wait for a state.
void HoldFor(milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  estuary::testing::WaitUntil([] { return false; }, until, milliseconds(50));
}

int64_t LongestGap(const std::vector<int64_t>& times, int64_t from, int64_t to) {
  int64_t previous = from, longest = 0;
  for (int64_t t : times) {
    if (t < from) continue;
    if (t > to) break;
    longest = std::max(longest, t - previous);
    previous = t;
  }
  return std::max(longest, to - previous);
}

// A fresh MQTT 5 client connects to `node` within 4 s (CONNACK success).
bool ProbeConnect(const LabCluster& cluster, int node, const std::string& client_id) {
  estuary::testing::RawClient client;
  if (!client.Open(cluster.node(node).host, cluster.node(node).mqtt_port)) return false;
  mqtt::ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.client_id = client_id;
  connect.clean_start = true;
  connect.version = mqtt::ProtocolVersion::kV5;
  client.Send(connect);
  auto connack = client.ReceiveAs<mqtt::ConnackPacket>(milliseconds(4000));
  return connack && connack->reason == mqtt::ReasonCode::kSuccess;
}

class PartitionFaultTest : public ::testing::TestWithParam<PartitionCase> {};

void RunCase(const PartitionCase& c, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string error;
  auto lab = NetnsLab::Build(3, &error);
  ASSERT_TRUE(lab) << error;
  ASSERT_TRUE(lab->EnterLan(&error)) << error;
  auto cluster = LabCluster::Start(*lab, {}, &error);
  ASSERT_TRUE(cluster) << error;
  ASSERT_TRUE(cluster->WaitFormed(std::chrono::seconds(60), &error)) << error;

  const int victim = c.victim == Victim::kSessionsNode3 ? 3 : 1;
  int meta_leader = 0;
  ASSERT_TRUE(estuary::testing::WaitFor([&] { return (meta_leader = cluster->MetaLeader(2)) != 0; },
                                        std::chrono::seconds(20)));
  PartitionWorkloadOptions options;
  options.qos = c.qos;
  PartitionWorkload workload(*cluster, options);
  ASSERT_TRUE(workload.Start(&error)) << error;
  ASSERT_TRUE(estuary::testing::WaitFor([&] { return workload.acknowledged() >= 500; }, std::chrono::seconds(30)))
      << "the stream never got going";
  HoldFor(milliseconds(std::uniform_int_distribution<int>(500, 2000)(random)));

  if (c.victim == Victim::kDrainingNode1) {
    const auto drain = cluster->Request(victim, "POST", "/api/drain");
    ASSERT_TRUE(drain.status == 200 || drain.status == 202) << drain.status << " " << drain.body;
  }
  const int64_t cut_at = workload.NowMs();
  for (int other = 1; other <= 3; ++other) {
    if (other == victim || (c.only_peer != 0 && other != c.only_peer)) continue;
    const bool ok = c.cut == Cut::kBlackhole ? lab->Blackhole(victim, other, true, &error)
                                             : lab->Cut(victim, other, c.cut == Cut::kTwoWay, &error);
    ASSERT_TRUE(ok) << error;
  }
  // Both sides of it (docs/membership.md "Silent partitions"): once the
  // links are declared dead, a new client is refused on the cut node (its
  // client-id claim cannot reach a majority) and served on the others.
  std::string connects;
  if (c.cut_ms >= 5000 && c.only_peer == 0) {
    HoldFor(milliseconds(2500));
    const int majority = victim == 1 ? 2 : 1;
    const bool cut_side = ProbeConnect(*cluster, victim, "probe-cut-" + std::to_string(seed));
    const bool majority_side = ProbeConnect(*cluster, majority, "probe-majority-" + std::to_string(seed));
    connects = std::string(" | a new CONNECT ") + (cut_side ? "accepted" : "refused") + " on the cut node, " +
               (majority_side ? "accepted" : "refused") + " on node " + std::to_string(majority);
    EXPECT_FALSE(cut_side) << "a node cut off from the majority accepted a new client";
    EXPECT_TRUE(majority_side) << "the majority side refused a new client";
  }
  HoldFor(milliseconds(c.cut_ms) - milliseconds(workload.NowMs() - cut_at));
  ASSERT_TRUE(lab->HealAll(&error)) << error;
  const int64_t heal_at = workload.NowMs();
  HoldFor(milliseconds(5000));
  workload.StopPublishing();
  const bool all_came = workload.WaitDelivered(std::chrono::seconds(60));
  const WorkloadResult result = workload.Finish();

  // Figures (docs/reliability.md, "Silent partitions").
  std::string figures = "| " + c.name + " | " + std::to_string(seed) + " | victim " + std::to_string(victim) +
                        (victim == meta_leader ? " (metadata leader)" : "") + " | " +
                        std::to_string(result.acknowledged) + " | " + std::to_string(result.lost) + " | " +
                        std::to_string(result.duplicated) + " |";
  int majority_ends = 0;
  for (const auto& end : result.ends) majority_ends += end.node != victim;
  for (const auto& publisher : result.publishers) {
    const auto& times = publisher.ack_times_ms;
    int64_t during = 0, last_during = -1, first_after = -1;
    for (int64_t t : times) {
      if (t >= cut_at && t < heal_at) {
        ++during;
        last_during = t - cut_at;
      }
      if (t >= heal_at && first_after < 0) first_after = t - heal_at;
    }
    figures += " node " + std::to_string(publisher.node) + (publisher.node == victim ? " (cut)" : "") + ": " +
               std::to_string(during) + " acks in the cut, last at " + std::to_string(last_during) +
               " ms, longest gap " + std::to_string(LongestGap(times, cut_at, heal_at + 3000)) +
               " ms, first after heal " + std::to_string(first_after) + " ms, refused " +
               std::to_string(publisher.refused) + ", late " + std::to_string(publisher.late) + ";";
  }
  figures += " | ends " + std::to_string(result.ends.size()) + " (majority side " + std::to_string(majority_ends) +
             "), not present " + std::to_string(result.sessions_not_present) + connects + " |";
  for (int id = 1; id <= 3; ++id) {
    figures += " n" + std::to_string(id) + " taken over " +
               std::to_string(cluster->Metric(id, "estuary_cluster_sessions_taken_over_total")) + ", expired " +
               std::to_string(cluster->Metric(id, "estuary_cluster_forwards_expired_total")) + ", handed off " +
               std::to_string(cluster->Metric(id, "estuary_cluster_session_handoff_deliveries_total")) + " (in " +
               std::to_string(cluster->Metric(id, "estuary_cluster_session_handoffs_in_total")) + ", failed " +
               std::to_string(cluster->Metric(id, "estuary_cluster_session_handoffs_failed_total")) + "), stubs " +
               std::to_string(cluster->Metric(id, "estuary_cluster_moved_stubs_opened_total")) + " handing on " +
               std::to_string(cluster->Metric(id, "estuary_cluster_moved_stub_handoffs_total")) + ";";
  }
  std::cout << figures << std::endl;
  for (const auto& loss : result.losses) std::cout << "  lost: " << loss << std::endl;
  for (const auto& twice : result.duplicates) std::cout << "  duplicated: " << twice << std::endl;

  if (!c.expected_fail.empty()) {
    std::cout << "[ expected ] " << (result.lost == 0 ? "no loss although marked expected-fail: " : "lost as expected: ")
              << c.expected_fail << std::endl;
  } else {
    EXPECT_TRUE(all_came) << "acknowledged messages still missing after 60 s";
    EXPECT_EQ(result.lost, 0) << figures;
  }
  if (c.qos == 2 && c.expected_duplicates.empty()) {
    EXPECT_EQ(result.duplicated, 0) << figures;
  } else if (c.qos == 2) {
    std::cout << "[ expected ] " << result.duplicated << " QoS 2 duplicates: " << c.expected_duplicates << std::endl;
  }
  EXPECT_EQ(result.sessions_not_present, 0) << "a session was gone when its client came back";
  // Sessions connected to a node on the majority side stay there.
  if (options.subscriber_node != victim) {
    EXPECT_EQ(majority_ends, 0) << figures;
  }
  if ((::testing::Test::HasFailure() || result.duplicated > 0) && std::getenv("ESTUARY_KEEP_CLUSTER_DIR") != nullptr) {
    std::cout << "logs kept in " << cluster->dir() << std::endl;
  }
}

TEST_P(PartitionFaultTest, NoAcknowledgedMessageIsLost) {
  if (auto why = NetnsLab::Unavailable(); !why.empty()) GTEST_SKIP() << why;
  const char* runs_text = std::getenv("ESTUARY_PARTITION_RUNS");
  const int runs = runs_text != nullptr ? std::max(1, std::atoi(runs_text)) : 1;
  const char* seed_text = std::getenv("ESTUARY_PARTITION_SEED");
  const uint64_t base = seed_text != nullptr ? std::strtoull(seed_text, nullptr, 10) : std::random_device{}();
  for (int run = 0; run < runs; ++run) {
    const uint64_t seed = base + static_cast<uint64_t>(run);
    std::cout << "case " << GetParam().name << " seed " << seed << " (ESTUARY_PARTITION_SEED=" << seed
              << " replays the timing)" << std::endl;
    RunCase(GetParam(), seed);
  }
}

std::string CaseName(const ::testing::TestParamInfo<PartitionCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Silent, PartitionFaultTest, ::testing::ValuesIn(SelectedCases()), CaseName);

}  // namespace
}  // namespace estuary::server::testing
