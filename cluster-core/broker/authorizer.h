#pragma once
// Authorizer: which topics a client may publish to and receive from, and
// which filters it may subscribe to (--acl-file, docs/security.md). Both
// frontends ask it for a ClientAccess once the client has authenticated;
// the broker keeps that on the client's Session and checks every delivery
// it offers the session (retained and shared ones included) and a will
// before it is published. No Authorizer (null) = everything is allowed.
//
// Threads: ForClient may be called from any shard at once. A ClientAccess
// belongs to the shard that owns the client's connection and session;
// implementations cache their decisions per topic (must not block).
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace estuary::core {

struct ClientIdentity {
  std::string client_id;                // MQTT client id; AMQP container-id
  std::optional<std::string> username;  // nullopt: anonymous
};

class ClientAccess {
 public:
  virtual ~ClientAccess() = default;
  virtual bool MayPublish(std::string_view topic) = 0;
  virtual bool MayReceive(std::string_view topic) = 0;
  // A SUBSCRIBE (or AMQP receiver source); deliveries are still checked.
  virtual bool MaySubscribe(std::string_view filter) = 0;
};

class Authorizer {
 public:
  virtual ~Authorizer() = default;
  virtual std::shared_ptr<ClientAccess> ForClient(const ClientIdentity& identity) = 0;
};

}  // namespace estuary::core
