#include "server/tests/lab_cluster.h"

#include <stdlib.h>  // mkdtemp

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "conformance/support/wait_for.h"
#include "server/tests/fault_cluster.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::server::testing {

std::unique_ptr<LabCluster> LabCluster::Start(NetnsLab& lab, const LabClusterOptions& options, std::string* error) {
  std::unique_ptr<LabCluster> cluster(new LabCluster());
  char pattern[] = "/tmp/estuary-lab-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    if (error) *error = "mkdtemp failed";
    return nullptr;
  }
  cluster->dir_ = pattern;
  const std::string secret = cluster->dir_ + "/cluster.secret";
  std::ofstream(secret) << RandomHex(32) << "\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // The nodes' admin listeners are on the lab's addresses, not loopback:
  // estuaryd needs a token there, which every admin request here sends.
  const std::string token = RandomHex(32);
  const std::string token_file = cluster->dir_ + "/admin.token";
  std::ofstream(token_file) << token << "\n";
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  estuary::testing::SetAdminToken(token);
  cluster->sends_token_ = true;
  const char* binary = std::getenv("ESTUARY_ESTUARYD");
  const std::string estuaryd = binary != nullptr ? binary : std::string(ESTUARY_BIN_DIR) + "/estuaryd";
  for (int id = 1; id <= options.nodes; ++id) {
    Node node;
    node.id = id;
    node.host = lab.address(id);
    node.log_path = cluster->dir_ + "/node-" + std::to_string(id) + ".log";
    std::vector<std::string> argv = lab.Exec(id);
    argv.insert(argv.end(), {estuaryd, "--node-id", std::to_string(id), "--data-dir",
                             cluster->dir_ + "/node-" + std::to_string(id), "--storage", "bitcask", "--sync", "always",
                             "--cluster-secret-file", secret, "--admin-token-file", token_file,
                             "--max-queued-messages", "200000",
                             "--mqtt", node.host + ":0", "--amqp", node.host + ":0", "--admin", node.host + ":0",
                             "--cluster", node.host + ":0"});
    if (id > 1) argv.insert(argv.end(), {"--seeds", cluster->nodes_.at(1).cluster_address});
    argv.insert(argv.end(), options.extra_flags.begin(), options.extra_flags.end());
    node.child = estuary::testing::ChildProcess::Spawn({argv, node.log_path}, error);
    if (!node.child) return nullptr;
    auto ready = node.child->WaitForLine("estuaryd ready", std::chrono::seconds(20));
    if (!ready) {
      if (error) *error = "node " + std::to_string(id) + " printed no ready line";
      return nullptr;
    }
    node.mqtt_port = estuary::testing::PortOf(estuary::testing::WordValue(*ready, "mqtt"));
    node.admin_port = estuary::testing::PortOf(estuary::testing::WordValue(*ready, "admin"));
    node.cluster_address = estuary::testing::WordValue(*ready, "cluster");
    cluster->nodes_.emplace(id, std::move(node));
  }
  return cluster;
}

LabCluster::~LabCluster() {
  for (auto& [id, node] : nodes_) node.child->Kill();
  if (sends_token_) estuary::testing::SetAdminToken({});
  if (!dir_.empty() && std::getenv("ESTUARY_KEEP_CLUSTER_DIR") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string LabCluster::Log(int id) const {
  std::ifstream in(nodes_.at(id).log_path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

estuary::testing::HttpResult LabCluster::Request(int id, const std::string& method, const std::string& path,
                                                 std::chrono::milliseconds timeout) const {
  const Node& target = nodes_.at(id);
  return estuary::testing::HttpRequest(target.host, target.admin_port, method, path, timeout);
}

std::optional<nlohmann::json> LabCluster::Json(int id, const std::string& path) const {
  auto reply = Request(id, "GET", path);
  if (reply.status != 200) return std::nullopt;
  auto json = nlohmann::json::parse(reply.body, nullptr, false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

int64_t LabCluster::Metric(int id, const std::string& name) const {
  auto reply = Request(id, "GET", "/metrics");
  if (reply.status != 200) return -1;
  std::istringstream lines(reply.body);
  std::string line;
  int64_t sum = 0;
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    sum += std::atoll(line.substr(line.rfind(' ') + 1).c_str());
  }
  return sum;
}

bool LabCluster::WaitFormed(std::chrono::milliseconds timeout, std::string* why) {
  std::string last;
  auto fail = [&](std::string what) {
    last = std::move(what);
    return false;
  };
  auto formed = [&] {
    for (const auto& [observer, node] : nodes_) {
      auto members = Json(observer, "/api/cluster/members");
      if (!members) return fail("no members from node " + std::to_string(observer));
      int up = 0;
      for (const auto& member : members->at("members")) up += member.value("state", "") == "up";
      if (up != size()) return fail("node " + std::to_string(observer) + " sees " + std::to_string(up) + " up");
      auto partitions = Json(observer, "/api/cluster/partitions");
      if (!partitions || !partitions->contains("open")) return fail("no partitions document");
      for (const auto& entry : partitions->at("open")) {
        if (!entry.contains("role")) continue;
        if (entry.value("voters", nlohmann::json::array()).size() != static_cast<size_t>(size())) {
          return fail("a partition on node " + std::to_string(observer) + " lacks voters");
        }
      }
    }
    return true;
  };
  if (estuary::testing::WaitFor(formed, timeout, std::chrono::milliseconds(100))) return true;
  if (why) *why = last;
  return false;
}

int LabCluster::MetaLeader(int observer) const {
  auto meta = Json(observer, "/api/cluster/meta");
  if (!meta || !meta->contains("leader")) return 0;
  return meta->at("leader").get<int>();
}

}  // namespace estuary::server::testing
