#pragma once
// AddressLimits: the per-source-address abuse limits (docs/security.md
// "Abuse limits"): concurrent connections, new connections per second (a
// token bucket) and a back-off after authentication failures, over a
// table of addresses whose size is capped.
//
// Memory is bounded: at most `max_addresses` entries. Every call first
// drops up to two least recently seen entries that carry no state worth
// keeping (no open connection, a full connect bucket, no back-off running
// and no failure within `failure_memory_ms`), so idle addresses expire
// without a sweep; a new address that finds the table full evicts the
// least recently seen entry without open connections, and is refused
// (kTableFull) only if every entry scanned has open connections.
//
// Pure: every call takes `now_ms`; nothing reads a clock. Not thread-safe
// (server/connection_guard.h serialises a node's shards on it).
#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/token_bucket.h"

namespace estuary::security {

struct AddressLimitSettings {
  uint32_t max_connections_per_address = 0;  // concurrent; 0: no cap
  double connect_rate_per_address = 0;       // new connections per second, burst of one second; 0: no cap
  // Authentication failures an address may make before it is refused
  // back-off; 0: no back-off.
  uint32_t auth_failures_before_backoff = 0;
  int64_t auth_backoff_ms = 1000;       // the first back-off; each further failure doubles it
  int64_t auth_backoff_max_ms = 60'000;  // ... up to this
  int64_t failure_memory_ms = 600'000;   // failures older than this are forgotten
  size_t max_addresses = 65'536;         // entries in the table
};

class AddressLimits {
 public:
  enum class Verdict : uint8_t {
    kAdmit,
    kTooManyConnections,  // max_connections_per_address open already
    kConnectRate,         // connect_rate_per_address exceeded
    kAuthBackoff,         // in back-off after authentication failures
    kTableFull,           // max_addresses entries, all with open connections
  };

  explicit AddressLimits(AddressLimitSettings settings);

  // A new connection from `address` (a numeric IP, or the key AddressKey
  // made). Admitted: counted open until Release(address).
  Verdict Admit(std::string_view address, int64_t now_ms);
  // An admitted connection from `address` closed.
  void Release(std::string_view address, int64_t now_ms);
  // An authentication failure from `address`; returns the back-off it
  // started in milliseconds (0: none yet).
  int64_t AuthFailed(std::string_view address, int64_t now_ms);
  // A success forgives the address's failures.
  void AuthSucceeded(std::string_view address, int64_t now_ms);

  size_t size() const { return entries_.size(); }
  const AddressLimitSettings& settings() const { return settings_; }
  // A configuration reload (docs/configuration.md "Reload"): the new cap
  // and rate apply from now on to every address, counts of open
  // connections kept; each address's rate bucket starts full at the new rate.
  void SetConnectionLimits(uint32_t max_connections_per_address, double connect_rate_per_address, int64_t now_ms);
  // Open connections counted for `address` (tests, diagnostics).
  uint32_t open(std::string_view address) const;

 private:
  struct Entry {
    uint32_t open = 0;
    base::TokenBucket connects;
    uint32_t failures = 0;
    int64_t last_failure_ms = 0;
    int64_t blocked_until_ms = 0;
    std::list<std::string>::iterator lru;  // position in lru_ (front: most recent)
  };
  bool Idle(Entry& entry, int64_t now_ms) const;
  void ExpireIdle(int64_t now_ms);
  // The entry for `address`, made if missing; null when the table is full.
  Entry* Find(std::string_view address, int64_t now_ms, bool create);
  bool MakeRoom();
  void Touch(Entry& entry);
  void Erase(std::list<std::string>::iterator at);

  AddressLimitSettings settings_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // keys, most recently seen first
};

// The table's key for a client address "ip:port", "[ipv6]:port" or a bare
// IP: the IP for IPv4 (IPv4-mapped IPv6 included), the /64 prefix for IPv6
// (one host usually holds a whole /64). "" for text that is no address.
std::string AddressKey(std::string_view address);

}  // namespace estuary::security
