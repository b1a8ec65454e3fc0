#include "cluster-core/membership/membership_codec.h"

#include "base/bytes.h"

namespace estuary::cluster {
namespace {

using Writer = base::LittleEndianWriter;
using Reader = base::LittleEndianReader;

// A string: a u16 length and the bytes (a longer one is cut at 65,535
// bytes, and its length field wraps, as the format always did).
void PutString(Writer& writer, std::string_view text) {
  writer.U16(static_cast<uint16_t>(text.size()));
  writer.Raw(text.substr(0, 0xFFFF));
}

std::string ReadString(Reader& reader) { return std::string(reader.Bytes16()); }

std::optional<Reader> Open(std::string_view body) {
  Reader reader(body);
  if (reader.U8() != kMembershipWireVersion || !reader.ok()) return std::nullopt;
  return reader;
}

int Rank(MemberState state) { return static_cast<int>(state); }

}  // namespace

std::string_view ToString(MemberState state) {
  switch (state) {
    case MemberState::kJoining: return "joining";
    case MemberState::kUp: return "up";
    case MemberState::kSuspect: return "suspect";
    case MemberState::kDown: return "down";
    case MemberState::kLeaving: return "leaving";
    case MemberState::kLeft: return "left";
  }
  return "unknown";
}

bool Supersedes(const MemberEntry& incoming, const MemberEntry& current) {
  if (incoming.epoch != current.epoch) return incoming.epoch > current.epoch;
  const bool incoming_left = incoming.state == MemberState::kLeft;
  const bool current_left = current.state == MemberState::kLeft;
  if (incoming_left != current_left) return incoming_left;
  if (incoming_left && incoming.removed != current.removed) return incoming.removed;
  if (incoming.incarnation != current.incarnation) return incoming.incarnation > current.incarnation;
  return Rank(incoming.state) > Rank(current.state);
}

std::string EncodeTable(uint8_t flags, const std::vector<MemberEntry>& table) {
  Writer writer;
  writer.U8(kMembershipWireVersion);
  writer.U8(flags);
  writer.U16(static_cast<uint16_t>(table.size()));
  for (const MemberEntry& entry : table) {
    writer.U16(entry.node);
    writer.U32(entry.epoch);
    writer.U64(entry.incarnation);
    writer.U8(static_cast<uint8_t>(entry.state));
    writer.U8(entry.removed ? 0x01 : 0x00);
    PutString(writer, entry.cluster_address);
    PutString(writer, entry.admin_address);
  }
  return writer.Take();
}

std::optional<JoinBody> DecodeTable(std::string_view body) {
  auto reader = Open(body);
  if (!reader) return std::nullopt;
  JoinBody join;
  join.rejoin = (reader->U8() & 0x01) != 0;
  const uint16_t count = reader->U16();
  for (uint16_t i = 0; i < count && reader->ok(); ++i) {
    MemberEntry entry;
    entry.node = reader->U16();
    entry.epoch = reader->U32();
    entry.incarnation = reader->U64();
    const uint8_t state = reader->U8();
    if (state > static_cast<uint8_t>(MemberState::kLeft)) return std::nullopt;
    entry.state = static_cast<MemberState>(state);
    entry.removed = (reader->U8() & 0x01) != 0;
    entry.cluster_address = ReadString(*reader);
    entry.admin_address = ReadString(*reader);
    join.table.push_back(std::move(entry));
  }
  if (!reader->done()) return std::nullopt;
  return join;
}

std::string EncodeProbe(const ProbeBody& probe) {
  Writer writer;
  writer.U8(kMembershipWireVersion);
  writer.U16(probe.target);
  writer.U8(probe.reachable ? 1 : 0);
  return writer.Take();
}

std::optional<ProbeBody> DecodeProbe(std::string_view body) {
  auto reader = Open(body);
  if (!reader) return std::nullopt;
  ProbeBody probe;
  probe.target = reader->U16();
  probe.reachable = reader->U8() != 0;
  if (!reader->done()) return std::nullopt;
  return probe;
}

std::string EncodeReason(std::string_view reason) {
  Writer writer;
  writer.U8(kMembershipWireVersion);
  PutString(writer, reason);
  return writer.Take();
}

std::optional<std::string> DecodeReason(std::string_view body) {
  auto reader = Open(body);
  if (!reader) return std::nullopt;
  std::string reason = ReadString(*reader);
  if (!reader->done()) return std::nullopt;
  return reason;
}

std::string EncodeEmpty() { return std::string(1, static_cast<char>(kMembershipWireVersion)); }

bool DecodeEmpty(std::string_view body) {
  auto reader = Open(body);
  return reader && reader->done();
}

std::string EncodeFlag(bool flag) {
  Writer writer;
  writer.U8(kMembershipWireVersion);
  writer.U8(flag ? 1 : 0);
  return writer.Take();
}

std::optional<bool> DecodeFlag(std::string_view body) {
  auto reader = Open(body);
  if (!reader) return std::nullopt;
  const uint8_t flag = reader->U8();
  if (!reader->done() || flag > 1) return std::nullopt;
  return flag == 1;
}

}  // namespace estuary::cluster
