#include "server/acl_authorizer.h"

namespace estuary::server {
namespace {

class AclClientAccess final : public core::ClientAccess {
 public:
  AclClientAccess(const security::AclStore& store, const core::ClientIdentity& identity)
      : client_(store, identity.client_id, identity.username) {}
  bool MayPublish(std::string_view topic) override { return client_.MayWrite(topic); }
  bool MayReceive(std::string_view topic) override { return client_.MayRead(topic); }
  bool MaySubscribe(std::string_view filter) override { return client_.MaySubscribe(filter); }

 private:
  security::AclClient client_;
};

}  // namespace

Expected<std::unique_ptr<AclAuthorizer>, std::string> AclAuthorizer::Load(const std::string& path) {
  auto store = security::AclStore::Load(path);
  if (!store) return MakeError(store.error());
  return std::make_unique<AclAuthorizer>(std::move(*store));
}

std::shared_ptr<core::ClientAccess> AclAuthorizer::ForClient(const core::ClientIdentity& identity) {
  return std::make_shared<AclClientAccess>(*store_, identity);
}

}  // namespace estuary::server
