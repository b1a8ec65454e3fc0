#include "cluster-core/cluster/cluster_frames.h"

#include "base/bytes.h"
#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {
namespace {

// Big-endian integers; a string is a u16 length and the bytes.
using Reader = base::BigEndianReader;

void PutString(std::string& out, std::string_view v) {
  base::AppendBig<uint16_t>(out, static_cast<uint16_t>(v.size()));
  out.append(v);
}

std::string ReadString(Reader& in) { return std::string(in.Bytes16()); }

bool Version(Reader& in) { return in.U8() == kClusterFrameVersion && in.ok(); }

std::string Begin() { return std::string(1, static_cast<char>(kClusterFrameVersion)); }

}  // namespace

std::string EncodeForward(uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                          const Message& message) {
  std::string out;
  AppendForward(out, forward_id, plain, shared_keys, message);
  return out;
}

void AppendForward(std::string& out, uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                   const Message& message) {
  // AppendMessage sizes its part itself (one resize): only the head here.
  size_t head = 1 + 8 + 1 + 2;
  for (const std::string& key : shared_keys) head += 2 + key.size();
  out.reserve(out.size() + head);
  char fixed[12];
  fixed[0] = static_cast<char>(kClusterFrameVersion);
  base::StoreBig<uint64_t>(fixed + 1, forward_id);
  fixed[9] = plain ? 1 : 0;
  base::StoreBig<uint16_t>(fixed + 10, static_cast<uint16_t>(shared_keys.size()));
  out.append(fixed, sizeof fixed);
  for (const std::string& key : shared_keys) PutString(out, key);
  core::store::AppendMessage(out, message);  // the rest of the body
}

namespace {

// The forward's head; `message_bytes` is the message record after it.
std::optional<ForwardFrame> DecodeForwardHead(std::string_view body, std::string_view& message_bytes) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  ForwardFrame frame;
  frame.forward_id = in.U64();
  frame.plain = in.U8() != 0;
  const uint64_t keys = in.U16();
  for (uint64_t i = 0; i < keys && in.ok(); ++i) frame.shared_keys.push_back(ReadString(in));
  if (!in.ok()) return std::nullopt;
  message_bytes = in.rest();
  return frame;
}

}  // namespace

std::optional<ForwardFrame> DecodeForward(std::string_view body) {
  std::string_view message_bytes;
  auto frame = DecodeForwardHead(body, message_bytes);
  if (!frame) return std::nullopt;
  auto message = core::store::DecodeMessage(message_bytes);
  if (!message) return std::nullopt;
  frame->message = std::move(*message);
  return frame;
}

std::optional<ForwardFrame> DecodeForward(std::string_view body, core::store::MessageRecycler& recycler) {
  std::string_view message_bytes;
  auto frame = DecodeForwardHead(body, message_bytes);
  if (!frame) return std::nullopt;
  auto message = recycler.Decode(message_bytes);
  if (!message) return std::nullopt;
  frame->message = std::move(*message);
  return frame;
}

std::string EncodeReplay(uint16_t gone, uint64_t forward_id, bool plain, const std::vector<std::string>& shared_keys,
                         const Message& message) {
  std::string out;
  base::AppendBig<uint16_t>(out, gone);
  AppendForward(out, forward_id, plain, shared_keys, message);
  return out;
}

std::optional<ReplayFrame> DecodeReplay(std::string_view body) {
  if (body.size() < 2) return std::nullopt;
  ReplayFrame frame;
  frame.gone = base::LoadBig<uint16_t>(body.data());
  auto forward = DecodeForward(body.substr(2));
  if (!forward) return std::nullopt;
  frame.forward = std::move(*forward);
  return frame;
}

std::optional<std::string_view> PeekForwardClientId(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  in.U64();
  in.U8();
  const uint64_t keys = in.U16();
  for (uint64_t i = 0; i < keys && in.ok(); ++i) in.Raw(in.U16());
  if (!in.ok()) return std::nullopt;
  return core::store::PeekOriginClientId(in.rest());
}

std::optional<ForwardIdentity> PeekForwardIdentity(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  ForwardIdentity identity;
  identity.forward_id = in.U64();
  in.U8();
  const uint64_t keys = in.U16();
  for (uint64_t i = 0; i < keys && in.ok(); ++i) in.Raw(in.U16());
  if (!in.ok()) return std::nullopt;
  auto message = core::store::PeekIdentity(in.rest());
  if (!message) return std::nullopt;
  identity.id = message->id;
  identity.qos = message->qos;
  return identity;
}

std::string EncodeForwardSafe(const std::vector<uint64_t>& forward_ids) {
  std::string out(1 + 4 + 8 * forward_ids.size(), '\0');  // sized once, written in place
  char* at = out.data();
  *at++ = static_cast<char>(kClusterFrameVersion);
  base::StoreBig<uint32_t>(at, static_cast<uint32_t>(forward_ids.size()));
  at += 4;
  for (uint64_t id : forward_ids) {
    base::StoreBig<uint64_t>(at, id);
    at += 8;
  }
  return out;
}

std::optional<std::vector<uint64_t>> DecodeForwardSafe(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  const uint64_t count = in.U32();
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < count && in.ok(); ++i) ids.push_back(in.U64());
  if (!in.done()) return std::nullopt;
  return ids;
}

std::string EncodeClientIds(const std::vector<std::string>& client_ids) {
  std::string out = Begin();
  base::AppendBig<uint32_t>(out, client_ids.size());
  for (const std::string& id : client_ids) PutString(out, id);
  return out;
}

std::optional<std::vector<std::string>> DecodeClientIds(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  const uint64_t count = in.U32();
  std::vector<std::string> ids;
  for (uint64_t i = 0; i < count && in.ok(); ++i) ids.push_back(ReadString(in));
  if (!in.done()) return std::nullopt;
  return ids;
}

std::string EncodeSessionHandOff(uint64_t id, const std::string& client_id,
                                 const std::vector<core::Delivery>& deliveries) {
  std::string out = Begin();
  base::AppendBig<uint64_t>(out, id);
  PutString(out, client_id);
  base::AppendBig<uint32_t>(out, deliveries.size());
  for (const core::Delivery& delivery : deliveries) {
    const std::string record = core::store::EncodeDelivery(delivery);
    base::AppendBig<uint32_t>(out, record.size());
    out.append(record);
  }
  return out;
}

std::optional<SessionHandOffFrame> DecodeSessionHandOff(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  SessionHandOffFrame frame;
  frame.id = in.U64();
  frame.client_id = ReadString(in);
  const uint64_t count = in.U32();
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    auto delivery = core::store::DecodeDelivery(in.Raw(in.U32()));
    if (!in.ok() || !delivery || !delivery->message) return std::nullopt;
    frame.deliveries.push_back(std::move(*delivery));
  }
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string EncodeSessionHandOffDone(uint64_t id, bool taken) {
  std::string out = Begin();
  base::AppendBig<uint64_t>(out, id);
  out.push_back(taken ? 1 : 0);
  return out;
}

std::optional<SessionHandOffDone> DecodeSessionHandOffDone(std::string_view body) {
  Reader in(body);
  if (!Version(in)) return std::nullopt;
  SessionHandOffDone done;
  done.id = in.U64();
  done.taken = in.U8() != 0;
  if (!in.done()) return std::nullopt;
  return done;
}

}  // namespace estuary::cluster
