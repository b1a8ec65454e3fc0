#include "cluster-core/meta/raft_codec.h"

#include <memory>
#include <utility>

namespace estuary::meta {

namespace {

constexpr size_t kEntryMinBytes = 8 * 5 + 1 + 4;
constexpr size_t kDedupBytes = 24;

void PutEntry(ByteWriter& out, const raft::Entry& entry) {
  out.U64(entry.term);
  out.U64(entry.index);
  out.U64(entry.timestamp);
  out.U8(static_cast<uint8_t>(entry.type));
  out.U64(entry.write_id.producer);
  out.U64(entry.write_id.sequence);
  out.Bytes(entry.data);
}

raft::Entry GetEntry(ByteReader& in) {
  raft::Entry entry;
  entry.term = in.U64();
  entry.index = in.U64();
  entry.timestamp = in.U64();
  const uint8_t type = in.U8();
  if (type > static_cast<uint8_t>(raft::EntryType::kNoop)) in.Fail();
  entry.type = static_cast<raft::EntryType>(type);
  entry.write_id.producer = in.U64();
  entry.write_id.sequence = in.U64();
  entry.data = in.ByteVector();
  return entry;
}

void PutIds(ByteWriter& out, const std::vector<raft::NodeId>& ids) {
  out.U32(static_cast<uint32_t>(ids.size()));
  for (raft::NodeId id : ids) out.U64(id);
}

std::vector<raft::NodeId> GetIds(ByteReader& in) {
  const uint32_t count = in.Count(8);
  std::vector<raft::NodeId> ids;
  ids.reserve(count);
  for (uint32_t i = 0; i < count; ++i) ids.push_back(in.U64());
  return ids;
}

void PutSnapshotMeta(ByteWriter& out, const raft::Snapshot& snapshot) {
  out.U64(snapshot.index);
  out.U64(snapshot.term);
  out.U64(snapshot.timestamp);
  PutIds(out, snapshot.config.voters);
  PutIds(out, snapshot.config.learners);
  out.U32(static_cast<uint32_t>(snapshot.dedup.size()));
  for (const raft::DedupRecord& record : snapshot.dedup) {
    out.U64(record.id.producer);
    out.U64(record.id.sequence);
    out.U64(record.timestamp);
  }
  out.Bytes(snapshot.data);
}

raft::Snapshot GetSnapshotMeta(ByteReader& in) {
  raft::Snapshot snapshot;
  snapshot.index = in.U64();
  snapshot.term = in.U64();
  snapshot.timestamp = in.U64();
  snapshot.config.voters = GetIds(in);
  snapshot.config.learners = GetIds(in);
  const uint32_t records = in.Count(kDedupBytes);
  snapshot.dedup.reserve(records);
  for (uint32_t i = 0; i < records; ++i) {
    raft::DedupRecord record;
    record.id.producer = in.U64();
    record.id.sequence = in.U64();
    record.timestamp = in.U64();
    snapshot.dedup.push_back(record);
  }
  snapshot.data = in.ByteVector();
  return snapshot;
}

}  // namespace

std::string EncodeMessage(GroupId group, const raft::Message& message) {
  ByteWriter out;
  out.U32(group);
  out.U8(static_cast<uint8_t>(message.type));
  out.U64(message.from);
  out.U64(message.to);
  out.U64(message.term);
  out.U64(message.log_index);
  out.U64(message.log_term);
  out.U8(message.transfer ? 1 : 0);
  out.U8(message.reject ? 1 : 0);
  out.U32(static_cast<uint32_t>(message.entries.size()));
  for (const raft::Entry& entry : message.entries) PutEntry(out, entry);
  out.U64(message.commit);
  out.U64(message.index);
  out.U64(message.hint_term);
  out.U64(message.send_time);
  out.U64(message.timestamp);
  out.U8(message.snapshot ? 1 : 0);
  if (message.snapshot) PutSnapshotMeta(out, *message.snapshot);
  out.U64(message.offset);
  out.Bytes(message.chunk);
  out.U8(message.done ? 1 : 0);
  out.U32(static_cast<uint32_t>(message.writes.size()));
  for (const raft::Write& write : message.writes) {
    out.U64(write.id.producer);
    out.U64(write.id.sequence);
    out.Bytes(write.data);
  }
  return out.Take();
}

std::optional<GroupMessage> DecodeMessage(std::string_view body) {
  ByteReader in(body);
  GroupMessage out;
  out.group = in.U32();
  raft::Message& message = out.message;
  const uint8_t type = in.U8();
  if (type > static_cast<uint8_t>(raft::MessageType::kTimeoutNow)) return std::nullopt;
  message.type = static_cast<raft::MessageType>(type);
  message.from = in.U64();
  message.to = in.U64();
  message.term = in.U64();
  message.log_index = in.U64();
  message.log_term = in.U64();
  message.transfer = in.Bool();
  message.reject = in.Bool();
  const uint32_t entries = in.Count(kEntryMinBytes);
  message.entries.reserve(entries);
  for (uint32_t i = 0; i < entries && in.ok(); ++i) message.entries.push_back(GetEntry(in));
  message.commit = in.U64();
  message.index = in.U64();
  message.hint_term = in.U64();
  message.send_time = in.U64();
  message.timestamp = in.U64();
  if (in.Bool()) message.snapshot = std::make_shared<const raft::Snapshot>(GetSnapshotMeta(in));
  message.offset = in.U64();
  message.chunk = in.ByteVector();
  message.done = in.Bool();
  const uint32_t writes = in.Count(20);
  message.writes.reserve(writes);
  for (uint32_t i = 0; i < writes && in.ok(); ++i) {
    raft::Write write;
    write.id.producer = in.U64();
    write.id.sequence = in.U64();
    write.data = in.ByteVector();
    message.writes.push_back(std::move(write));
  }
  if (!in.done()) return std::nullopt;
  return out;
}

std::string EncodeProposeRequest(const ProposeRequest& request) {
  ByteWriter out;
  out.U32(request.group);
  out.U64(request.request);
  out.U64(request.write_id.producer);
  out.U64(request.write_id.sequence);
  out.Bytes(request.data);
  return out.Take();
}

std::optional<ProposeRequest> DecodeProposeRequest(std::string_view body) {
  ByteReader in(body);
  ProposeRequest request;
  request.group = in.U32();
  request.request = in.U64();
  request.write_id.producer = in.U64();
  request.write_id.sequence = in.U64();
  request.data = in.ByteVector();
  if (!in.done()) return std::nullopt;
  return request;
}

std::string EncodeProposeReply(const ProposeReply& reply) {
  ByteWriter out;
  out.U32(reply.group);
  out.U64(reply.request);
  out.U8(static_cast<uint8_t>(reply.status));
  out.U64(reply.index);
  out.U64(reply.leader);
  return out.Take();
}

std::optional<ProposeReply> DecodeProposeReply(std::string_view body) {
  ByteReader in(body);
  ProposeReply reply;
  reply.group = in.U32();
  reply.request = in.U64();
  const uint8_t status = in.U8();
  if (status > static_cast<uint8_t>(ProposeStatus::kRejected)) return std::nullopt;
  reply.status = static_cast<ProposeStatus>(status);
  reply.index = in.U64();
  reply.leader = in.U64();
  if (!in.done()) return std::nullopt;
  return reply;
}

std::string EncodeQuiesce(const QuiesceNotice& notice) {
  ByteWriter out;
  out.U32(notice.group);
  out.U64(notice.term);
  out.U64(notice.commit);
  out.U64(notice.leader);
  return out.Take();
}

std::optional<QuiesceNotice> DecodeQuiesce(std::string_view body) {
  ByteReader in(body);
  QuiesceNotice notice;
  notice.group = in.U32();
  notice.term = in.U64();
  notice.commit = in.U64();
  notice.leader = in.U64();
  if (!in.done()) return std::nullopt;
  return notice;
}

std::string EncodeWake(const WakeRequest& request) {
  ByteWriter out;
  out.U32(request.group);
  out.U64(request.term);
  return out.Take();
}

std::optional<WakeRequest> DecodeWake(std::string_view body) {
  ByteReader in(body);
  WakeRequest request;
  request.group = in.U32();
  request.term = in.U64();
  if (!in.done()) return std::nullopt;
  return request;
}

}  // namespace estuary::meta
