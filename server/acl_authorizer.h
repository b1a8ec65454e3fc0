#pragma once
// AclAuthorizer: --acl-file, topic rights in Mosquitto's acl_file format
// (security/acl.h), for both frontends and the broker (core::Authorizer).
// Each client gets a security::AclClient, which caches its decisions per
// topic and picks up a Reload (SIGHUP) at its next check. Thread-safe.
#include <memory>
#include <string>

#include "base/expected.h"
#include "cluster-core/broker/authorizer.h"
#include "security/acl_store.h"

namespace estuary::server {

class AclAuthorizer final : public core::Authorizer {
 public:
  explicit AclAuthorizer(std::unique_ptr<security::AclStore> store) : store_(std::move(store)) {}
  // The error names the file and the line.
  static Expected<std::unique_ptr<AclAuthorizer>, std::string> Load(const std::string& path);
  // New operations of every client use `path`'s rules; on an error the old ones stay.
  Expected<void, std::string> Reload(const std::string& path) { return store_->Reload(path); }
  std::shared_ptr<core::ClientAccess> ForClient(const core::ClientIdentity& identity) override;
  size_t rule_count() const { return store_->current()->rule_count(); }

 private:
  std::unique_ptr<security::AclStore> store_;
};

}  // namespace estuary::server
