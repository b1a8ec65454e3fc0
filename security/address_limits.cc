#include "security/address_limits.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace estuary::security {
namespace {

// How many least recently seen entries one call looks at, to expire or to
// evict: constant work per connection whatever the table holds.
constexpr int kExpirePerCall = 2;
constexpr int kEvictScan = 8;

}  // namespace

AddressLimits::AddressLimits(AddressLimitSettings settings) : settings_(settings) {
  settings_.max_addresses = std::max<size_t>(settings_.max_addresses, 1);
}

bool AddressLimits::Idle(Entry& entry, int64_t now_ms) const {
  if (entry.open > 0 || now_ms < entry.blocked_until_ms) return false;
  if (entry.failures > 0 && now_ms - entry.last_failure_ms < settings_.failure_memory_ms) return false;
  return entry.connects.Full(now_ms);
}

void AddressLimits::Erase(std::list<std::string>::iterator at) {
  entries_.erase(*at);
  lru_.erase(at);
}

void AddressLimits::ExpireIdle(int64_t now_ms) {
  for (int i = 0; i < kExpirePerCall && !lru_.empty(); ++i) {
    auto last = std::prev(lru_.end());
    Entry& entry = entries_.find(*last)->second;
    if (!Idle(entry, now_ms)) return;
    Erase(last);
  }
}

bool AddressLimits::MakeRoom() {
  // The least recently seen entry without open connections goes: its rate
  // and failure state are lost, never a count of open sockets.
  auto at = lru_.end();
  for (int i = 0; i < kEvictScan && at != lru_.begin(); ++i) {
    --at;
    if (entries_.find(*at)->second.open == 0) {
      Erase(at);
      return true;
    }
  }
  return false;
}

void AddressLimits::Touch(Entry& entry) { lru_.splice(lru_.begin(), lru_, entry.lru); }

AddressLimits::Entry* AddressLimits::Find(std::string_view address, int64_t now_ms, bool create) {
  ExpireIdle(now_ms);
  auto it = entries_.find(std::string(address));
  if (it != entries_.end()) {
    Touch(it->second);
    return &it->second;
  }
  if (!create) return nullptr;
  if (entries_.size() >= settings_.max_addresses && !MakeRoom()) return nullptr;
  lru_.emplace_front(address);
  Entry& entry = entries_[lru_.front()];
  entry.lru = lru_.begin();
  if (settings_.connect_rate_per_address > 0) {
    entry.connects = base::TokenBucket(settings_.connect_rate_per_address,
                                       std::max(1.0, settings_.connect_rate_per_address), now_ms);
  }
  return &entry;
}

AddressLimits::Verdict AddressLimits::Admit(std::string_view address, int64_t now_ms) {
  Entry* entry = Find(address, now_ms, /*create=*/true);
  if (entry == nullptr) return Verdict::kTableFull;
  if (now_ms < entry->blocked_until_ms) return Verdict::kAuthBackoff;
  const uint32_t cap = settings_.max_connections_per_address;
  if (cap != 0 && entry->open >= cap) return Verdict::kTooManyConnections;
  // A refused attempt spends nothing: a flood at the concurrency cap does
  // not also starve the address's rate.
  if (!entry->connects.TryTake(now_ms)) return Verdict::kConnectRate;
  ++entry->open;
  return Verdict::kAdmit;
}

void AddressLimits::Release(std::string_view address, int64_t now_ms) {
  Entry* entry = Find(address, now_ms, /*create=*/false);
  if (entry != nullptr && entry->open > 0) --entry->open;
}

int64_t AddressLimits::AuthFailed(std::string_view address, int64_t now_ms) {
  if (settings_.auth_backoff_ms <= 0) return 0;
  Entry* entry = Find(address, now_ms, /*create=*/true);
  if (entry == nullptr) return 0;
  if (entry->failures > 0 && now_ms - entry->last_failure_ms >= settings_.failure_memory_ms) entry->failures = 0;
  ++entry->failures;
  entry->last_failure_ms = now_ms;
  if (entry->failures <= settings_.auth_failures_before_backoff) return 0;
  const uint32_t doublings = std::min<uint32_t>(entry->failures - settings_.auth_failures_before_backoff - 1, 30);
  const int64_t backoff = std::min(settings_.auth_backoff_max_ms, settings_.auth_backoff_ms << doublings);
  entry->blocked_until_ms = std::max(entry->blocked_until_ms, now_ms + backoff);
  return backoff;
}

void AddressLimits::AuthSucceeded(std::string_view address, int64_t now_ms) {
  Entry* entry = Find(address, now_ms, /*create=*/false);
  if (entry != nullptr) entry->failures = 0;
}

void AddressLimits::SetConnectionLimits(uint32_t max_connections_per_address, double connect_rate_per_address,
                                        int64_t now_ms) {
  settings_.max_connections_per_address = max_connections_per_address;
  settings_.connect_rate_per_address = connect_rate_per_address;
  for (auto& [address, entry] : entries_) {
    entry.connects = connect_rate_per_address > 0
                         ? base::TokenBucket(connect_rate_per_address, std::max(1.0, connect_rate_per_address), now_ms)
                         : base::TokenBucket();
  }
}

uint32_t AddressLimits::open(std::string_view address) const {
  auto it = entries_.find(std::string(address));
  return it == entries_.end() ? 0 : it->second.open;
}

std::string AddressKey(std::string_view address) {
  std::string host(address);
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? std::string::npos : host.find(']') - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host.resize(host.find(':'));  // "ip:port"
  }
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return host;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return {};
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char text[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(v6.s6_addr, kMapped, sizeof(kMapped)) == 0) {
    inet_ntop(AF_INET, v6.s6_addr + 12, text, sizeof(text));
    return text;
  }
  std::memset(v6.s6_addr + 8, 0, 8);
  inet_ntop(AF_INET6, &v6, text, sizeof(text));
  return std::string(text) + "/64";
}

}  // namespace estuary::security
