#include "server/connection_guard.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace estuary::server {
namespace {

constexpr int64_t kLogIntervalMs = 10'000;

struct ReasonInfo {
  const char* label;  // the metric's reason="..."
  const char* why;    // for the log line
};
constexpr ReasonInfo kReasonInfo[ConnectionGuard::kReasons] = {
    {"per_ip", "--max-connections-per-ip reached"},
    {"rate", "--connect-rate-per-ip exceeded"},
    {"auth_backoff", "in back-off after authentication failures"},
    {"table_full", "the address table is full of addresses with open connections"},
    {"pending", "--max-pending-connections reached"},
    {"unknown_address", "its address could not be read"},
};

}  // namespace

ConnectionGuard::ConnectionGuard(ConnectionGuardSettings settings, const io::Clock& clock)
    : settings_(settings),
      max_pending_(settings.max_pending),
      clock_(clock),
      per_address_(settings.address.max_connections_per_address != 0 || settings.address.connect_rate_per_address > 0 ||
                   settings.address.auth_backoff_ms > 0),
      enabled_(per_address_ || settings.max_pending != 0),
      addresses_(settings.address) {}

ConnectionGuard::Ticket::~Ticket() { guard_.Release(*this); }

void ConnectionGuard::Ticket::Established() {
  if (pending_.exchange(false)) guard_.pending_.fetch_sub(1, std::memory_order_relaxed);
}

ConnectionGuard::TicketPtr ConnectionGuard::Admit(const std::string& client_address) {
  std::string key;
  if (per_address_) {
    key = security::AddressKey(client_address);
    if (key.empty()) {
      Refuse(kUnknownAddress, client_address);
      return nullptr;
    }
  }
  // The pending slot first, without the lock: refused before the table is touched.
  const uint64_t pending_before = pending_.fetch_add(1, std::memory_order_relaxed);
  const uint32_t max_pending = max_pending_.load(std::memory_order_relaxed);
  if (max_pending != 0 && pending_before >= max_pending) {
    pending_.fetch_sub(1, std::memory_order_relaxed);
    Refuse(kPending, client_address);
    return nullptr;
  }
  if (per_address_) {
    security::AddressLimits::Verdict verdict;
    {
      std::lock_guard lock(mutex_);
      verdict = addresses_.Admit(key, clock_.NowMs());
      addresses_size_.store(addresses_.size(), std::memory_order_relaxed);
    }
    using Verdict = security::AddressLimits::Verdict;
    if (verdict != Verdict::kAdmit) {
      pending_.fetch_sub(1, std::memory_order_relaxed);
      Refuse(verdict == Verdict::kTooManyConnections ? kPerIp
             : verdict == Verdict::kConnectRate      ? kRate
             : verdict == Verdict::kAuthBackoff      ? kAuthBackoff
                                                     : kTableFull,
             client_address);
      return nullptr;
    }
  }
  return TicketPtr(new Ticket(*this, std::move(key)));
}

void ConnectionGuard::SetLimits(uint32_t max_connections_per_ip, double connect_rate_per_ip, uint32_t max_pending) {
  max_pending_.store(max_pending, std::memory_order_relaxed);
  if (!per_address_) return;
  std::lock_guard lock(mutex_);
  addresses_.SetConnectionLimits(max_connections_per_ip, connect_rate_per_ip, clock_.NowMs());
}

void ConnectionGuard::Release(Ticket& ticket) {
  ticket.Established();
  if (ticket.address_.empty()) return;
  std::lock_guard lock(mutex_);
  addresses_.Release(ticket.address_, clock_.NowMs());
  addresses_size_.store(addresses_.size(), std::memory_order_relaxed);
}

void ConnectionGuard::Refuse(Reason reason, const std::string& client_address) {
  refused_[reason].fetch_add(1, std::memory_order_relaxed);
  const int64_t now = clock_.NowMs();
  uint64_t unlogged = 0;
  {
    std::lock_guard lock(mutex_);
    if (last_logged_ms_[reason] != 0 && now - last_logged_ms_[reason] < kLogIntervalMs) {
      ++unlogged_[reason];
      return;
    }
    last_logged_ms_[reason] = now;
    unlogged = unlogged_[reason];
    unlogged_[reason] = 0;
  }
  spdlog::warn("limits: connection from {} refused: {} ({} more refused for this reason since the last such line)",
               client_address, kReasonInfo[reason].why, unlogged);
}

void ConnectionGuard::AuthFailed(const std::string& client_address) {
  auth_failures_.fetch_add(1, std::memory_order_relaxed);
  if (settings_.address.auth_backoff_ms <= 0) return;
  const std::string key = security::AddressKey(client_address);
  if (key.empty()) return;
  int64_t backoff = 0;
  {
    std::lock_guard lock(mutex_);
    backoff = addresses_.AuthFailed(key, clock_.NowMs());
    addresses_size_.store(addresses_.size(), std::memory_order_relaxed);
  }
  if (backoff > 0) {
    backoffs_.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("limits: authentication failed again from {}: its new connections are refused for {} ms", key,
                 backoff);
  }
}

void ConnectionGuard::AuthSucceeded(const std::string& client_address) {
  if (settings_.address.auth_backoff_ms <= 0) return;
  const std::string key = security::AddressKey(client_address);
  if (key.empty()) return;
  std::lock_guard lock(mutex_);
  addresses_.AuthSucceeded(key, clock_.NowMs());
}

std::string ConnectionGuard::MetricsText(uint16_t node_id) const {
  std::string out =
      "# HELP estuary_connections_refused_total Client connections closed at accept by an abuse limit "
      "(docs/security.md \"Abuse limits\").\n# TYPE estuary_connections_refused_total counter\n";
  for (int reason = 0; reason < kReasons; ++reason) {
    fmt::format_to(std::back_inserter(out), "estuary_connections_refused_total{{node=\"{}\",reason=\"{}\"}} {}\n",
                   node_id, kReasonInfo[reason].label, refused_[reason].load(std::memory_order_relaxed));
  }
  fmt::format_to(std::back_inserter(out),
                 "# HELP estuary_auth_failures_total Authentication failures (MQTT CONNECT, AMQP SASL).\n"
                 "# TYPE estuary_auth_failures_total counter\nestuary_auth_failures_total{{node=\"{}\"}} {}\n"
                 "# HELP estuary_auth_backoffs_total Authentication back-offs started for an address.\n"
                 "# TYPE estuary_auth_backoffs_total counter\nestuary_auth_backoffs_total{{node=\"{}\"}} {}\n"
                 "# HELP estuary_pending_connections Connections accepted that have not finished their MQTT "
                 "CONNECT or AMQP open (TLS handshakes included).\n"
                 "# TYPE estuary_pending_connections gauge\nestuary_pending_connections{{node=\"{}\"}} {}\n"
                 "# HELP estuary_limited_addresses Source addresses in the abuse limits' table.\n"
                 "# TYPE estuary_limited_addresses gauge\nestuary_limited_addresses{{node=\"{}\"}} {}\n",
                 node_id, auth_failures_.load(std::memory_order_relaxed), node_id,
                 backoffs_.load(std::memory_order_relaxed), node_id, pending_.load(std::memory_order_relaxed),
                 node_id, addresses_size_.load(std::memory_order_relaxed));
  return out;
}

core::AuthDecision GuardedAuthenticator::Authenticate(const core::Credentials& credentials) {
  const core::AuthDecision decision = inner_.Authenticate(credentials);
  if (decision == core::AuthDecision::kAllow) {
    guard_.AuthSucceeded(credentials.peer_address);
  } else if (credentials.username) {
    // A guess: a user name with a wrong or no password. An anonymous
    // client refused guesses nothing and is not counted.
    guard_.AuthFailed(credentials.peer_address);
  }
  return decision;
}

namespace {

class GuardedExchange final : public core::AuthExchange {
 public:
  GuardedExchange(std::unique_ptr<core::AuthExchange> inner, ConnectionGuard& guard, std::string peer_address)
      : inner_(std::move(inner)), guard_(guard), peer_address_(std::move(peer_address)) {}

  core::AuthStep Respond(std::string_view client_data) override {
    core::AuthStep step = inner_->Respond(client_data);
    if (step.kind == core::AuthStep::Kind::kSucceeded) guard_.AuthSucceeded(peer_address_);
    if (step.kind == core::AuthStep::Kind::kFailed) guard_.AuthFailed(peer_address_);
    return step;
  }

 private:
  std::unique_ptr<core::AuthExchange> inner_;
  ConnectionGuard& guard_;
  std::string peer_address_;
};

}  // namespace

std::unique_ptr<core::AuthExchange> GuardedAuthenticator::StartExchange(std::string_view mechanism,
                                                                        const std::string& peer_address) {
  auto inner = inner_.StartExchange(mechanism, peer_address);
  if (!inner) return nullptr;
  return std::make_unique<GuardedExchange>(std::move(inner), guard_, peer_address);
}

}  // namespace estuary::server
