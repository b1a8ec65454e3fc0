#include "server/tests/fault_cluster.h"

#include <stdlib.h>  // mkdtemp

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "conformance/support/raw_client.h"
#include "conformance/support/wait_for.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::server::testing {

std::string RandomHex(size_t bytes) {
  std::random_device random;
  std::string hex;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned byte = random() & 0xff;
    hex += "0123456789abcdef"[byte >> 4];
    hex += "0123456789abcdef"[byte & 15];
  }
  return hex;
}

std::unique_ptr<FaultCluster> FaultCluster::Start(const FaultClusterOptions& options, std::string* error) {
  std::unique_ptr<FaultCluster> cluster(new FaultCluster());
  cluster->options_ = options;
  char pattern[] = "/tmp/estuary-fault-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    if (error) *error = "mkdtemp failed";
    return nullptr;
  }
  cluster->dir_ = pattern;
  cluster->secret_file_ = cluster->dir_ + "/cluster.secret";
  std::ofstream(cluster->secret_file_) << RandomHex(32) << "\n";
  std::filesystem::permissions(cluster->secret_file_, std::filesystem::perms::owner_read |
                                                          std::filesystem::perms::owner_write);
  for (int id = 1; id <= options.nodes; ++id) {
    if (cluster->StartNode(id, error) == nullptr) return nullptr;
  }
  return cluster;
}

FaultCluster::~FaultCluster() {
  nodes_.clear();
  if (!dir_.empty() && std::getenv("ESTUARY_KEEP_CLUSTER_DIR") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::vector<int> FaultCluster::running_ids() const {
  std::vector<int> ids;
  for (const auto& [id, node] : nodes_) {
    if (node->running()) ids.push_back(id);
  }
  return ids;
}

NodeProcess* FaultCluster::StartNode(int id, std::string* error) {
  NodeProcess::Options options;
  if (auto it = started_with_.find(id); it != started_with_.end()) {
    options = it->second;
  } else {
    options.id = id;
    // ESTUARY_ESTUARYD runs the suite against another build's estuaryd.
    const char* binary = std::getenv("ESTUARY_ESTUARYD");
    options.binary = binary != nullptr ? binary : std::string(ESTUARY_BIN_DIR) + "/estuaryd";
    options.secret_file = secret_file_;
    options.log_path = dir_ + "/node-" + std::to_string(id) + ".log";
    // The data folder goes in extra_flags: NodeProcess's own data_dir
    // option always picks bitcask.
    // Queues far above what a case publishes (about 20,000 messages): the
    // suite measures what faults lose, not what the queue bound drops (an
    // offline session's queue is full after 1,000 by default, and those
    // drops are acknowledged to the publisher as in any MQTT broker).
    options.extra_flags = {"--data-dir", dir_ + "/node-" + std::to_string(id), "--storage", options_.storage,
                           "--sync", "always", "--max-queued-messages", "200000"};
    options.extra_flags.insert(options.extra_flags.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  }
  options.seeds.clear();
  for (int other : running_ids()) {
    if (other != id) options.seeds.push_back(nodes_.at(other)->cluster_address());
  }
  auto node = NodeProcess::Start(options, error);
  if (!node) return nullptr;
  if (!started_with_.count(id)) {  // a restart takes back the same ports
    options.mqtt = "127.0.0.1:" + std::to_string(node->mqtt_port());
    options.amqp = "127.0.0.1:" + std::to_string(node->amqp_port());
    options.admin = "127.0.0.1:" + std::to_string(node->admin_port());
    options.cluster = node->cluster_address();
    started_with_[id] = options;
  }
  nodes_[id] = std::move(node);
  return nodes_[id].get();
}

NodeProcess* FaultCluster::Restart(int id, bool wipe, std::string* error) {
  if (nodes_.count(id)) nodes_.at(id)->Kill();
  if (wipe) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_ + "/node-" + std::to_string(id), ignored);
  }
  return StartNode(id, error);
}

bool FaultCluster::Isolate(int id, bool isolated) {
  const auto reply = estuary::testing::HttpRequest("127.0.0.1", node(id).admin_port(), isolated ? "POST" : "DELETE",
                                                   "/api/fault/isolate");
  return reply.status == 200;
}

bool FaultCluster::WaitMembers(const std::set<int>& up, std::chrono::milliseconds timeout, std::string* why) {
  std::string last;
  auto all_see_up = [&] {
    for (int observer : running_ids()) {
      auto reply = estuary::testing::AdminGet(node(observer).admin_port(), "/api/cluster/members");
      std::set<int> seen;
      if (reply && reply->status == 200) {
        for (const auto& [member, state] : estuary::testing::ParseMembers(reply->body)) {
          if (state == "up") seen.insert(member);
        }
      }
      if (seen != up) {
        last = "node " + std::to_string(observer) + " sees up:";
        for (int member : seen) last += " " + std::to_string(member);
        return false;
      }
    }
    return true;
  };
  if (estuary::testing::WaitFor(all_see_up, timeout, std::chrono::milliseconds(50))) return true;
  if (why) *why = last;
  return false;
}

bool FaultCluster::WaitMembersUp(std::chrono::milliseconds timeout, std::string* why) {
  const auto ids = running_ids();
  return WaitMembers(std::set<int>(ids.begin(), ids.end()), timeout, why);
}

}  // namespace estuary::server::testing
