#include "cluster-core/membership/membership_codec.h"

namespace estuary::cluster {
namespace {

// Little-endian writer and bounds-checked reader.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void U8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void U16(uint16_t value) { Uint(value, 2); }
  void U32(uint32_t value) { Uint(value, 4); }
  void U64(uint64_t value) { Uint(value, 8); }
  void Str(std::string_view text) {
    U16(static_cast<uint16_t>(text.size()));
    out_.append(text.substr(0, 0xFFFF));
  }

 private:
  void Uint(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }
  uint8_t U8() { return static_cast<uint8_t>(Uint(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Uint(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Uint(4)); }
  uint64_t U64() { return Uint(8); }
  std::string Str() {
    size_t size = U16();
    if (!ok_ || in_.size() < size) return Fail(), std::string();
    std::string text(in_.substr(0, size));
    in_.remove_prefix(size);
    return text;
  }

 private:
  void Fail() { ok_ = false; }
  uint64_t Uint(size_t bytes) {
    if (!ok_ || in_.size() < bytes) return Fail(), 0;
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) value |= uint64_t(uint8_t(in_[i])) << (8 * i);
    in_.remove_prefix(bytes);
    return value;
  }
  std::string_view in_;
  bool ok_ = true;
};

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
  std::string out;
  Writer writer(out);
  writer.U8(kMembershipWireVersion);
  writer.U8(flags);
  writer.U16(static_cast<uint16_t>(table.size()));
  for (const MemberEntry& entry : table) {
    writer.U16(entry.node);
    writer.U32(entry.epoch);
    writer.U64(entry.incarnation);
    writer.U8(static_cast<uint8_t>(entry.state));
    writer.U8(entry.removed ? 0x01 : 0x00);
    writer.Str(entry.cluster_address);
    writer.Str(entry.admin_address);
  }
  return out;
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
    entry.cluster_address = reader->Str();
    entry.admin_address = reader->Str();
    join.table.push_back(std::move(entry));
  }
  if (!reader->done()) return std::nullopt;
  return join;
}

std::string EncodeProbe(const ProbeBody& probe) {
  std::string out;
  Writer writer(out);
  writer.U8(kMembershipWireVersion);
  writer.U16(probe.target);
  writer.U8(probe.reachable ? 1 : 0);
  return out;
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
  std::string out;
  Writer writer(out);
  writer.U8(kMembershipWireVersion);
  writer.Str(reason);
  return out;
}

std::optional<std::string> DecodeReason(std::string_view body) {
  auto reader = Open(body);
  if (!reader) return std::nullopt;
  std::string reason = reader->Str();
  if (!reader->done()) return std::nullopt;
  return reason;
}

std::string EncodeEmpty() { return std::string(1, static_cast<char>(kMembershipWireVersion)); }

bool DecodeEmpty(std::string_view body) {
  auto reader = Open(body);
  return reader && reader->done();
}

}  // namespace estuary::cluster
