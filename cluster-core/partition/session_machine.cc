#include "cluster-core/partition/session_machine.h"

#include <set>

#include "base/bytes.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::partition {

namespace {

constexpr uint8_t kWriteTag = 0x30;
constexpr uint8_t kFencedWriteTag = 0x31;
constexpr uint8_t kLoadTag = 0x30;
constexpr uint8_t kOwnedTag = 0x31;
constexpr uint8_t kSnapshotVersion = 1;
constexpr char kSessionKeyTags[] = {core::store::kSessionTag, core::store::kSubscriptionTag,
                                    core::store::kQueuedTag, core::store::kInflightTag,
                                    core::store::kInboundTag};

bool IsSessionKeyTag(char tag) {
  for (char t : kSessionKeyTags) {
    if (t == tag) return true;
  }
  return false;
}

std::string_view View(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

std::string EncodeSessionWrite(const SessionWrite& write) {
  base::LittleEndianWriter out;
  out.U8(write.fenced ? kFencedWriteTag : kWriteTag);
  out.U32(write.node);
  out.U64(write.boot);
  out.U32(static_cast<uint32_t>(write.ops.size()));
  for (const SessionOp& op : write.ops) {
    out.U8(op.kind);
    if (write.fenced) out.U64(op.fence);
    out.Bytes(op.key);
    if (op.kind == SessionOp::kPut) out.Bytes(op.value);
  }
  return out.Take();
}

std::optional<SessionWrite> DecodeSessionWrite(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  const uint8_t tag = in.U8();
  if (tag != kWriteTag && tag != kFencedWriteTag) return std::nullopt;
  SessionWrite write;
  write.fenced = tag == kFencedWriteTag;
  const uint32_t node = in.U32();
  if (node == 0 || node > 0xFFFF) return std::nullopt;
  write.node = static_cast<NodeId>(node);
  write.boot = in.U64();
  const uint32_t count = in.Count(5);
  write.ops.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    SessionOp op;
    const uint8_t kind = in.U8();
    if (kind > SessionOp::kWipe) in.Fail();
    op.kind = static_cast<SessionOp::Kind>(kind);
    if (write.fenced) op.fence = in.U64();
    op.key = std::string(in.Bytes());
    if (op.kind == SessionOp::kPut) op.value = std::string(in.Bytes());
    write.ops.push_back(std::move(op));
  }
  if (!in.done()) return std::nullopt;
  return write;
}

std::string EncodeSessionsOwnedBy(NodeId node) {
  base::LittleEndianWriter out;
  out.U8(kOwnedTag);
  out.U32(node);
  return out.Take();
}

std::optional<std::vector<std::string>> DecodeClientList(std::string_view bytes) {
  return DecodeSessionWriteResult(bytes);
}

std::optional<SessionWriteResult> DecodeSessionWriteOutcome(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  SessionWriteResult result;
  const uint32_t count = in.Count(4);
  for (uint32_t i = 0; i < count && in.ok(); ++i) result.refused.emplace_back(in.Bytes());
  if (in.ok() && !in.done()) result.stale = in.U32();
  if (!in.done()) return std::nullopt;
  return result;
}

std::optional<std::vector<std::string>> DecodeSessionWriteResult(std::string_view bytes) {
  auto result = DecodeSessionWriteOutcome(bytes);
  if (!result) return std::nullopt;
  return std::move(result->refused);
}

std::string EncodeSessionLoad(std::string_view client_id) {
  base::LittleEndianWriter out;
  out.U8(kLoadTag);
  out.Bytes(client_id);
  return out.Take();
}

std::optional<std::vector<std::pair<std::string, std::string>>> DecodeSessionLoadResult(std::string_view bytes) {
  base::LittleEndianReader in(bytes);
  std::vector<std::pair<std::string, std::string>> keys;
  const uint32_t count = in.Count(8);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    std::string key(in.Bytes());
    std::string value(in.Bytes());
    keys.emplace_back(std::move(key), std::move(value));
  }
  if (!in.done()) return std::nullopt;
  return keys;
}

std::optional<std::string> ClientOfSessionOp(const SessionOp& op) {
  if (op.kind == SessionOp::kWipe) return op.key;
  if (op.key.empty() || !IsSessionKeyTag(op.key.front())) return std::nullopt;
  auto parsed = core::store::ParseSessionKey(op.key);
  if (!parsed) return std::nullopt;
  return std::move(parsed->client_id);
}

std::string SessionMachine::Apply(const raft::Entry& entry) {
  auto write = DecodeSessionWrite(View(entry.data));
  if (!write) {
    ++malformed_;
    return {};
  }
  uint32_t stale = 0;
  const std::vector<std::string> refused = ApplyWrite(*write, &stale);
  base::LittleEndianWriter out;
  out.U32(static_cast<uint32_t>(refused.size()));
  for (const std::string& client : refused) out.Bytes(client);
  if (write->fenced) out.U32(stale);
  return out.Take();
}

bool SessionMachine::UnderFence(const std::string& client, NodeId node, uint64_t boot, uint64_t fence) const {
  auto found = registry_.fences().find(client);
  if (fence == 0) {
    // A copy without a fence: replaced once this boot of the node claimed
    // the id for a copy of its own.
    return found == registry_.fences().end() || found->second.node != node || found->second.boot != boot;
  }
  return found != registry_.fences().end() && found->second == ClientOwner{node, boot, fence};
}

std::vector<std::string> SessionMachine::ApplyWrite(const SessionWrite& write, uint32_t* stale) {
  // First the decision per client: owned by the writer, or owned by nobody
  // and only deleted.
  std::map<std::string, bool, std::less<>> allowed;
  std::set<std::string, std::less<>> puts;
  std::vector<std::optional<std::string>> clients;
  clients.reserve(write.ops.size());
  for (const SessionOp& op : write.ops) {
    clients.push_back(ClientOfSessionOp(op));
    if (!clients.back()) continue;
    if (op.kind == SessionOp::kPut) puts.insert(*clients.back());
    allowed.try_emplace(*clients.back(), false);
  }
  std::vector<std::string> refused;
  for (auto& [client, ok] : allowed) {
    auto owner = registry_.owners().find(client);
    if (owner != registry_.owners().end()) {
      // The node, whatever its boot: a restarted node serves the sessions it
      // recovered from its own store until another node claims them.
      ok = owner->second.node == write.node;
    } else {
      ok = puts.count(client) == 0;
    }
    if (!ok) {
      ++refused_;
      refused.push_back(client);
    }
  }
  for (size_t i = 0; i < write.ops.size(); ++i) {
    const SessionOp& op = write.ops[i];
    if (!clients[i]) {
      ++malformed_;
      continue;
    }
    if (!allowed.at(*clients[i])) continue;
    if (write.fenced && registry_.owners().count(*clients[i]) != 0 &&
        !UnderFence(*clients[i], write.node, write.boot, op.fence)) {
      ++stale_;
      if (stale != nullptr) ++*stale;
      continue;
    }
    switch (op.kind) {
      case SessionOp::kDelete:
        keys_.erase(op.key);
        break;
      case SessionOp::kPut:
        keys_.insert_or_assign(op.key, op.value);
        break;
      case SessionOp::kWipe:
        Drop(op.key);
        break;
    }
  }
  return refused;
}

void SessionMachine::Drop(std::string_view client_id) {
  for (char tag : kSessionKeyTags) {
    const std::string prefix = core::store::SessionPrefix(tag, client_id);
    auto first = keys_.lower_bound(prefix);
    auto last = first;
    while (last != keys_.end() && last->first.compare(0, prefix.size(), prefix) == 0) ++last;
    keys_.erase(first, last);
  }
}

std::string SessionMachine::Query(std::string_view query) const {
  base::LittleEndianReader in(query);
  const uint8_t query_tag = in.U8();
  if (query_tag == kOwnedTag) {
    const uint32_t node = in.U32();
    if (!in.done()) return {};
    std::vector<std::string_view> owned;
    for (const auto& [client, owner] : registry_.owners()) {
      if (owner.node == node && keys_.count(core::store::SessionKey(client)) != 0) owned.push_back(client);
    }
    base::LittleEndianWriter out;
    out.U32(static_cast<uint32_t>(owned.size()));
    for (std::string_view client : owned) out.Bytes(client);
    return out.Take();
  }
  if (query_tag != kLoadTag) return {};
  const std::string client(in.Bytes());
  if (!in.done()) return {};
  std::vector<std::pair<std::string_view, std::string_view>> found;
  for (char tag : kSessionKeyTags) {
    const std::string prefix = core::store::SessionPrefix(tag, client);
    for (auto it = keys_.lower_bound(prefix);
         it != keys_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      found.emplace_back(it->first, it->second);
    }
  }
  base::LittleEndianWriter out;
  out.U32(static_cast<uint32_t>(found.size()));
  for (const auto& [key, value] : found) {
    out.Bytes(key);
    out.Bytes(value);
  }
  return out.Take();
}

std::vector<uint8_t> SessionMachine::Snapshot() const {
  base::LittleEndianWriter out;
  out.U8(kSnapshotVersion);
  out.U32(static_cast<uint32_t>(keys_.size()));
  for (const auto& [key, value] : keys_) {
    out.Bytes(key);
    out.Bytes(value);
  }
  std::string bytes = out.Take();
  return {bytes.begin(), bytes.end()};
}

bool SessionMachine::Restore(const std::vector<uint8_t>& data) {
  if (data.empty()) {
    keys_.clear();
    return true;
  }
  base::LittleEndianReader in(View(data));
  if (in.U8() != kSnapshotVersion) return false;
  std::map<std::string, std::string, std::less<>> keys;
  const uint32_t count = in.Count(8);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    std::string key(in.Bytes());
    keys.insert_or_assign(std::move(key), std::string(in.Bytes()));
  }
  if (!in.done()) return false;
  keys_ = std::move(keys);
  return true;
}

}  // namespace estuary::partition
