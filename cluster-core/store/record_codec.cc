#include "cluster-core/store/record_codec.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "base/bytes.h"

namespace estuary::core::store {
namespace {

constexpr uint8_t kFormatVersion = 1;

// The records are big-endian (base/bytes.h); an optional string is a
// flag byte and, if set, a u32-length-prefixed field.
class Writer : public base::BigEndianWriter {
 public:
  using base::BigEndianWriter::BigEndianWriter;
  void OptBytes(const std::optional<std::string>& v) {
    U8(v ? 1 : 0);
    if (v) Bytes(*v);
  }
};

// Reads fail soft: after the first short read every later read fails too,
// and ok() tells the caller to discard the value. Bytes() views the input
// (valid as long as it is).
class Reader : public base::BigEndianReader {
 public:
  using base::BigEndianReader::BigEndianReader;
  // A flag byte, then (if set) a Bytes field, into `out` (reusing its buffer).
  void OptBytesInto(std::optional<std::string>& out) {
    if (U8() == 0) {
      out.reset();
    } else if (out) {
      out->assign(Bytes());
    } else {
      out.emplace(Bytes());
    }
  }
};

// Counts the bytes a Writer would append (AppendMessage sizes its frame once).
class SizeCounter {
 public:
  void U8(uint8_t) { n_ += 1; }
  void U16(uint16_t) { n_ += 2; }
  void U32(uint32_t) { n_ += 4; }
  void U64(uint64_t) { n_ += 8; }
  void Bytes(std::string_view v) { n_ += 4 + v.size(); }
  void OptBytes(const std::optional<std::string>& v) { n_ += v ? 5 + v->size() : 1; }
  size_t size() const { return n_; }

 private:
  size_t n_ = 0;
};

// Writes into memory already sized by a SizeCounter: no capacity checks.
class RawWriter {
 public:
  explicit RawWriter(char* at) : at_(at) {}
  void U8(uint8_t v) { *at_++ = static_cast<char>(v); }
  void U16(uint16_t v) { Put(v); }
  void U32(uint32_t v) { Put(v); }
  void U64(uint64_t v) { Put(v); }
  void Bytes(std::string_view v) {
    U32(static_cast<uint32_t>(v.size()));
    if (!v.empty()) std::memcpy(at_, v.data(), v.size());
    at_ += v.size();
  }
  void OptBytes(const std::optional<std::string>& v) {
    U8(v ? 1 : 0);
    if (v) Bytes(*v);
  }
  char* at() const { return at_; }

 private:
  template <typename T>
  void Put(T v) {
    base::StoreBig<T>(at_, v);
    at_ += sizeof v;
  }
  char* at_;
};

template <typename W>
void WriteMessage(W& w, const Message& m) {
  w.U16(m.id.node);
  w.U64(m.id.timestamp);
  w.U32(m.id.sequence);
  w.Bytes(m.topic);
  w.U8(m.payload ? 1 : 0);
  if (m.payload) w.Bytes(*m.payload);
  w.U8(static_cast<uint8_t>(static_cast<uint8_t>(m.qos) | (m.retain ? 4 : 0) | (m.durable ? 8 : 0)));
  const MessageProperties& p = m.properties;
  w.OptBytes(p.content_type);
  w.OptBytes(p.response_topic);
  w.OptBytes(p.correlation_data);
  w.U8(p.payload_format ? 1 : 0);
  if (p.payload_format) w.U8(*p.payload_format);
  w.U8(p.expiry_at_ms ? 1 : 0);
  if (p.expiry_at_ms) w.U64(static_cast<uint64_t>(*p.expiry_at_ms));
  w.U32(static_cast<uint32_t>(p.user_properties.size()));
  for (const auto& property : p.user_properties) {
    w.Bytes(property.key);
    w.Bytes(property.value);
  }
  w.U8(static_cast<uint8_t>(m.origin.protocol));
  w.Bytes(m.origin.client_id);
  w.U16(m.origin.node);
  w.U8(m.amqp_extras ? 1 : 0);
  if (m.amqp_extras) w.Bytes(*m.amqp_extras);
}

// Assigns every field of `m` (a fresh Message or one being reused) from
// the record; make_payload(view) gives the payload. False if malformed.
template <typename PayloadFactory>
bool ReadMessageInto(Reader& r, Message& m, PayloadFactory&& make_payload) {
  m.id.node = r.U16();
  m.id.timestamp = r.U64();
  m.id.sequence = r.U32();
  m.topic.assign(r.Bytes());
  if (r.U8() != 0) {
    m.payload = make_payload(r.Bytes());
  } else {
    m.payload.reset();
  }
  const uint8_t flags = r.U8();
  if ((flags & 3) > 2) return false;
  m.qos = static_cast<QoS>(flags & 3);
  m.retain = (flags & 4) != 0;
  m.durable = (flags & 8) != 0;
  MessageProperties& p = m.properties;
  r.OptBytesInto(p.content_type);
  r.OptBytesInto(p.response_topic);
  r.OptBytesInto(p.correlation_data);
  p.payload_format.reset();
  if (r.U8() != 0) p.payload_format = r.U8();
  p.expiry_at_ms.reset();
  if (r.U8() != 0) p.expiry_at_ms = static_cast<int64_t>(r.U64());
  const uint32_t count = r.U32();
  p.user_properties.clear();
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    const std::string_view key = r.Bytes();
    const std::string_view value = r.Bytes();
    p.user_properties.push_back({std::string(key), std::string(value)});
  }
  const uint8_t protocol = r.U8();
  if (protocol > static_cast<uint8_t>(Protocol::kInternal)) return false;
  m.origin.protocol = static_cast<Protocol>(protocol);
  m.origin.client_id.assign(r.Bytes());
  m.origin.node = r.U16();
  if (r.U8() != 0) {
    m.amqp_extras = MakePayload(std::string(r.Bytes()));
  } else {
    m.amqp_extras.reset();
  }
  return r.ok();
}

std::shared_ptr<Message> ReadMessage(Reader& r) {
  auto m = std::make_shared<Message>();
  const bool ok = ReadMessageInto(
      r, *m, [](std::string_view bytes) -> Payload { return std::make_shared<const std::string>(bytes); });
  return ok ? m : nullptr;
}

// Delivery records end in optional trailing fields, each a tag byte and a
// u32-length-prefixed value, written only when they have something to say
// (so a record without them is byte for byte what the first format wrote).
// Readers skip tags they do not know: a field added later costs older
// readers of this format nothing. Readers older than the trailing fields
// reject any record that has one (they want the record to end after the
// message): docs/storage.md, "Delivery records".
constexpr uint8_t kSharedKeyField = 1;  // the shared group's key (Delivery::shared_key)
constexpr uint8_t kReleasedIdField = 2;  // in-flight only: InflightDelivery::released_id
// The phase byte of a completed QoS 2 delivery's marker (EncodeCompleted).
constexpr uint8_t kCompletedPhase = 3;

template <typename W>
void WriteMessageId(W& w, const MessageId& id) {
  w.U16(id.node);
  w.U64(id.timestamp);
  w.U32(id.sequence);
}

bool ReadMessageId(Reader& r, MessageId& id) {
  id.node = r.U16();
  id.timestamp = r.U64();
  id.sequence = r.U32();
  return r.ok();
}

void WriteDeliveryFields(Writer& w, const Delivery& d, bool with_group_key) {
  w.U8(static_cast<uint8_t>(d.qos));
  w.U8(d.retain ? 1 : 0);
  w.U32(static_cast<uint32_t>(d.subscription_ids.size()));
  for (uint32_t id : d.subscription_ids) w.U32(id);
  w.U8(d.message ? 1 : 0);
  if (d.message) WriteMessage(w, *d.message);
  if (d.shared_key && with_group_key) {
    w.U8(kSharedKeyField);
    w.Bytes(*d.shared_key);
  }
}

// The trailing fields, to the end of the record; `released` (in-flight
// records only) takes kReleasedIdField.
bool ReadTrailingFields(Reader& r, Delivery& d, MessageId* released) {
  bool released_seen = false;
  while (r.ok() && !r.done()) {
    const uint8_t tag = r.U8();
    const std::string_view value = r.Bytes();
    if (!r.ok()) return false;
    if (tag == kSharedKeyField) {
      if (d.shared_key) return false;  // written once at most
      d.shared_key = std::make_shared<const std::string>(value);
    } else if (tag == kReleasedIdField && released != nullptr) {
      Reader field(value);
      if (released_seen || !ReadMessageId(field, *released) || !field.done()) return false;
      released_seen = true;
    }
  }
  return r.ok();
}

// Reads to the end of the record: the delivery fields come last.
bool ReadDeliveryFields(Reader& r, Delivery& d, MessageId* released = nullptr) {
  const uint8_t qos = r.U8();
  if (qos > 2) return false;
  d.qos = static_cast<QoS>(qos);
  d.retain = r.U8() != 0;
  const uint32_t count = r.U32();
  for (uint32_t i = 0; i < count && r.ok(); ++i) d.subscription_ids.push_back(r.U32());
  if (r.U8() != 0) {
    d.message = ReadMessage(r);
    if (!d.message) return false;
  }
  return ReadTrailingFields(r, d, released);
}

bool VersionOk(Reader& r) { return r.U8() == kFormatVersion && r.ok(); }

}  // namespace

uint64_t DecodeBigEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  return v;
}

std::string SessionPrefix(char tag, std::string_view client_id) {
  std::string key(1, tag);
  base::AppendBig<uint16_t>(key, static_cast<uint16_t>(client_id.size()));
  key.append(client_id);
  return key;
}

std::string SessionKey(std::string_view client_id) { return SessionPrefix(kSessionTag, client_id); }

std::string SubscriptionKey(std::string_view client_id, std::string_view filter) {
  return SessionPrefix(kSubscriptionTag, client_id).append(filter);
}

std::string QueuedKey(std::string_view client_id, uint64_t seq) {
  std::string key = SessionPrefix(kQueuedTag, client_id);
  base::AppendBig<uint64_t>(key, seq);
  return key;
}

std::string InflightKey(std::string_view client_id, uint16_t packet_id) {
  std::string key = SessionPrefix(kInflightTag, client_id);
  base::AppendBig<uint16_t>(key, static_cast<uint16_t>(packet_id));
  return key;
}

std::string InboundKey(std::string_view client_id, uint16_t packet_id) {
  std::string key = SessionPrefix(kInboundTag, client_id);
  base::AppendBig<uint16_t>(key, static_cast<uint16_t>(packet_id));
  return key;
}

std::string RetainedKey(std::string_view topic) { return std::string(1, kRetainedTag).append(topic); }

std::optional<ParsedKey> ParseSessionKey(std::string_view key) {
  if (key.size() < 3) return std::nullopt;
  const size_t length = DecodeBigEndian(key.substr(1, 2));
  if (key.size() < 3 + length) return std::nullopt;
  ParsedKey parsed;
  parsed.tag = key[0];
  parsed.client_id = std::string(key.substr(3, length));
  parsed.rest = std::string(key.substr(3 + length));
  return parsed;
}

std::string EncodeSession(const SessionRecord& record) {
  Writer w;
  w.U8(kFormatVersion);
  w.U32(record.expiry_interval);
  w.U64(static_cast<uint64_t>(record.disconnected_at_ms));
  w.U8(record.will ? 1 : 0);
  if (record.will) {
    w.U32(record.will->delay_seconds);
    w.U8(record.will->expiry_interval ? 1 : 0);
    if (record.will->expiry_interval) w.U32(*record.will->expiry_interval);
    WriteMessage(w, *record.will->message);
  }
  return w.Take();
}

std::optional<SessionRecord> DecodeSession(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  SessionRecord record;
  record.expiry_interval = r.U32();
  record.disconnected_at_ms = static_cast<int64_t>(r.U64());
  if (r.U8() != 0) {
    WillMessage will;
    will.delay_seconds = r.U32();
    if (r.U8() != 0) will.expiry_interval = r.U32();
    will.message = ReadMessage(r);
    if (!will.message) return std::nullopt;
    record.will = std::move(will);
  }
  if (!r.done()) return std::nullopt;
  return record;
}

std::string EncodeOptions(const SubscriptionOptions& options) {
  Writer w;
  w.U8(kFormatVersion);
  w.U8(static_cast<uint8_t>(options.max_qos));
  w.U8(static_cast<uint8_t>((options.no_local ? 1 : 0) | (options.retain_as_published ? 2 : 0)));
  w.U8(static_cast<uint8_t>(options.retain_handling));
  w.U32(options.subscription_id);
  return w.Take();
}

std::optional<SubscriptionOptions> DecodeOptions(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  SubscriptionOptions options;
  const uint8_t qos = r.U8();
  const uint8_t flags = r.U8();
  const uint8_t retain_handling = r.U8();
  options.subscription_id = r.U32();
  if (!r.done() || qos > 2 || retain_handling > static_cast<uint8_t>(RetainHandling::kNever)) return std::nullopt;
  options.retain_handling = static_cast<RetainHandling>(retain_handling);
  options.max_qos = static_cast<QoS>(qos);
  options.no_local = (flags & 1) != 0;
  options.retain_as_published = (flags & 2) != 0;
  return options;
}

std::string EncodeDelivery(const Delivery& delivery, bool with_group_key) {
  Writer w;
  w.U8(kFormatVersion);
  WriteDeliveryFields(w, delivery, with_group_key);
  return w.Take();
}

std::optional<Delivery> DecodeDelivery(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  Delivery delivery;
  if (!ReadDeliveryFields(r, delivery) || !delivery.message) return std::nullopt;
  return delivery;
}

std::string EncodeInflight(const InflightDelivery& inflight, bool with_trailing) {
  Writer w;
  w.U8(kFormatVersion);
  w.U8(static_cast<uint8_t>(inflight.phase));
  w.U64(inflight.sent_order);
  WriteDeliveryFields(w, inflight.delivery, with_trailing);
  if (with_trailing && !inflight.delivery.message && inflight.released_id.timestamp != 0) {
    Writer id;
    WriteMessageId(id, inflight.released_id);
    w.U8(kReleasedIdField);
    w.Bytes(id.Take());
  }
  return w.Take();
}

std::optional<InflightDelivery> DecodeInflight(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  InflightDelivery inflight;
  const uint8_t phase = r.U8();
  if (phase > static_cast<uint8_t>(InflightPhase::kAwaitingPubcomp)) return std::nullopt;
  inflight.phase = static_cast<InflightPhase>(phase);
  inflight.sent_order = r.U64();
  if (!ReadDeliveryFields(r, inflight.delivery, &inflight.released_id)) return std::nullopt;
  // Only a QoS 2 delivery past PUBREC may have dropped its message.
  if (!inflight.delivery.message && inflight.phase != InflightPhase::kAwaitingPubcomp) return std::nullopt;
  if (inflight.delivery.message) inflight.released_id = MessageId{};
  return inflight;
}

std::string EncodeCompleted(const MessageId& id) {
  Writer w;
  w.U8(kFormatVersion);
  w.U8(kCompletedPhase);
  WriteMessageId(w, id);
  return w.Take();
}

std::optional<MessageId> DecodeCompleted(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r) || r.U8() != kCompletedPhase) return std::nullopt;
  MessageId id;
  if (!ReadMessageId(r, id) || !r.done() || id.timestamp == 0) return std::nullopt;
  return id;
}

std::string EncodeMessage(const Message& message) {
  Writer w;
  w.U8(kFormatVersion);
  WriteMessage(w, message);
  return w.Take();
}

std::optional<std::string_view> PeekOriginClientId(std::string_view bytes) {
  // Walks the fields WriteMessage wrote, up to the origin's client id.
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  r.U16();
  r.U64();
  r.U32();
  r.Bytes();                    // topic
  if (r.U8() != 0) r.Bytes();   // payload
  r.U8();                           // flags
  for (int i = 0; i < 3; ++i) {     // content type, response topic, correlation data
    if (r.U8() != 0) r.Bytes();
  }
  if (r.U8() != 0) r.U8();   // payload format
  if (r.U8() != 0) r.U64();  // expiry
  const uint32_t count = r.U32();
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    r.Bytes();
    r.Bytes();
  }
  r.U8();  // protocol
  const std::string_view client_id = r.Bytes();
  if (!r.ok()) return std::nullopt;
  return client_id;
}

std::optional<MessageIdentity> PeekIdentity(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  MessageIdentity identity;
  identity.id.node = r.U16();
  identity.id.timestamp = r.U64();
  identity.id.sequence = r.U32();
  r.Bytes();                   // topic
  if (r.U8() != 0) r.Bytes();  // payload
  const uint8_t flags = r.U8();
  if (!r.ok() || (flags & 3) > 2) return std::nullopt;
  identity.qos = static_cast<QoS>(flags & 3);
  return identity;
}

size_t AppendedMessageSize(const Message& message) {
  SizeCounter counter;
  WriteMessage(counter, message);
  return 1 + counter.size();
}

void AppendMessage(std::string& out, const Message& message) {
  const size_t at = out.size();
  out.resize(at + AppendedMessageSize(message));
  RawWriter w(out.data() + at);
  w.U8(kFormatVersion);
  WriteMessage(w, message);
}

std::optional<MessagePtr> DecodeMessage(std::string_view bytes) {
  Reader r(bytes);
  if (!VersionOk(r)) return std::nullopt;
  auto message = ReadMessage(r);
  if (!message || !r.done()) return std::nullopt;
  return MessagePtr(std::move(message));
}

std::optional<MessagePtr> MessageRecycler::Decode(std::string_view bytes) {
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % kSlots;
  if (!slot.message || slot.message.use_count() != 1) {
    slot.message = std::make_shared<Message>();
    slot.payload.reset();
  }
  // The payload buffer is reused only while the message's payload is the
  // slot's own and the two of them are its only holders.
  const bool payload_free = slot.payload && slot.message->payload == slot.payload && slot.payload.use_count() == 2;
  // use_count() is a relaxed load: this fence orders the writes below after
  // whatever the last other holder did with the message and its payload
  // before it released them (a release decrement, read by those loads).
  std::atomic_thread_fence(std::memory_order_acquire);
  Message& message = *slot.message;
  auto make_payload = [&slot, payload_free](std::string_view view) -> Payload {
    if (payload_free) {
      slot.payload->assign(view);
    } else {
      slot.payload = std::make_shared<std::string>(view);
    }
    return slot.payload;
  };
  Reader r(bytes);
  if (!VersionOk(r) || !ReadMessageInto(r, message, make_payload) || !r.done()) {
    slot.message.reset();  // partly overwritten: never handed out
    slot.payload.reset();
    return std::nullopt;
  }
  MessagePtr decoded = slot.message;
  // Too big to keep around once its users are done with it.
  // The record's size bounds what its strings hold, without walking the message.
  if (bytes.size() > kMaxKeptBytes) {
    slot.message.reset();
    slot.payload.reset();
  }
  return decoded;
}

}  // namespace estuary::core::store
