#pragma once
// --bootstrap-expect N (docs/cluster.md "Forming a cluster from one
// configuration"): nodes started with the same --seeds list, none of them
// without seeds, form one cluster. The safety argument is in the docs; in
// short: config validation makes N the number of nodes the seeds name, so
// a node acts only once every one of them is reachable, all such nodes see
// the same ids, and only the lowest founds the cluster; a node whose
// metadata group holds any state never founds one, nor does any node while
// a reachable seed says its group has state.
//
// DecideBootstrap is the pure rule. BootstrapGate drives it on a loop: it
// reads the view through hooks (membership, links, the metadata group), asks
// the reachable seeds whether they belong to a cluster (membership frames
// 0x19/0x1A), and calls the bootstrap hook at most once.
//
// Threading: the gate and its hooks run on one loop (shard 0's).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/expected.h"
#include "io/loop.h"
#include "io/scope.h"

namespace estuary::server {

using BootstrapNodeId = uint16_t;

struct BootstrapPeer {
  BootstrapNodeId node = 0;
  std::string cluster_address;  // as the peer announces it (its hello)
  bool connected = false;       // a link to it is up
  std::optional<bool> formed;   // its answer since its link came up
};

struct BootstrapView {
  BootstrapNodeId self = 0;
  std::string self_address;        // this node's advertised cluster address
  std::vector<std::string> seeds;  // normalised HOST:PORT
  uint32_t expect = 0;
  bool self_formed = false;          // this node's metadata group holds state
  bool initial = true;               // one of the `expect` nodes (config_addresses.h AmongInitialNodes)
  std::vector<BootstrapPeer> peers;  // every member but self
};

enum class BootstrapStep {
  kDone,       // this node belongs to a cluster: nothing left to decide
  kWait,       // fewer than `expect` seeds reachable
  kAsk,        // all reachable; some have not said whether they belong to a cluster
  kJoin,       // someone else founds (or has founded) the cluster: wait to be added
  kBootstrap,  // this node founds the cluster
};

struct BootstrapDecision {
  BootstrapStep step = BootstrapStep::kWait;
  std::vector<BootstrapNodeId> ask;  // kAsk: the peers to ask
  BootstrapNodeId founder = 0;       // kJoin/kBootstrap: the lowest reachable id (0: a cluster exists)
  std::string why;                   // one line for the log
};

BootstrapDecision DecideBootstrap(const BootstrapView& view);
// How the gate compares a seed with an announced address: without case, as
// DNS compares host names (config_addresses.cc counts seeds the same way).
std::string FoldedAddress(std::string address);
// "done", "wait", "ask", "join", "bootstrap" (GET /api/cluster/meta's "bootstrap").
const char* BootstrapStepName(BootstrapStep step);

struct BootstrapHooks {
  std::function<BootstrapView()> view;  // `formed` of the peers is filled in by the gate
  std::function<void(BootstrapNodeId)> ask;
  std::function<Expected<void, std::string>()> bootstrap;
};

class BootstrapGate {
 public:
  static constexpr int64_t kTickMs = 100;
  static constexpr int64_t kAskAgainMs = 1000;  // an unanswered ask is sent again

  BootstrapGate(io::Loop& loop, BootstrapHooks hooks) : loop_(loop), hooks_(std::move(hooks)) {}
  ~BootstrapGate();
  BootstrapGate(const BootstrapGate&) = delete;
  BootstrapGate& operator=(const BootstrapGate&) = delete;

  void Start();
  // A peer's answer to an ask (membership's kBootstrapState).
  void OnState(BootstrapNodeId node, bool formed);
  // The last decision (for the log and tests).
  const BootstrapDecision& last() const { return last_; }
  bool bootstrapped() const { return bootstrapped_; }

 private:
  void Tick();
  void Act(const BootstrapDecision& decision);

  io::Loop& loop_;
  BootstrapHooks hooks_;
  std::map<BootstrapNodeId, bool> answers_;      // kept while the peer's link stays up
  std::map<BootstrapNodeId, int64_t> asked_at_;  // loop time of the last ask
  BootstrapDecision last_;
  bool bootstrapped_ = false;
  bool done_ = false;
  io::TimerId timer_ = 0;
  io::Scope scope_;
};

}  // namespace estuary::server
