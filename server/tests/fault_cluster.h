#pragma once
// FaultCluster: N real estuaryd nodes on loopback for the fault suite
// (docs/reliability.md). Like conformance/cluster's ClusterProcess, but with
// what fault tests need on top: the storage engine chosen per cluster
// (bitcask or rocksdb, --sync always), a restart with the data folder wiped,
// and the transport fault switch (--fault-injection, POST/DELETE
// /api/fault/isolate). Nodes bind port 0 once and take their ports back on
// a restart; they are stopped by pid. The binary is ESTUARY_BIN_DIR's
// estuaryd, or $ESTUARY_ESTUARYD. Test support only; one thread.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/cluster/cluster_process.h"

namespace estuary::server::testing {

using estuary::testing::NodeProcess;

struct FaultClusterOptions {
  int nodes = 3;
  std::string storage = "bitcask";  // bitcask | rocksdb
  std::vector<std::string> extra_flags = {"--shards", "1", "--log-level", "info", "--fault-injection"};
};

// `bytes` random bytes as hex (a cluster secret file's content).
std::string RandomHex(size_t bytes);

class FaultCluster {
 public:
  // Starts every node (node 1 first, each later one seeded with the earlier
  // ones); does not wait for membership (WaitMembersUp).
  static std::unique_ptr<FaultCluster> Start(const FaultClusterOptions& options, std::string* error);
  ~FaultCluster();  // kills every node; removes the directory unless ESTUARY_KEEP_CLUSTER_DIR is set
  FaultCluster(const FaultCluster&) = delete;
  FaultCluster& operator=(const FaultCluster&) = delete;

  NodeProcess& node(int id) { return *nodes_.at(id); }
  bool running(int id) const { return nodes_.count(id) != 0 && nodes_.at(id)->running(); }
  std::vector<int> running_ids() const;
  int size() const { return options_.nodes; }
  const std::string& storage() const { return options_.storage; }
  const std::string& dir() const { return dir_; }

  void Kill(int id) { nodes_.at(id)->Kill(); }  // kill -9 and reap
  // Starts node `id` again with its id and ports, seeded with the running
  // nodes; with `wipe`, its data folder is deleted first.
  NodeProcess* Restart(int id, bool wipe, std::string* error);
  // The transport fault switch on node `id`: true cuts it off from every
  // peer, false heals. False if the admin call failed.
  bool Isolate(int id, bool isolated);

  // Every running node lists exactly `up` as "up" in /api/cluster/members.
  bool WaitMembers(const std::set<int>& up, std::chrono::milliseconds timeout, std::string* why = nullptr);
  bool WaitMembersUp(std::chrono::milliseconds timeout, std::string* why = nullptr);

 private:
  FaultCluster() = default;
  NodeProcess* StartNode(int id, std::string* error);

  FaultClusterOptions options_;
  std::string dir_;
  std::string secret_file_;
  std::map<int, std::unique_ptr<NodeProcess>> nodes_;
  std::map<int, NodeProcess::Options> started_with_;  // with the ports first bound
};

}  // namespace estuary::server::testing
