#pragma once
// ClusterProcess: N real estuaryd nodes on loopback for cluster tests. Every
// node binds port 0 (a restarted node takes back the ports it had), has its
// own data folder under one temporary directory, and reads one cluster
// secret file. Nodes are started with --node-id, --cluster-secret-file and
// --seeds (the cluster addresses of the nodes already running), stopped by
// pid (SIGTERM or SIGKILL). The waits poll the nodes' admin API
// (/api/cluster/members, /api/cluster/routes) until the observed state
// holds or a deadline passes (WaitFor): no sleeps. ChildProcess does the
// process work. Test support only; one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "conformance/support/child_process.h"
#include "conformance/support/raw_client.h"

namespace estuary::testing {

using Clock = std::chrono::steady_clock;

// One estuaryd child. Its stdout (the ready line) comes back on a pipe; its
// stderr goes to a file the test can read (Log()).
class NodeProcess {
 public:
  struct Options {
    int id = 1;
    std::string binary;       // estuaryd
    std::string data_dir;     // empty: in memory
    std::string secret_file;  // empty: no --cluster-secret-file
    std::vector<std::string> seeds;
    std::string log_path;
    // Listener addresses; "127.0.0.1:0" picks a free port.
    std::string mqtt = "127.0.0.1:0", amqp = "127.0.0.1:0", admin = "127.0.0.1:0", cluster = "127.0.0.1:0";
    std::vector<std::string> extra_flags;
  };
  static std::unique_ptr<NodeProcess> Start(const Options& options, std::string* error,
                                            std::chrono::milliseconds timeout = std::chrono::seconds(15));
  ~NodeProcess();  // SIGKILL if still running
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;

  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(15)) {  // SIGTERM; exit status
    return child_->Stop(timeout);
  }
  void Kill() { child_->Kill(); }  // kill -9 and reap
  bool running() const { return child_->running(); }

  const Options& options() const { return options_; }
  int id() const { return options_.id; }
  pid_t pid() const { return child_->pid(); }
  const std::string& ready_line() const { return ready_line_; }
  uint16_t mqtt_port() const { return mqtt_port_; }
  uint16_t amqp_port() const { return amqp_port_; }
  uint16_t admin_port() const { return admin_port_; }
  const std::string& cluster_address() const { return cluster_address_; }
  std::string mqtt_uri() const { return "tcp://127.0.0.1:" + std::to_string(mqtt_port_); }
  std::string Log() const;  // its stderr so far

 private:
  NodeProcess() = default;

  Options options_;
  std::unique_ptr<ChildProcess> child_;
  std::string ready_line_;
  uint16_t mqtt_port_ = 0, amqp_port_ = 0, admin_port_ = 0;
  std::string cluster_address_;
};

// GET on a node's admin port; nullopt when no complete reply came in time.
using AdminReply = HttpResult;
std::optional<AdminReply> AdminGet(uint16_t port, const std::string& path,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(3));

// (node, filter) pairs of a /api/cluster/routes document: its own
// local_routes under its "node", and each peer's "routes" under that peer.
std::set<std::pair<int, std::string>> ParseRoutes(const std::string& json);
// node -> state of a /api/cluster/members document (array, or {"members": [...]}).
std::map<int, std::string> ParseMembers(const std::string& json);

class ClusterProcess {
 public:
  struct Options {
    int nodes = 3;
    bool durable = false;  // bitcask data folders (--sync always) instead of memory
    // Every node gets --admin-token-file with a random token, and every
    // admin request of this process (AdminGet, HttpRequest) sends it while
    // the cluster lives (SetAdminToken).
    bool admin_token = false;
    std::vector<std::string> extra_flags = {"--shards", "1", "--log-level", "info"};
  };
  static std::unique_ptr<ClusterProcess> Start(const Options& options, std::string* error);
  ~ClusterProcess();  // kills every node, removes the directory
  ClusterProcess(const ClusterProcess&) = delete;
  ClusterProcess& operator=(const ClusterProcess&) = delete;

  // Starts one more node (the next id unless given) seeded with the running
  // nodes; `secret_file` overrides the cluster's (a wrong-secret node).
  NodeProcess* AddNode(std::string* error, int id = 0, const std::string& secret_file = "");
  // Starts node `id` again with its id, ports and data folder.
  NodeProcess* Restart(int id, std::string* error);
  NodeProcess& node(int id) { return *nodes_.at(id); }
  bool has(int id) const { return nodes_.count(id) && nodes_.at(id)->running(); }
  std::vector<int> running_ids() const;
  const std::string& dir() const { return dir_; }
  const std::string& secret_file() const { return secret_file_; }
  // Writes another random secret to `path` (inside dir()).
  std::string WriteSecret(const std::string& name) const;

  std::optional<std::map<int, std::string>> Members(int observer);
  std::optional<std::set<std::pair<int, std::string>>> Routes(int observer);

  // Every running node sees exactly `up` as up (others absent or not "up").
  // On timeout returns false and describes the last view in `why`.
  bool WaitMembers(const std::set<int>& up, std::chrono::milliseconds timeout, std::string* why = nullptr);
  bool WaitMembersUp(std::chrono::milliseconds timeout, std::string* why = nullptr);  // all running
  // Every running node other than `node` lists `node` in `state` ("left", "down", ...).
  bool WaitMemberState(int node, const std::string& state, std::chrono::milliseconds timeout,
                       std::string* why = nullptr);
  // Each running observer other than `node` sees `node` route `filter` (or,
  // with present=false, no longer sees it).
  bool WaitRoute(int node, const std::string& filter, bool present, std::chrono::milliseconds timeout,
                 std::string* why = nullptr);
  // Every partition `node` hosts (at least one) has `voters` voters: the
  // cluster has formed. Until then a partition node 1 opened while the
  // others joined has node 1 as its only voter, and node 1 alone is its
  // majority (docs/cluster.md, "Client id claim").
  bool WaitVoters(int node, size_t voters, std::chrono::milliseconds timeout, std::string* why = nullptr);

 private:
  ClusterProcess() = default;
  NodeProcess::Options NodeOptions(int id) const;

  Options options_;
  std::string dir_;
  std::string secret_file_;
  std::string token_file_;  // Options::admin_token
  std::map<int, std::unique_ptr<NodeProcess>> nodes_;
  std::map<int, NodeProcess::Options> started_with_;
};

}  // namespace estuary::testing
