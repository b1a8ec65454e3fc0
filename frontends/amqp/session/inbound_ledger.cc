#include "frontends/amqp/session/inbound_ledger.h"

#include <spdlog/spdlog.h>

namespace estuary::amqp {
namespace {

std::string KeyOf(std::string_view container_id, std::string_view link_name) {
  // The container-id's length makes the split unambiguous, as in DurableSessionId.
  std::string key = std::to_string(container_id.size());
  key += ':';
  key += container_id;
  key += '/';
  key += link_name;
  return key;
}

}  // namespace

std::shared_ptr<InboundLinkRecord> InboundLedger::Attach(std::string_view container_id, std::string_view link_name,
                                                         std::weak_ptr<AmqpConnection> holder) {
  std::string key = KeyOf(container_id, link_name);
  auto& slot = records_[key];
  if (!slot) {
    slot = std::make_shared<InboundLinkRecord>();
    slot->key = std::move(key);
  } else if (!slot->attached) {
    suspended_.erase(slot->suspended_at);
  }
  // Attached again while attached elsewhere (the client's other connection
  // still open): the newest attach holds it, as a link of that name can be
  // attached once (§2.6.1).
  slot->attached = true;
  ++slot->generation;
  slot->holder = std::move(holder);
  return slot;
}

void InboundLedger::Detach(const std::shared_ptr<InboundLinkRecord>& record, uint64_t generation, bool closed) {
  auto it = records_.find(record->key);
  // Forgotten, detached already, or attached again since.
  if (it == records_.end() || it->second != record || !record->attached || record->generation != generation) return;
  record->attached = false;
  record->holder.reset();
  if (closed || record->tags.empty()) {
    // Every delivery settled (or the link ended): nothing to recover.
    record->tags.clear();
    records_.erase(it);
    return;
  }
  suspended_.push_back(record.get());
  record->suspended_at = std::prev(suspended_.end());
  while (suspended_.size() > max_suspended_) Forget(suspended_.front());
}

size_t InboundLedger::Kept(std::string_view container_id, std::string_view link_name) const {
  auto it = records_.find(KeyOf(container_id, link_name));
  return it == records_.end() ? 0 : it->second->tags.size();
}

void InboundLedger::Forget(InboundLinkRecord* record) {
  spdlog::info("amqp: exactly-once state of detached link '{}' forgotten ({} unsettled deliveries): more than {} "
               "links detached with unsettled deliveries on this shard",
               record->key, record->tags.size(), max_suspended_);
  ++forgotten_links_;
  suspended_.erase(record->suspended_at);
  record->tags.clear();
  const std::string key = record->key;
  records_.erase(key);  // last: frees `record` unless a link holds it
}

}  // namespace estuary::amqp
