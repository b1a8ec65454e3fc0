#pragma once
// PairState: the active/standby decision of one estuary-lb, as a pure state
// machine (inputs: heartbeats from the partner and ticks, each with `now`;
// output: the role and epoch). The shell (balancer.cc) sends a Heartbeat
// every interval, feeds received ones in and listens only while active.
//
// Rules (docs/balancer.md):
// - A balancer started as active first waits `startup_wait_ms` for an
//   active partner; hearing one it stays standby (a returning old active
//   never takes the address back), else it becomes active at epoch + 1.
// - A standby that has not heard an active partner for
//   `takeover_timeout_ms` becomes active with a higher epoch.
// - Two actives (after a partition heals): the higher epoch stays; at equal
//   epochs the higher priority (started as active) stays, then the larger id.
//   The other steps down at once.
// - The epoch never decreases; every heartbeat raises it to the highest seen.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace estuary::balancer {

enum class Role { kActive, kStandby };
const char* ToString(Role role);

// The partner's view of one node, shared so both balancers poll the same list.
struct SharedNode {
  std::string admin;
  bool healthy = false;
  bool drained = false;
  double score = 0;
  bool operator==(const SharedNode&) const = default;
};

struct Heartbeat {
  uint64_t epoch = 0;
  Role role = Role::kStandby;
  uint32_t priority = 0;  // 1 when started as active
  std::string id;         // the sender's heartbeat HOST:PORT
  std::vector<SharedNode> nodes;
  // Set only with a pair secret (heartbeat_auth.h): the sender's random boot
  // id, its per-boot sequence (from 1) and its wall clock at sending.
  std::string boot = {};
  uint64_t seq = 0;
  int64_t sent_ms = 0;
  bool operator==(const Heartbeat&) const = default;
};
// One UDP datagram of JSON (docs/balancer.md has an example); with a pair
// secret, HeartbeatAuth appends a MAC line to these bytes.
std::string EncodeHeartbeat(const Heartbeat& heartbeat);
Expected<Heartbeat, std::string> DecodeHeartbeat(std::string_view bytes);

struct PairOptions {
  int64_t takeover_timeout_ms = 1000;
  int64_t startup_wait_ms = 300;
};

class PairState {
 public:
  PairState(Role start_role, std::string id, PairOptions options, int64_t now_ms);

  // Each returns true when the role changed.
  bool OnHeartbeat(const Heartbeat& heartbeat, int64_t now_ms);
  bool Tick(int64_t now_ms);

  Role role() const { return role_; }
  uint64_t epoch() const { return epoch_; }
  bool deciding() const { return deciding_; }  // start-up wait of a would-be active
  uint32_t priority() const { return priority_; }
  const std::string& id() const { return id_; }
  // When a heartbeat from an active peer was last heard (or the start).
  int64_t last_active_heard_ms() const { return last_active_heard_ms_; }
  // Milliseconds until the next Tick() could change something.
  int64_t NextDeadline(int64_t now_ms) const;

 private:
  bool PeerWins(const Heartbeat& heartbeat) const;
  bool Become(Role role);

  Role role_ = Role::kStandby;
  std::string id_;
  PairOptions options_;
  uint32_t priority_ = 0;
  uint64_t epoch_ = 0;
  bool deciding_ = false;
  int64_t started_ms_ = 0;
  int64_t last_active_heard_ms_ = 0;
};

}  // namespace estuary::balancer
