#pragma once
// NetnsLab: hosts on one machine, each in a network namespace the test
// makes itself (root only), for faults made in the network instead of by
// the process (issue 29, docs/reliability.md "Silent partitions"):
//
//   namespace <tag>lan: bridge br0 10.79.0.254/24 (the test's clients)
//   namespace <tag>h1 .. <tag>hN: eth0 10.79.0.i/24, a veth into br0
//
// Cuts drop packets silently: an nftables rule in the receiving host's
// input hook drops what comes from the cut peer, so the sender sees
// nothing at all (no reset, no refusal, no error; TCP retransmits into the
// void) - what a failed switch or a cloud network partition looks like. A
// two-way cut drops both directions; a one-way cut only from `from` to
// `to`. Blackhole routes (the other classic way, `ip route add blackhole`)
// are offered too: there the local sender's new packets fail with EINVAL
// while established connections go silent.
//
// The test's own sockets live in the lan namespace (EnterLan), so nothing
// in the machine's own network is touched; the destructor deletes every
// namespace it made (their processes must be stopped first). Test support
// only; one thread (EnterLan applies to the calling thread and to threads
// it starts afterwards).
#include <memory>
#include <string>
#include <vector>

namespace estuary::server::testing {

class NetnsLab {
 public:
  // Builds the lan and `hosts` hosts; null with `error` when that fails
  // (not root, no `ip`, no `nft`).
  static std::unique_ptr<NetnsLab> Build(int hosts, std::string* error);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  // Why Build cannot work here, or "" (checked before anything is made).
  static std::string Unavailable();

  int hosts() const { return hosts_; }
  std::string address(int host) const { return "10.79.0." + std::to_string(host); }
  std::string lan_address() const { return "10.79.0.254"; }
  // argv prefix that runs a program on `host`: ip netns exec <ns>.
  std::vector<std::string> Exec(int host) const;

  // Moves the calling thread into the lan namespace (and back with
  // LeaveLan; the destructor does it too).
  bool EnterLan(std::string* error);
  void LeaveLan();

  // Packets from `from` to `to` vanish (dropped at `to`'s input); both
  // ways with `two_way`.
  bool Cut(int from, int to, bool two_way, std::string* error);
  // Blackhole routes for `peer` on `host` (and for `host` on `peer` with
  // two_way).
  bool Blackhole(int host, int peer, bool two_way, std::string* error);
  // Removes every cut and blackhole.
  bool HealAll(std::string* error);

 private:
  NetnsLab() = default;
  std::string Namespace(const std::string& name) const { return tag_ + name; }
  std::string HostNs(int host) const { return Namespace("h" + std::to_string(host)); }
  bool Run(const std::string& command, std::string* error);

  std::string tag_;
  int hosts_ = 0;
  int original_ns_ = -1;  // the thread's namespace before EnterLan
  std::vector<std::string> made_;
  std::vector<std::pair<int, int>> blackholes_;  // (host, peer)
};

}  // namespace estuary::server::testing
