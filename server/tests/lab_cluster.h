#pragma once
// LabCluster: real estuaryd nodes, each on its own host of a NetnsLab
// (its own network namespace and address), for the silent-partition suite
// (partition_fault_test.cc). As the reproduction: bitcask data
// folders with --sync always, node 1 bootstraps, the others are seeded with
// node 1 only. Nodes listen on their host's address (port 0: free ports
// inside a namespace the test made); the test reaches them from the lab's
// lan namespace. Stopped by pid. Test support only; one thread.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conformance/support/child_process.h"
#include "conformance/support/raw_client.h"
#include "server/tests/netns_lab.h"

namespace estuary::server::testing {

struct LabClusterOptions {
  int nodes = 3;
  std::vector<std::string> extra_flags = {"--shards", "1", "--log-level", "info"};
};

class LabCluster {
 public:
  struct Node {
    int id = 0;
    std::unique_ptr<estuary::testing::ChildProcess> child;
    std::string host;
    uint16_t mqtt_port = 0;
    uint16_t admin_port = 0;
    std::string cluster_address;
    std::string log_path;
  };

  static std::unique_ptr<LabCluster> Start(NetnsLab& lab, const LabClusterOptions& options, std::string* error);
  ~LabCluster();  // kills every node; removes the directory unless ESTUARY_KEEP_CLUSTER_DIR is set
  LabCluster(const LabCluster&) = delete;
  LabCluster& operator=(const LabCluster&) = delete;

  int size() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return nodes_.at(id); }
  std::string Log(int id) const;
  const std::string& dir() const { return dir_; }

  estuary::testing::HttpResult Request(int id, const std::string& method, const std::string& path,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(3)) const;
  std::optional<nlohmann::json> Json(int id, const std::string& path) const;
  // The sum of a Prometheus counter or gauge over its labels (-1: no answer).
  int64_t Metric(int id, const std::string& name) const;
  // Every node lists every node "up"; partitions on `node` have every node as voter.
  bool WaitFormed(std::chrono::milliseconds timeout, std::string* why);
  // The metadata group's leader as node `observer` sees it (0: none).
  int MetaLeader(int observer) const;

 private:
  LabCluster() = default;

  std::string dir_;
  bool sends_token_ = false;  // SetAdminToken was called: cleared when the cluster goes
  std::map<int, Node> nodes_;
};

}  // namespace estuary::server::testing
