#pragma once
// AclStore: the node's current Acl, shared by every shard and replaced
// whole by Reload (SIGHUP). AclClient: one client's view of it, with its
// decisions cached per topic, so a file of 1,000 rules costs a hash lookup
// per publish and delivery once a topic has been seen.
//
// Threads: AclStore is thread-safe (a mutex for the pointer, an atomic
// generation). An AclClient belongs to the thread of its connection (a
// shard); it notices a reload by the generation, one atomic load per
// check, and then drops its cache and takes the new rules, so the next
// operation uses them.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/expected.h"
#include "security/acl.h"

namespace estuary::security {

class AclStore {
 public:
  explicit AclStore(std::shared_ptr<const Acl> acl) : acl_(std::move(acl)) {}
  static Expected<std::unique_ptr<AclStore>, std::string> Load(const std::string& path);

  // Replaces the rules with `path`'s; on an error the old ones stay.
  Expected<void, std::string> Reload(const std::string& path);

  std::shared_ptr<const Acl> current() const;
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const Acl> acl_;
  std::atomic<uint64_t> generation_{1};
};

class AclClient {
 public:
  // Topics remembered per client; the cache is emptied when it is full.
  static constexpr size_t kMaxCachedTopics = 4096;

  AclClient(const AclStore& store, std::string client_id, std::optional<std::string> username);

  bool MayRead(std::string_view topic) { return (Bits(topic) & kRead) != 0; }
  bool MayWrite(std::string_view topic) { return (Bits(topic) & kWrite) != 0; }
  bool MaySubscribe(std::string_view filter);

  const std::string& client_id() const { return client_id_; }
  const std::optional<std::string>& username() const { return username_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  uint8_t Bits(std::string_view topic);
  void Refresh();
  AclIdentity identity() const { return {client_id_, username_}; }

  const AclStore& store_;
  std::string client_id_;
  std::optional<std::string> username_;
  std::shared_ptr<const Acl> acl_;
  uint64_t generation_ = 0;
  std::unordered_map<std::string, uint8_t, StringHash, std::equal_to<>> cache_;
  const std::pair<const std::string, uint8_t>* last_ = nullptr;  // the last topic asked about, in cache_
};

}  // namespace estuary::security
