#include "server/bootstrap_gate.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace estuary::server {

std::string FoldedAddress(std::string address) {
  std::transform(address.begin(), address.end(), address.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return address;
}

BootstrapDecision DecideBootstrap(const BootstrapView& view) {
  BootstrapDecision decision;
  if (view.self_formed) {
    decision.step = BootstrapStep::kDone;
    decision.why = "this node's metadata group has state: it belongs to a cluster";
    return decision;
  }
  std::set<std::string> seeds;
  for (const std::string& seed : view.seeds) seeds.insert(FoldedAddress(seed));
  const std::string self_address = FoldedAddress(view.self_address);
  // Reachable seeds by address, self always among them (the count was
  // checked at start-up with this node counted once).
  std::set<std::string> reachable{self_address};
  std::vector<const BootstrapPeer*> counted;
  for (const BootstrapPeer& peer : view.peers) {
    if (!peer.connected) continue;
    if (peer.formed.value_or(false)) {
      // Whoever it is, a cluster exists already: its leader adds us.
      decision.step = BootstrapStep::kJoin;
      decision.why =
          fmt::format("node {} at {} belongs to a cluster: waiting to be added to it", peer.node, peer.cluster_address);
      return decision;
    }
    const std::string address = FoldedAddress(peer.cluster_address);
    if (seeds.count(address) == 0 || address == self_address) continue;
    if (reachable.insert(address).second) counted.push_back(&peer);
  }
  if (!view.initial) {
    decision.step = BootstrapStep::kJoin;
    decision.why = "this node is not among the --seeds it was given: it joins the cluster they form, never founds one";
    return decision;
  }
  if (reachable.size() < view.expect) {
    std::vector<std::string> missing;
    for (const std::string& seed : seeds) {
      if (reachable.count(seed) == 0) missing.push_back(seed);
    }
    decision.step = BootstrapStep::kWait;
    decision.why = fmt::format("{} of {} expected nodes reachable; waiting for {}", reachable.size(), view.expect,
                               fmt::join(missing, ", "));
    return decision;
  }
  for (const BootstrapPeer* peer : counted) {
    if (!peer->formed) decision.ask.push_back(peer->node);
  }
  if (!decision.ask.empty()) {
    decision.step = BootstrapStep::kAsk;
    decision.why = fmt::format("{} expected nodes reachable; asking {} whether they belong to a cluster",
                               reachable.size(), fmt::join(decision.ask, ", "));
    return decision;
  }
  decision.founder = view.self;
  for (const BootstrapPeer* peer : counted) decision.founder = std::min(decision.founder, peer->node);
  if (decision.founder == view.self) {
    decision.step = BootstrapStep::kBootstrap;
    decision.why = fmt::format(
        "all {} expected nodes reachable, none in a cluster, and node {} has the lowest id: "
        "founding the cluster",
        reachable.size(), view.self);
  } else {
    decision.step = BootstrapStep::kJoin;
    decision.why = fmt::format(
        "all {} expected nodes reachable: node {} (the lowest id) founds the cluster; "
        "waiting to be added to it",
        reachable.size(), decision.founder);
  }
  return decision;
}

const char* BootstrapStepName(BootstrapStep step) {
  switch (step) {
    case BootstrapStep::kDone:
      return "done";
    case BootstrapStep::kWait:
      return "wait";
    case BootstrapStep::kAsk:
      return "ask";
    case BootstrapStep::kJoin:
      return "join";
    case BootstrapStep::kBootstrap:
      return "bootstrap";
  }
  return "unknown";
}

BootstrapGate::~BootstrapGate() { loop_.CancelTimer(timer_); }

void BootstrapGate::Start() {
  if (timer_ != 0 || done_) return;
  Tick();
}

void BootstrapGate::OnState(BootstrapNodeId node, bool formed) {
  if (!done_) answers_[node] = formed;
}

void BootstrapGate::Tick() {
  timer_ = 0;
  BootstrapView view = hooks_.view();
  for (BootstrapPeer& peer : view.peers) {
    if (!peer.connected) {
      // A new link may be a new process: its earlier answer no longer counts.
      answers_.erase(peer.node);
      asked_at_.erase(peer.node);
      continue;
    }
    if (auto it = answers_.find(peer.node); it != answers_.end()) peer.formed = it->second;
  }
  Act(DecideBootstrap(view));
  if (!done_) timer_ = loop_.AddTimer(kTickMs, scope_.Guard([this] { Tick(); }));
}

void BootstrapGate::Act(const BootstrapDecision& decision) {
  if (decision.why != last_.why) {
    spdlog::info("bootstrap-expect: {}", decision.why);
  }
  last_ = decision;
  switch (decision.step) {
    case BootstrapStep::kDone:
      done_ = true;
      return;
    case BootstrapStep::kWait:
    case BootstrapStep::kJoin:
      return;
    case BootstrapStep::kAsk:
      for (BootstrapNodeId node : decision.ask) {
        auto asked = asked_at_.find(node);
        if (asked != asked_at_.end() && loop_.NowMs() - asked->second < kAskAgainMs) continue;
        asked_at_[node] = loop_.NowMs();
        hooks_.ask(node);
      }
      return;
    case BootstrapStep::kBootstrap:
      if (auto booted = hooks_.bootstrap(); !booted) {
        // The group heard from a leader meanwhile, or the store failed: the
        // next tick decides again (kDone once the group has state).
        spdlog::warn("bootstrap-expect: not founding the cluster: {}", booted.error());
        return;
      }
      bootstrapped_ = true;
      done_ = true;
      return;
  }
}

}  // namespace estuary::server
