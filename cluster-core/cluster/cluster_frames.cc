#include "cluster-core/cluster/cluster_frames.h"

#include <bit>
#include <cstring>

#include "cluster-core/store/record_codec.h"

namespace estuary::cluster {
namespace {

void Put(std::string& out, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutString(std::string& out, std::string_view v) {
  Put(out, v.size(), 2);
  out.append(v);
}

// Fails soft: after a short read every later read fails, ok() says so.
class Cursor {
 public:
  explicit Cursor(std::string_view in) : in_(in) {}
  // n is a constant at every call: the switch folds to one load and swap.
  uint64_t Get(size_t n) {
    if (!ok_ || in_.size() < n) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    switch (n) {
      case 1:
        v = static_cast<uint8_t>(in_[0]);
        break;
      case 2:
        v = Load<uint16_t>();
        break;
      case 4:
        v = Load<uint32_t>();
        break;
      case 8:
        v = Load<uint64_t>();
        break;
      default:
        v = core::store::DecodeBigEndian(in_.substr(0, n));
        break;
    }
    in_.remove_prefix(n);
    return v;
  }
  std::string_view Take(size_t n) {
    if (!ok_ || in_.size() < n) {
      ok_ = false;
      return {};
    }
    std::string_view v = in_.substr(0, n);
    in_.remove_prefix(n);
    return v;
  }
  std::string String() { return std::string(Take(Get(2))); }
  bool Version() { return Get(1) == kClusterFrameVersion && ok_; }
  std::string_view rest() const { return in_; }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && in_.empty(); }

 private:
  template <typename T>
  uint64_t Load() const {
    T v;
    std::memcpy(&v, in_.data(), sizeof v);
    if constexpr (std::endian::native == std::endian::little) {
      if constexpr (sizeof(T) == 2) v = __builtin_bswap16(v);
      if constexpr (sizeof(T) == 4) v = __builtin_bswap32(v);
      if constexpr (sizeof(T) == 8) v = __builtin_bswap64(v);
    }
    return v;
  }
  std::string_view in_;
  bool ok_ = true;
};

std::string Begin() { return std::string(1, static_cast<char>(kClusterFrameVersion)); }

}  // namespace

std::string EncodeRoutes(const std::vector<RouteEntry>& entries) {
  std::string out = Begin();
  Put(out, entries.size(), 4);
  for (const RouteEntry& entry : entries) {
    out.push_back(entry.add ? 1 : 0);
    PutString(out, entry.filter);
    PutString(out, entry.shared_key);
  }
  return out;
}

std::optional<std::vector<RouteEntry>> DecodeRoutes(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  const uint64_t count = in.Get(4);
  std::vector<RouteEntry> entries;
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    RouteEntry entry;
    entry.add = in.Get(1) != 0;
    entry.filter = in.String();
    entry.shared_key = in.String();
    entries.push_back(std::move(entry));
  }
  if (!in.done()) return std::nullopt;
  return entries;
}

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
  for (int i = 0; i < 8; ++i) fixed[1 + i] = static_cast<char>((forward_id >> (8 * (7 - i))) & 0xFF);
  fixed[9] = plain ? 1 : 0;
  fixed[10] = static_cast<char>((shared_keys.size() >> 8) & 0xFF);
  fixed[11] = static_cast<char>(shared_keys.size() & 0xFF);
  out.append(fixed, sizeof fixed);
  for (const std::string& key : shared_keys) PutString(out, key);
  core::store::AppendMessage(out, message);  // the rest of the body
}

namespace {

// The forward's head; `message_bytes` is the message record after it.
std::optional<ForwardFrame> DecodeForwardHead(std::string_view body, std::string_view& message_bytes) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  ForwardFrame frame;
  frame.forward_id = in.Get(8);
  frame.plain = in.Get(1) != 0;
  const uint64_t keys = in.Get(2);
  for (uint64_t i = 0; i < keys && in.ok(); ++i) frame.shared_keys.push_back(in.String());
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
  out.push_back(static_cast<char>((gone >> 8) & 0xFF));
  out.push_back(static_cast<char>(gone & 0xFF));
  AppendForward(out, forward_id, plain, shared_keys, message);
  return out;
}

std::optional<ReplayFrame> DecodeReplay(std::string_view body) {
  if (body.size() < 2) return std::nullopt;
  ReplayFrame frame;
  frame.gone = static_cast<uint16_t>((static_cast<uint8_t>(body[0]) << 8) | static_cast<uint8_t>(body[1]));
  auto forward = DecodeForward(body.substr(2));
  if (!forward) return std::nullopt;
  frame.forward = std::move(*forward);
  return frame;
}

std::optional<std::string_view> PeekForwardClientId(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  in.Get(8);
  in.Get(1);
  const uint64_t keys = in.Get(2);
  for (uint64_t i = 0; i < keys && in.ok(); ++i) in.Take(in.Get(2));
  if (!in.ok()) return std::nullopt;
  return core::store::PeekOriginClientId(in.rest());
}

std::optional<ForwardIdentity> PeekForwardIdentity(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  ForwardIdentity identity;
  identity.forward_id = in.Get(8);
  in.Get(1);
  const uint64_t keys = in.Get(2);
  for (uint64_t i = 0; i < keys && in.ok(); ++i) in.Take(in.Get(2));
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
  auto put = [&at](uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) *at++ = static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  put(kClusterFrameVersion, 1);
  put(forward_ids.size(), 4);
  for (uint64_t id : forward_ids) put(id, 8);
  return out;
}

std::optional<std::vector<uint64_t>> DecodeForwardSafe(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  const uint64_t count = in.Get(4);
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < count && in.ok(); ++i) ids.push_back(in.Get(8));
  if (!in.done()) return std::nullopt;
  return ids;
}

std::string EncodeRetained(const std::vector<MessagePtr>& messages) {
  std::string out = Begin();
  Put(out, messages.size(), 4);
  for (const MessagePtr& message : messages) {
    const size_t at = out.size();
    Put(out, 0, 4);  // length, filled in below
    core::store::AppendMessage(out, *message);
    const uint64_t length = out.size() - at - 4;
    for (int i = 0; i < 4; ++i) out[at + i] = static_cast<char>((length >> (8 * (3 - i))) & 0xFF);
  }
  return out;
}

std::optional<std::vector<MessagePtr>> DecodeRetained(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  const uint64_t count = in.Get(4);
  std::vector<MessagePtr> messages;
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    auto message = core::store::DecodeMessage(in.Take(in.Get(4)));
    if (!message) return std::nullopt;
    messages.push_back(std::move(*message));
  }
  if (!in.done()) return std::nullopt;
  return messages;
}

std::string EncodeClientIds(const std::vector<std::string>& client_ids) {
  std::string out = Begin();
  Put(out, client_ids.size(), 4);
  for (const std::string& id : client_ids) PutString(out, id);
  return out;
}

std::optional<std::vector<std::string>> DecodeClientIds(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  const uint64_t count = in.Get(4);
  std::vector<std::string> ids;
  for (uint64_t i = 0; i < count && in.ok(); ++i) ids.push_back(in.String());
  if (!in.done()) return std::nullopt;
  return ids;
}

std::string EncodeSessionHandOff(uint64_t id, const std::string& client_id,
                                 const std::vector<core::Delivery>& deliveries) {
  std::string out = Begin();
  Put(out, id, 8);
  PutString(out, client_id);
  Put(out, deliveries.size(), 4);
  for (const core::Delivery& delivery : deliveries) {
    const std::string record = core::store::EncodeDelivery(delivery);
    Put(out, record.size(), 4);
    out.append(record);
  }
  return out;
}

std::optional<SessionHandOffFrame> DecodeSessionHandOff(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  SessionHandOffFrame frame;
  frame.id = in.Get(8);
  frame.client_id = in.String();
  const uint64_t count = in.Get(4);
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    auto delivery = core::store::DecodeDelivery(in.Take(in.Get(4)));
    if (!delivery || !delivery->message) return std::nullopt;
    frame.deliveries.push_back(std::move(*delivery));
  }
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string EncodeSessionHandOffDone(uint64_t id, bool taken) {
  std::string out = Begin();
  Put(out, id, 8);
  out.push_back(taken ? 1 : 0);
  return out;
}

std::optional<SessionHandOffDone> DecodeSessionHandOffDone(std::string_view body) {
  Cursor in(body);
  if (!in.Version()) return std::nullopt;
  SessionHandOffDone done;
  done.id = in.Get(8);
  done.taken = in.Get(1) != 0;
  if (!in.done()) return std::nullopt;
  return done;
}

}  // namespace estuary::cluster
