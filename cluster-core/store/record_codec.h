#pragma once
// The durable layer's key layout and value encodings (docs/storage.md,
// "What a node stores"). Pure functions: bytes in, bytes out.
//
// Keys (one StorageEngine per shard; bytewise order):
//   's' L id                      session record (expiry, will, disconnect time)
//   'b' L id filter               a subscription's options
//   'q' L id seq(u64 BE)          a queued QoS 1/2 delivery, in queue order
//   'f' L id packet-id(u16 BE)    an outbound delivery in flight, or a
//                                 completed QoS 2 one's marker
//   'i' L id packet-id(u16 BE)    an inbound QoS 2 packet id awaiting PUBREL
//   'r' topic                     a retained message (on the shard owning the topic)
// where L is the client id's length as u16 big-endian, so one session's keys
// of one kind share a prefix and never collide with a longer id's.
// Values start with a format version byte.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cluster-core/broker/session.h"
#include "model/message.h"

namespace estuary::core::store {

inline constexpr char kSessionTag = 's';
inline constexpr char kSubscriptionTag = 'b';
inline constexpr char kQueuedTag = 'q';
inline constexpr char kInflightTag = 'f';
inline constexpr char kInboundTag = 'i';
inline constexpr char kRetainedTag = 'r';

// The prefix of every key of `tag` for one client id.
std::string SessionPrefix(char tag, std::string_view client_id);
std::string SessionKey(std::string_view client_id);
std::string SubscriptionKey(std::string_view client_id, std::string_view filter);
std::string QueuedKey(std::string_view client_id, uint64_t seq);
std::string InflightKey(std::string_view client_id, uint16_t packet_id);
std::string InboundKey(std::string_view client_id, uint16_t packet_id);
std::string RetainedKey(std::string_view topic);

// A per-session key split into its parts; nullopt when malformed.
struct ParsedKey {
  char tag = 0;
  std::string client_id;
  std::string rest;  // filter, BE seq or BE packet id
};
std::optional<ParsedKey> ParseSessionKey(std::string_view key);
uint64_t DecodeBigEndian(std::string_view bytes);  // up to 8 bytes

// One change to a session key, as replicated to the partitions that keep
// sessions (ShardStore::set_replicate).
struct SessionChange {
  enum Kind : uint8_t { kDelete = 0, kPut = 1, kWipe = 2 };
  Kind kind = kPut;
  std::string key;    // kWipe: the client id
  std::string value;  // kPut only
};

// The session record.
struct SessionRecord {
  uint32_t expiry_interval = 0;
  int64_t disconnected_at_ms = 0;  // wall clock; 0 = connected when written
  std::optional<WillMessage> will;
};

std::string EncodeSession(const SessionRecord& record);
std::optional<SessionRecord> DecodeSession(std::string_view bytes);

std::string EncodeOptions(const SubscriptionOptions& options);
std::optional<SubscriptionOptions> DecodeOptions(std::string_view bytes);

// A delivery with its message and, if it was made through a shared
// subscription, its group's key (store_seq is not part of the value). A
// decoded key is a fresh string: the broker points it at its group's
// key_ref (ShardBroker::TagSharedDeliveries). Records written before the
// key was stored decode with no key. `with_group_key` false leaves the key
// out (the record an older binary reads: ShardStore::set_group_keys).
std::string EncodeDelivery(const Delivery& delivery, bool with_group_key = true);
std::optional<Delivery> DecodeDelivery(std::string_view bytes);

// An in-flight delivery; after PUBREC the message is gone (null) and its
// id is kept (InflightDelivery::released_id) in a trailing field.
// `with_trailing` false leaves the trailing fields out (the record an older
// binary reads: ShardStore::set_group_keys).
std::string EncodeInflight(const InflightDelivery& inflight, bool with_trailing = true);
std::optional<InflightDelivery> DecodeInflight(std::string_view bytes);

// A completed QoS 2 delivery's marker under its packet id's 'f' key
// (Session::completed()): the format version, phase byte 3 (which
// DecodeInflight, and every older binary, refuses) and the message id.
std::string EncodeCompleted(const MessageId& id);
std::optional<MessageId> DecodeCompleted(std::string_view bytes);

std::string EncodeMessage(const Message& message);
// EncodeMessage's bytes appended to `out` (a frame under construction), so
// the payload is copied once, straight into the frame.
void AppendMessage(std::string& out, const Message& message);
// The number of bytes AppendMessage appends for `message`.
size_t AppendedMessageSize(const Message& message);
// The origin client id of EncodeMessage's bytes, without decoding the rest
// (a view into `bytes`); nullopt if they end before it.
std::optional<std::string_view> PeekOriginClientId(std::string_view bytes);
// The id and QoS of the message record in `bytes`, decoding nothing else.
struct MessageIdentity {
  MessageId id;
  QoS qos = QoS::kAtMostOnce;
};
std::optional<MessageIdentity> PeekIdentity(std::string_view bytes);
std::optional<MessagePtr> DecodeMessage(std::string_view bytes);

// Decodes message records into Messages it had decoded before, once nobody
// else holds them: a forward received from another node is usually
// delivered and dropped before the next few arrive, so in a steady stream
// the Message, its topic, client id and payload buffers are reused and a
// decode allocates nothing.
//
// It keeps a reference to each of the last kSlots messages it decoded and
// reuses one only when that reference is the last (use_count() == 1), so
// a Message is never changed while anyone else can see it; a message
// still in use is left to its holders and the slot gets a fresh one. At
// most kSlots messages of up to kMaxKeptBytes each (by the size of their
// record) stay alive after their last user; larger messages are not kept.
//
// Not thread-safe: one per thread (each shard decodes with its own), but
// the messages it hands out may be read and released on any thread.
class MessageRecycler {
 public:
  static constexpr size_t kSlots = 64;
  static constexpr size_t kMaxKeptBytes = 8192;
  // As DecodeMessage.
  std::optional<MessagePtr> Decode(std::string_view bytes);

 private:
  struct Slot {
    std::shared_ptr<Message> message;
    std::shared_ptr<std::string> payload;  // message->payload, writable while only the slot holds it
  };
  Slot slots_[kSlots];
  size_t next_ = 0;
};

}  // namespace estuary::core::store
