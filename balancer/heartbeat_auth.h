#pragma once
// HeartbeatAuth: authenticates the pair's heartbeats with a shared secret
// (--pair-secret-file). Pure apart from the MAC: the wall clock is passed in.
//
// A sealed datagram is the heartbeat's JSON (with `boot`, `seq`, `sent_ms`)
// followed by "\n" and 64 hex digits: HMAC-SHA256, keyed by the secret, over
// the exact JSON bytes before the newline. Open() accepts one only when:
// - the MAC is present and right (compared with CRYPTO_memcmp);
// - it is fresh: |now - sent_ms| <= max_age_ms on the two wall clocks (the
//   pair's clocks must agree within that window: NTP; docs/balancer.md);
// - its seq is above the last accepted from the same boot id (a replay
//   within the window is refused). A boot id not seen before is accepted
//   with a valid MAC and a fresh timestamp, so a heartbeat recorded from an
//   earlier boot cannot be replayed once it is older than the window.
// Boot ids are remembered while their last heartbeat is younger than the
// window (older ones could not pass the freshness check anyway), at most
// `max_boots` of them (only holders of the secret can add one).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "balancer/pair_state.h"
#include "base/expected.h"

namespace estuary::balancer {

enum class HeartbeatReject { kUnauthenticated, kBadMac, kMalformed, kStale, kReplay };
inline constexpr int kHeartbeatRejectReasons = 5;
const char* ToString(HeartbeatReject reason);  // metric label: "unauthenticated", "bad_mac", ...

struct Rejected {
  HeartbeatReject reason;
  std::string detail;
};

struct HeartbeatAuthOptions {
  int64_t max_age_ms = 5000;
  size_t max_boots = 64;
};

// HMAC-SHA256 of `bytes` keyed by `secret`, as 64 lower-case hex digits.
std::string HeartbeatMac(std::string_view secret, std::string_view bytes);
// 16 random bytes (RAND_bytes) as 32 hex digits: one per process start.
std::string NewBootId();

class HeartbeatAuth {
 public:
  HeartbeatAuth(std::string secret, std::string boot_id, HeartbeatAuthOptions options = {});

  // Stamps `heartbeat` with this boot id, the next sequence and `wall_ms`,
  // and returns the datagram: JSON, "\n", MAC.
  std::string Seal(Heartbeat heartbeat, int64_t wall_ms);
  // Checks a received datagram (see above); on success the sender's boot
  // and sequence are recorded.
  Expected<Heartbeat, Rejected> Open(std::string_view datagram, int64_t wall_ms);

  const std::string& boot_id() const { return boot_id_; }
  size_t boots_known() const { return boots_.size(); }

 private:
  struct Seen {
    uint64_t seq = 0;
    int64_t sent_ms = 0;
  };
  void Forget(int64_t wall_ms);

  std::string secret_;
  std::string boot_id_;
  HeartbeatAuthOptions options_;
  uint64_t seq_ = 0;
  std::map<std::string, Seen> boots_;  // boot id -> last accepted
};

}  // namespace estuary::balancer
