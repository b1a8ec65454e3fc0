#include "security/acl_store.h"

namespace estuary::security {

Expected<std::unique_ptr<AclStore>, std::string> AclStore::Load(const std::string& path) {
  auto acl = Acl::Load(path);
  if (!acl) return MakeError(acl.error());
  return std::make_unique<AclStore>(std::move(*acl));
}

Expected<void, std::string> AclStore::Reload(const std::string& path) {
  auto acl = Acl::Load(path);
  if (!acl) return MakeError(acl.error());
  std::lock_guard lock(mutex_);
  acl_ = std::move(*acl);
  generation_.fetch_add(1, std::memory_order_release);
  return {};
}

std::shared_ptr<const Acl> AclStore::current() const {
  std::lock_guard lock(mutex_);
  return acl_;
}

AclClient::AclClient(const AclStore& store, std::string client_id, std::optional<std::string> username)
    : store_(store), client_id_(std::move(client_id)), username_(std::move(username)) {
  Refresh();
}

void AclClient::Refresh() {
  // The generation first: a reload between the two reads is seen next time.
  generation_ = store_.generation();
  acl_ = store_.current();
  cache_.clear();
  last_ = nullptr;
}

uint8_t AclClient::Bits(std::string_view topic) {
  if (store_.generation() != generation_) Refresh();
  // Most clients publish to, or receive, the same topic again and again:
  // comparing with the last one is cheaper than hashing it.
  if (last_ != nullptr && last_->first == topic) return last_->second;
  auto it = cache_.find(topic);
  if (it == cache_.end()) {
    const uint8_t bits = acl_->Decide(identity(), topic);
    if (cache_.size() >= kMaxCachedTopics) cache_.clear();
    it = cache_.emplace(std::string(topic), bits).first;
  }
  last_ = &*it;  // map nodes stay put until erased: cleared together with last_
  return it->second;
}

bool AclClient::MaySubscribe(std::string_view filter) {
  if (store_.generation() != generation_) Refresh();
  return acl_->MaySubscribe(identity(), filter);
}

}  // namespace estuary::security
