#pragma once
// ConnectionGuard: a node's abuse limits on new client connections
// (docs/security.md "Abuse limits"): per source address, concurrent
// connections (--max-connections-per-ip), new connections per second
// (--connect-rate-per-ip) and a back-off after authentication failures
// (--auth-failures-before-backoff, --auth-backoff, --auth-backoff-max), the
// table of addresses bounded (security/address_limits.h); node-wide, the
// connections that have not finished their MQTT CONNECT or AMQP open
// (--max-pending-connections).
//
// A shard asks Admit at accept, before a TLS handshake, or once a
// balancer's PROXY v2 header named the client; a refused socket is closed
// at once by the caller. An admitted connection holds a Ticket, which
// travels with it to another shard; dropping its last copy releases the
// address's count (and the pending slot, if Established was not called).
//
// Thread-safe: every shard calls it (one mutex, taken only at accept, at
// close and on an authentication failure, and only when a limit is set:
// enabled() false means no call at all). Refusals are logged at warn at
// most once per 10 s per reason, with how many were not logged.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cluster-core/broker/authenticator.h"
#include "io/clock.h"
#include "security/address_limits.h"

namespace estuary::server {

struct ConnectionGuardSettings {
  security::AddressLimitSettings address;
  uint32_t max_pending = 0;  // connections before CONNECT/open, node-wide; 0: no cap
};

class ConnectionGuard {
 public:
  enum Reason : uint8_t { kPerIp, kRate, kAuthBackoff, kTableFull, kPending, kUnknownAddress, kReasons };

  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // The CONNECT (or AMQP open) arrived: no longer pending. Idempotent.
    void Established();
    const std::string& address() const { return address_; }

   private:
    friend class ConnectionGuard;
    Ticket(ConnectionGuard& guard, std::string address) : guard_(guard), address_(std::move(address)) {}
    ConnectionGuard& guard_;
    std::string address_;  // AddressKey; "" when not counted per address
    std::atomic<bool> pending_{true};
  };
  using TicketPtr = std::shared_ptr<Ticket>;

  ConnectionGuard(ConnectionGuardSettings settings, const io::Clock& clock);
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // False when no limit is set: the accept path then skips the guard.
  bool enabled() const { return enabled_; }
  bool per_address() const { return per_address_; }
  bool auth_backoff() const { return settings_.address.auth_backoff_ms > 0; }

  // A new connection from `client_address` ("ip:port" or "[ip]:port").
  // Null: refused (counted and logged); close the socket.
  TicketPtr Admit(const std::string& client_address);
  // A configuration reload (docs/configuration.md "Reload"): new caps from
  // now on; open connections are counted as before and none is closed.
  // The per-address ones apply only when per_address() (the guard counts
  // addresses only if a per-address limit was set at start).
  void SetLimits(uint32_t max_connections_per_ip, double connect_rate_per_ip, uint32_t max_pending);

  // The guard's view of an authentication result from `client_address`.
  void AuthFailed(const std::string& client_address);
  void AuthSucceeded(const std::string& client_address);

  // Prometheus text for /metrics (any thread).
  std::string MetricsText(uint16_t node_id) const;
  uint64_t refused(Reason reason) const { return refused_[reason].load(std::memory_order_relaxed); }
  uint64_t auth_failures() const { return auth_failures_.load(std::memory_order_relaxed); }
  uint64_t pending() const { return pending_.load(std::memory_order_relaxed); }

 private:
  void Refuse(Reason reason, const std::string& client_address);
  void Release(Ticket& ticket);

  const ConnectionGuardSettings settings_;  // as at start; the reloadable caps below
  std::atomic<uint32_t> max_pending_;
  const io::Clock& clock_;
  const bool per_address_;
  const bool enabled_;
  mutable std::mutex mutex_;  // guards addresses_ and the log throttle
  security::AddressLimits addresses_;
  int64_t last_logged_ms_[kReasons] = {};
  uint64_t unlogged_[kReasons] = {};
  std::atomic<uint64_t> refused_[kReasons] = {};
  std::atomic<uint64_t> auth_failures_{0};
  std::atomic<uint64_t> backoffs_{0};
  std::atomic<uint64_t> pending_{0};
  std::atomic<uint64_t> addresses_size_{0};
};

// The core::Authenticator the front ends ask when authentication back-off
// is on: the node's authenticator, each answer also told to the guard (a
// refusal only when a user name was given: anonymous clients guess nothing).
class GuardedAuthenticator final : public core::Authenticator {
 public:
  GuardedAuthenticator(core::Authenticator& inner, ConnectionGuard& guard) : inner_(inner), guard_(guard) {}
  core::AuthDecision Authenticate(const core::Credentials& credentials) override;
  std::vector<std::string> ExchangeMechanisms() const override { return inner_.ExchangeMechanisms(); }
  // The inner exchange, its end told to the guard (a failure is a guess).
  std::unique_ptr<core::AuthExchange> StartExchange(std::string_view mechanism,
                                                    const std::string& peer_address) override;

 private:
  core::Authenticator& inner_;
  ConnectionGuard& guard_;
};

}  // namespace estuary::server
