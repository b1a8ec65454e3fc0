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
    slot->ledger = this;
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
  PublishSizes();
  return slot;
}

void InboundLedger::PublishSizes() {
  stats_.links.store(records_.size(), std::memory_order_relaxed);
  stats_.suspended.store(suspended_.size(), std::memory_order_relaxed);
}

void InboundLedger::Detach(const std::shared_ptr<InboundLinkRecord>& record, uint64_t generation, bool closed) {
  auto it = records_.find(record->key);
  // Forgotten, detached already, or attached again since.
  if (it == records_.end() || it->second != record || !record->attached || record->generation != generation) return;
  record->attached = false;
  record->holder.reset();
  if (closed || record->tags.empty()) {
    // Every delivery settled (or the link ended): nothing to recover.
    DropAll(*record);
    records_.erase(it);
    PublishSizes();
    return;
  }
  suspended_.push_back(record.get());
  record->suspended_at = std::prev(suspended_.end());
  while (suspended_.size() > max_suspended_) Forget(suspended_.front());
  PublishSizes();
}

size_t InboundLedger::Kept(std::string_view container_id, std::string_view link_name) const {
  auto it = records_.find(KeyOf(container_id, link_name));
  return it == records_.end() ? 0 : it->second->tags.size();
}

void InboundLedger::Forget(InboundLinkRecord* record) {
  spdlog::info("amqp: exactly-once state of detached link '{}' forgotten ({} unsettled deliveries): more than {} "
               "links detached with unsettled deliveries on this shard",
               record->key, record->tags.size(), max_suspended_);
  stats_.forgotten_links.fetch_add(1, std::memory_order_relaxed);
  suspended_.erase(record->suspended_at);
  DropAll(*record);
  const std::string key = record->key;
  records_.erase(key);  // last: frees `record` unless a link holds it
}

// Stored outcomes: key `a`, the record key's length (u32, big-endian),
// the record key, the delivery tag; value: `A` (accepted) or `R`, then for
// `R` the condition, a NUL and the description.
std::string InboundLedger::StoreKey(const InboundLinkRecord& record, const std::string& tag) const {
  std::string key(1, kKeyTag);
  const uint32_t size = static_cast<uint32_t>(record.key.size());
  for (int shift = 24; shift >= 0; shift -= 8) key += static_cast<char>((size >> shift) & 0xFF);
  key += record.key;
  key += tag;
  return key;
}

void InboundLedger::Keep(InboundLinkRecord& record, const std::string& tag, InboundOutcome outcome) {
  if (persistence_.put && outcome.kind != InboundOutcome::Kind::kPending) {
    std::string value(1, outcome.kind == InboundOutcome::Kind::kAccepted ? 'A' : 'R');
    if (outcome.kind == InboundOutcome::Kind::kRejected) {
      value += outcome.condition;
      value += '\0';
      value += outcome.description;
    }
    persistence_.put(StoreKey(record, tag), std::move(value));
  }
  const auto [it, added] = record.tags.insert_or_assign(tag, std::move(outcome));
  if (added) stats_.kept_tags.fetch_add(1, std::memory_order_relaxed);
}

void InboundLedger::Drop(InboundLinkRecord& record, const std::string& tag) {
  auto it = record.tags.find(tag);
  if (it == record.tags.end()) return;
  if (persistence_.erase && it->second.kind != InboundOutcome::Kind::kPending) persistence_.erase(StoreKey(record, tag));
  record.tags.erase(it);
  stats_.kept_tags.fetch_sub(1, std::memory_order_relaxed);
}

void InboundLedger::DropAll(InboundLinkRecord& record) {
  while (!record.tags.empty()) Drop(record, record.tags.begin()->first);
}

bool InboundLedger::Restore(std::string_view key, std::string_view value) {
  if (key.size() < 5 || key[0] != kKeyTag || value.empty()) return false;
  uint32_t size = 0;
  for (int i = 1; i <= 4; ++i) size = size << 8 | static_cast<uint8_t>(key[i]);
  if (key.size() < 5 + size_t{size}) return false;
  const std::string record_key(key.substr(5, size));
  const std::string tag(key.substr(5 + size));
  InboundOutcome outcome;
  if (value[0] == 'A' && value.size() == 1) {
    outcome.kind = InboundOutcome::Kind::kAccepted;
  } else if (value[0] == 'R') {
    outcome.kind = InboundOutcome::Kind::kRejected;
    const std::string_view rest = value.substr(1);
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) return false;
    outcome.condition = std::string(rest.substr(0, nul));
    outcome.description = std::string(rest.substr(nul + 1));
  } else {
    return false;
  }
  auto& slot = records_[record_key];
  if (!slot) {
    slot = std::make_shared<InboundLinkRecord>();
    slot->ledger = this;
    slot->key = record_key;
    suspended_.push_back(slot.get());
    slot->suspended_at = std::prev(suspended_.end());
  }
  if (slot->tags.insert_or_assign(tag, std::move(outcome)).second) {
    stats_.kept_tags.fetch_add(1, std::memory_order_relaxed);
  }
  while (suspended_.size() > max_suspended_) Forget(suspended_.front());
  PublishSizes();
  return true;
}

}  // namespace estuary::amqp
