#include "balancer/heartbeat_auth.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace estuary::balancer {
namespace {

constexpr size_t kMacBytes = 32;

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not what Seal() writes: a bad MAC
}

std::array<unsigned char, kMacBytes> RawMac(std::string_view secret, std::string_view bytes) {
  std::array<unsigned char, kMacBytes> mac{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), mac.data(), &length);
  return mac;
}

}  // namespace

const char* ToString(HeartbeatReject reason) {
  switch (reason) {
    case HeartbeatReject::kUnauthenticated: return "unauthenticated";
    case HeartbeatReject::kBadMac: return "bad_mac";
    case HeartbeatReject::kMalformed: return "malformed";
    case HeartbeatReject::kStale: return "stale";
    case HeartbeatReject::kReplay: return "replay";
  }
  return "unknown";
}

std::string HeartbeatMac(std::string_view secret, std::string_view bytes) {
  const auto mac = RawMac(secret, bytes);
  return Hex(mac.data(), mac.size());
}

std::string NewBootId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) throw std::runtime_error("RAND_bytes failed");
  return Hex(bytes, sizeof(bytes));
}

HeartbeatAuth::HeartbeatAuth(std::string secret, std::string boot_id, HeartbeatAuthOptions options)
    : secret_(std::move(secret)), boot_id_(std::move(boot_id)), options_(options) {}

std::string HeartbeatAuth::Seal(Heartbeat heartbeat, int64_t wall_ms) {
  heartbeat.boot = boot_id_;
  heartbeat.seq = ++seq_;
  heartbeat.sent_ms = wall_ms;
  std::string bytes = EncodeHeartbeat(heartbeat);
  const std::string mac = HeartbeatMac(secret_, bytes);
  bytes.push_back('\n');
  bytes += mac;
  return bytes;
}

Expected<Heartbeat, Rejected> HeartbeatAuth::Open(std::string_view datagram, int64_t wall_ms) {
  auto reject = [](HeartbeatReject reason, std::string detail) { return MakeError(Rejected{reason, std::move(detail)}); };
  const size_t newline = datagram.rfind('\n');
  if (newline == std::string_view::npos) return reject(HeartbeatReject::kUnauthenticated, "no MAC");
  const std::string_view body = datagram.substr(0, newline);
  const std::string_view tag = datagram.substr(newline + 1);
  if (tag.size() != kMacBytes * 2) return reject(HeartbeatReject::kBadMac, "MAC of the wrong length");
  std::array<unsigned char, kMacBytes> claimed{};
  for (size_t i = 0; i < kMacBytes; ++i) {
    const int high = HexDigit(tag[2 * i]);
    const int low = HexDigit(tag[2 * i + 1]);
    if (high < 0 || low < 0) return reject(HeartbeatReject::kBadMac, "MAC is not hex");
    claimed[i] = static_cast<unsigned char>(high << 4 | low);
  }
  const auto expected = RawMac(secret_, body);
  if (CRYPTO_memcmp(claimed.data(), expected.data(), kMacBytes) != 0) {
    return reject(HeartbeatReject::kBadMac, "MAC does not match (wrong secret or altered bytes)");
  }
  auto heartbeat = DecodeHeartbeat(body);
  if (!heartbeat) return reject(HeartbeatReject::kMalformed, heartbeat.error());
  if (heartbeat->boot.empty() || heartbeat->seq == 0) return reject(HeartbeatReject::kMalformed, "no boot or seq");
  const int64_t age = wall_ms - heartbeat->sent_ms;
  if (age > options_.max_age_ms || age < -options_.max_age_ms) {
    return reject(HeartbeatReject::kStale,
                  fmt::format("sent {} ms ago by this clock, outside the {} ms window: are the clocks synchronised?",
                              age, options_.max_age_ms));
  }
  Forget(wall_ms);
  auto known = boots_.find(heartbeat->boot);
  if (known != boots_.end() && heartbeat->seq <= known->second.seq) {
    return reject(HeartbeatReject::kReplay,
                  fmt::format("seq {} not above {} for boot {}", heartbeat->seq, known->second.seq, heartbeat->boot));
  }
  if (known == boots_.end() && boots_.size() >= options_.max_boots) {
    // Only the secret's holders add boots; drop the one heard from longest ago.
    auto oldest = std::min_element(boots_.begin(), boots_.end(),
                                   [](const auto& a, const auto& b) { return a.second.sent_ms < b.second.sent_ms; });
    boots_.erase(oldest);
  }
  Seen& seen = boots_[heartbeat->boot];
  seen.seq = heartbeat->seq;
  seen.sent_ms = std::max(seen.sent_ms, heartbeat->sent_ms);
  return std::move(*heartbeat);
}

// A boot whose last heartbeat left the window can be forgotten: anything
// recorded from it is refused as stale.
void HeartbeatAuth::Forget(int64_t wall_ms) {
  for (auto it = boots_.begin(); it != boots_.end();) {
    if (wall_ms - it->second.sent_ms > options_.max_age_ms) {
      it = boots_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace estuary::balancer
