#include "cluster-core/store/record_codec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/pinned_bytes.h"
#include "cluster-core/router/router.h"

namespace estuary::core::store {
namespace {

MessagePtr FullMessage() {
  auto m = std::make_shared<Message>();
  m->id = MessageId{3, 0x0102030405060708ull, 0x0a0b0c0d};
  m->topic = "a/b";
  m->payload = MakePayload(std::string("pay\0load", 8));
  m->qos = QoS::kExactlyOnce;
  m->retain = true;
  m->durable = true;
  m->properties.content_type = "text/plain";
  m->properties.response_topic = "reply";
  m->properties.correlation_data = std::string("\x00\x01", 2);
  m->properties.payload_format = 1;
  m->properties.expiry_at_ms = 1'700'000'123'456;
  m->properties.user_properties = {{"k", "v"}, {"k", "w"}};
  m->origin = Origin{Protocol::kMqtt, "client", 3};
  m->amqp_extras = MakePayload("extras");
  return m;
}

void ExpectSameMessage(const Message& a, const Message& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.topic, b.topic);
  ASSERT_EQ(a.payload != nullptr, b.payload != nullptr);
  if (a.payload) {
    EXPECT_EQ(*a.payload, *b.payload);
  }
  EXPECT_EQ(a.qos, b.qos);
  EXPECT_EQ(a.retain, b.retain);
  EXPECT_EQ(a.durable, b.durable);
  EXPECT_EQ(a.properties, b.properties);
  EXPECT_EQ(a.origin.protocol, b.origin.protocol);
  EXPECT_EQ(a.origin.client_id, b.origin.client_id);
  EXPECT_EQ(a.origin.node, b.origin.node);
  ASSERT_EQ(a.amqp_extras != nullptr, b.amqp_extras != nullptr);
  if (a.amqp_extras) {
    EXPECT_EQ(*a.amqp_extras, *b.amqp_extras);
  }
}

TEST(RecordCodecTest, MessageRoundTripsEveryField) {
  auto original = FullMessage();
  auto decoded = DecodeMessage(EncodeMessage(*original));
  ASSERT_TRUE(decoded);
  ExpectSameMessage(*original, **decoded);
}

TEST(RecordCodecTest, TruncatedOrTrailingBytesAreRejected) {
  const std::string bytes = EncodeMessage(*FullMessage());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeMessage(bytes.substr(0, n))) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(DecodeMessage(bytes + "x"));
}

// A disconnected session with a will.
SessionRecord FullSessionRecord() {
  SessionRecord record;
  record.expiry_interval = 3600;
  record.disconnected_at_ms = 1'700'000'000'000;
  WillMessage will;
  will.message = FullMessage();
  will.delay_seconds = 30;
  will.expiry_interval = 60;
  record.will = will;
  return record;
}

TEST(RecordCodecTest, SessionRecordWithWillRoundTrips) {
  const SessionRecord record = FullSessionRecord();
  auto decoded = DecodeSession(EncodeSession(record));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->expiry_interval, 3600u);
  EXPECT_EQ(decoded->disconnected_at_ms, record.disconnected_at_ms);
  ASSERT_TRUE(decoded->will);
  EXPECT_EQ(decoded->will->delay_seconds, 30u);
  EXPECT_EQ(decoded->will->expiry_interval, 60u);
  ExpectSameMessage(*record.will->message, *decoded->will->message);
}

TEST(RecordCodecTest, OptionsDeliveryAndInflightRoundTrip) {
  SubscriptionOptions options{QoS::kAtLeastOnce, true, true, RetainHandling::kNever, 77};
  EXPECT_EQ(DecodeOptions(EncodeOptions(options)), options);

  Delivery delivery{FullMessage(), QoS::kAtLeastOnce, true, {1, 2}};
  auto decoded = DecodeDelivery(EncodeDelivery(delivery));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->qos, QoS::kAtLeastOnce);
  EXPECT_TRUE(decoded->retain);
  EXPECT_EQ(decoded->subscription_ids, (std::vector<uint32_t>{1, 2}));

  InflightDelivery released{Delivery{nullptr, QoS::kExactlyOnce, false, {}}, InflightPhase::kAwaitingPubcomp, 9};
  auto inflight = DecodeInflight(EncodeInflight(released));
  ASSERT_TRUE(inflight);
  EXPECT_EQ(inflight->phase, InflightPhase::kAwaitingPubcomp);
  EXPECT_EQ(inflight->sent_order, 9u);
  EXPECT_EQ(inflight->delivery.message, nullptr);
  EXPECT_EQ(inflight->released_id, MessageId{});  // not known: the record carries none
  // Before PUBREC the message is required.
  released.phase = InflightPhase::kAwaitingPubrec;
  EXPECT_FALSE(DecodeInflight(EncodeInflight(released)));
}

// Past PUBREC the message id stays (a trailing field), so a copy taken over
// elsewhere knows the message was delivered; an older reader's record
// (with_trailing false) leaves it out.
TEST(RecordCodecTest, ReleasedInflightKeepsTheMessageId) {
  const MessageId id{3, 0x0102030405060708ull, 77};
  InflightDelivery released{Delivery{nullptr, QoS::kExactlyOnce, false, {}}, InflightPhase::kAwaitingPubcomp, 9, id};
  auto inflight = DecodeInflight(EncodeInflight(released));
  ASSERT_TRUE(inflight);
  EXPECT_EQ(inflight->released_id, id);
  EXPECT_EQ(inflight->delivery.message, nullptr);
  auto plain = DecodeInflight(EncodeInflight(released, /*with_trailing=*/false));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->released_id, MessageId{});
  EXPECT_EQ(EncodeInflight(released, false), EncodeInflight(InflightDelivery{released.delivery, released.phase, 9}));
}

// A completed QoS 2 delivery's marker: its own phase byte, which the
// in-flight decoder (and so every older binary) refuses.
TEST(RecordCodecTest, CompletedMarkerRoundTripsAndIsNoInflightRecord) {
  const MessageId id{2, 0x1122334455667788ull, 5};
  const std::string bytes = EncodeCompleted(id);
  EXPECT_EQ(DecodeCompleted(bytes), id);
  EXPECT_FALSE(DecodeInflight(bytes));
  EXPECT_FALSE(DecodeCompleted(bytes + "x"));
  EXPECT_FALSE(DecodeCompleted(bytes.substr(0, bytes.size() - 1)));
  EXPECT_FALSE(DecodeCompleted(EncodeCompleted(MessageId{})));
  const InflightDelivery sent{Delivery{FullMessage(), QoS::kExactlyOnce, false, {}}, InflightPhase::kAwaitingPubrec, 4};
  EXPECT_FALSE(DecodeCompleted(EncodeInflight(sent)));
}

TEST(RecordCodecTest, QueueKeysSortInSequenceOrderAndSessionsDoNotCollide) {
  EXPECT_LT(QueuedKey("c", 255), QueuedKey("c", 256));
  EXPECT_LT(QueuedKey("c", 1), QueuedKey("c", uint64_t{1} << 40));
  // "ab" is not a prefix match for "a": the length comes first.
  const std::string prefix = SessionPrefix(kQueuedTag, "a");
  EXPECT_NE(QueuedKey("ab", 1).compare(0, prefix.size(), prefix), 0);
  auto parsed = ParseSessionKey(InflightKey("client", 0x1234));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->tag, kInflightTag);
  EXPECT_EQ(parsed->client_id, "client");
  EXPECT_EQ(DecodeBigEndian(parsed->rest), 0x1234u);
  EXPECT_FALSE(ParseSessionKey(std::string("q\x00\x09short", 8)));
}

// A message with every optional part absent and strings longer than the
// short-string buffer (so reusing their heap buffers shows).
std::shared_ptr<Message> PlainMessage(int n) {
  auto m = std::make_shared<Message>();
  m->id = MessageId{2, 1000u + n, static_cast<uint32_t>(n)};
  m->topic = "plant/line-" + std::to_string(n) + "/temperature/sensor";
  m->payload = MakePayload(std::string(64, static_cast<char>('a' + n % 26)));
  m->qos = QoS::kAtMostOnce;
  m->origin = Origin{Protocol::kAmqp, "publisher-with-a-long-client-id-" + std::to_string(n), 2};
  return m;
}

// Decodes `bytes` with the recycler until it is back at the slot it used
// first (kSlots decodes), returning the first result.
MessagePtr DecodeAround(MessageRecycler& recycler, const std::string& bytes, const std::string& filler) {
  auto first = recycler.Decode(bytes);
  EXPECT_TRUE(first);
  for (size_t i = 1; i < MessageRecycler::kSlots; ++i) EXPECT_TRUE(recycler.Decode(filler));
  return first ? *first : nullptr;
}

TEST(RecordCodecTest, RecyclerDecodesLikeDecodeMessageWhetherItReusesOrNot) {
  MessageRecycler recycler;
  const std::string filler = EncodeMessage(*PlainMessage(99));
  // Full after plain and plain after full in the same slot: nothing of the
  // previous message may show through.
  const std::vector<MessagePtr> sequence = {PlainMessage(1), FullMessage(), PlainMessage(2), PlainMessage(3),
                                            FullMessage(), FullMessage(), PlainMessage(4)};
  const Message* previous = nullptr;
  int reused = 0;
  for (const MessagePtr& original : sequence) {
    MessagePtr decoded = DecodeAround(recycler, EncodeMessage(*original), filler);
    ASSERT_TRUE(decoded);
    ExpectSameMessage(*original, *decoded);
    EXPECT_EQ(EncodeMessage(*decoded), EncodeMessage(*original));
    if (decoded.get() == previous) ++reused;
    previous = decoded.get();
  }
  EXPECT_EQ(reused, static_cast<int>(sequence.size()) - 1);  // released each time: the same Message each time
}

TEST(RecordCodecTest, RecyclerReusesTheBuffersOfAReleasedMessage) {
  MessageRecycler recycler;
  const std::string filler = EncodeMessage(*PlainMessage(99));
  MessagePtr first = DecodeAround(recycler, EncodeMessage(*PlainMessage(1)), filler);
  const Message* message = first.get();
  const char* topic = first->topic.data();
  const char* client_id = first->origin.client_id.data();
  const std::string* payload = first->payload.get();
  first.reset();
  MessagePtr second = DecodeAround(recycler, EncodeMessage(*PlainMessage(2)), filler);
  EXPECT_EQ(second.get(), message);
  EXPECT_EQ(second->topic.data(), topic);
  EXPECT_EQ(second->origin.client_id.data(), client_id);
  EXPECT_EQ(second->payload.get(), payload);
  ExpectSameMessage(*PlainMessage(2), *second);
}

TEST(RecordCodecTest, RecyclerNeverChangesAMessageOrPayloadSomeoneHolds) {
  MessageRecycler recycler;
  const std::string filler = EncodeMessage(*PlainMessage(99));
  MessagePtr held = DecodeAround(recycler, EncodeMessage(*PlainMessage(1)), filler);
  MessagePtr other = DecodeAround(recycler, EncodeMessage(*PlainMessage(2)), filler);  // same slot
  EXPECT_NE(other.get(), held.get());
  ExpectSameMessage(*PlainMessage(1), *held);
  ExpectSameMessage(*PlainMessage(2), *other);
  // Only the payload is still held (a frontend's packet keeps it, say).
  Payload payload = other->payload;
  other.reset();
  MessagePtr third = DecodeAround(recycler, EncodeMessage(*PlainMessage(3)), filler);
  EXPECT_EQ(*payload, *PlainMessage(2)->payload);
  EXPECT_NE(third->payload, payload);
  ExpectSameMessage(*PlainMessage(3), *third);
}

TEST(RecordCodecTest, RecyclerRejectsWhatDecodeMessageRejectsAndKeepsNoLargeMessage) {
  MessageRecycler recycler;
  const std::string bytes = EncodeMessage(*FullMessage());
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(recycler.Decode(bytes.substr(0, n))) << n;
  EXPECT_FALSE(recycler.Decode(bytes + "x"));
  auto decoded = recycler.Decode(bytes);  // and it still decodes after
  ASSERT_TRUE(decoded);
  ExpectSameMessage(*FullMessage(), **decoded);

  auto large = PlainMessage(5);
  large->payload = MakePayload(std::string(MessageRecycler::kMaxKeptBytes, 'x'));
  auto with_extras = PlainMessage(7);  // a small payload, large AMQP extras
  with_extras->amqp_extras = MakePayload(std::string(MessageRecycler::kMaxKeptBytes, 'e'));
  auto small = recycler.Decode(EncodeMessage(*PlainMessage(6)));
  auto big = recycler.Decode(EncodeMessage(*large));
  auto extras = recycler.Decode(EncodeMessage(*with_extras));
  ASSERT_TRUE(small && big && extras);
  std::weak_ptr<const Message> small_weak = *small, big_weak = *big, extras_weak = *extras;
  small->reset();
  big->reset();
  extras->reset();
  EXPECT_FALSE(small_weak.expired());  // kept for reuse
  EXPECT_TRUE(big_weak.expired());     // not kept: gone with its last user
  EXPECT_TRUE(extras_weak.expired());
}

std::string SharedKeyForTests() { return SharedKey("g", "jobs/+"); }

// A queued delivery record as written before delivery records had trailing
// fields (and so before the shared group's key was stored), byte by byte:
// QoS 1, no retain, subscription id 5, a message on "t" with payload "p"
// from MQTT client "c" on node 2, nothing optional.
std::string RecordWithoutTrailingFields() {
  using namespace std::string_literals;
  return "\x01"s                                       // format version
         "\x01\x00"s                                   // QoS, retain
         "\x00\x00\x00\x01"s "\x00\x00\x00\x05"s       // one subscription id: 5
         "\x01"s                                       // has a message
         "\x00\x02"s "\x00\x00\x00\x00\x00\x00\x00\x07"s "\x00\x00\x00\x03"s  // id
         "\x00\x00\x00\x01"s "t"                       // topic
         "\x01"s "\x00\x00\x00\x01"s "p"               // payload
         "\x01"s                                       // flags: QoS 1
         "\x00\x00\x00\x00\x00"s                       // no content type .. expiry
         "\x00\x00\x00\x00"s                           // no user properties
         "\x00"s "\x00\x00\x00\x01"s "c" "\x00\x02"s   // origin: MQTT, "c", node 2
         "\x00"s;                                      // no AMQP extras
}

TEST(RecordCodecTest, DeliveryRecordsWrittenBeforeTheSharedKeyDecodeWithoutOne) {
  const std::string old = RecordWithoutTrailingFields();
  auto decoded = DecodeDelivery(old);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->shared_key, nullptr);
  EXPECT_EQ(decoded->qos, QoS::kAtLeastOnce);
  EXPECT_EQ(decoded->subscription_ids, (std::vector<uint32_t>{5}));
  EXPECT_EQ(decoded->message->topic, "t");
  EXPECT_EQ(decoded->message->origin.client_id, "c");
  // A delivery without a key is still written exactly as then, so a binary
  // from before the key reads it.
  EXPECT_EQ(EncodeDelivery(*decoded), old);
  // The in-flight record is the same delivery after phase and send order.
  const std::string old_inflight = std::string("\x01\x00", 2) + std::string(7, '\0') + "\x09" + old.substr(1);
  auto inflight = DecodeInflight(old_inflight);
  ASSERT_TRUE(inflight);
  EXPECT_EQ(inflight->phase, InflightPhase::kAwaitingPuback);
  EXPECT_EQ(inflight->sent_order, 9u);
  EXPECT_EQ(inflight->delivery.shared_key, nullptr);
  EXPECT_EQ(EncodeInflight(*inflight), old_inflight);
}

TEST(RecordCodecTest, TheGroupKeyCanBeLeftOutForOlderReaders) {
  Delivery delivery{FullMessage(), QoS::kAtLeastOnce, false, {}};
  delivery.shared_key = std::make_shared<const std::string>(SharedKeyForTests());
  Delivery plain = delivery;
  plain.shared_key = nullptr;
  // Without the key: the bytes of a delivery that never had one.
  EXPECT_EQ(EncodeDelivery(delivery, /*with_group_key=*/false), EncodeDelivery(plain));
  EXPECT_NE(EncodeDelivery(delivery), EncodeDelivery(plain));
  const InflightDelivery inflight{delivery, InflightPhase::kAwaitingPuback, 3};
  const InflightDelivery plain_inflight{plain, InflightPhase::kAwaitingPuback, 3};
  EXPECT_EQ(EncodeInflight(inflight, false), EncodeInflight(plain_inflight));
}

TEST(RecordCodecTest, QueuedAndInflightRecordsKeepTheSharedGroupsKey) {
  const std::string key = SharedKeyForTests();
  Delivery delivery{FullMessage(), QoS::kExactlyOnce, false, {7}};
  delivery.shared_key = std::make_shared<const std::string>(key);
  const std::string bytes = EncodeDelivery(delivery);
  auto decoded = DecodeDelivery(bytes);
  ASSERT_TRUE(decoded);
  ASSERT_NE(decoded->shared_key, nullptr);
  EXPECT_EQ(*decoded->shared_key, key);
  EXPECT_EQ(decoded->subscription_ids, (std::vector<uint32_t>{7}));
  ExpectSameMessage(*delivery.message, *decoded->message);
  EXPECT_EQ(EncodeDelivery(*decoded), bytes);
  // The key is the record's last field: tag 1, length, the key.
  EXPECT_EQ(bytes.substr(bytes.size() - key.size() - 5), std::string("\x01\x00\x00\x00", 4) +
                                                             static_cast<char>(key.size()) + key);

  for (InflightPhase phase : {InflightPhase::kAwaitingPuback, InflightPhase::kAwaitingPubrec}) {
    auto inflight = DecodeInflight(EncodeInflight(InflightDelivery{delivery, phase, 12}));
    ASSERT_TRUE(inflight);
    EXPECT_EQ(inflight->phase, phase);
    EXPECT_EQ(inflight->sent_order, 12u);
    ASSERT_NE(inflight->delivery.shared_key, nullptr);
    EXPECT_EQ(*inflight->delivery.shared_key, key);
  }
  // Past PUBREC the message is gone; the key may stay.
  Delivery released{nullptr, QoS::kExactlyOnce, false, {}};
  released.shared_key = delivery.shared_key;
  auto pubcomp = DecodeInflight(EncodeInflight(InflightDelivery{released, InflightPhase::kAwaitingPubcomp, 3}));
  ASSERT_TRUE(pubcomp);
  EXPECT_EQ(pubcomp->delivery.message, nullptr);
  ASSERT_NE(pubcomp->delivery.shared_key, nullptr);
  EXPECT_EQ(*pubcomp->delivery.shared_key, key);
}

TEST(RecordCodecTest, TrailingFieldsMustBeWholeAndUnknownOnesAreSkipped) {
  const std::string old = RecordWithoutTrailingFields();
  Delivery keyed = *DecodeDelivery(old);
  keyed.shared_key = std::make_shared<const std::string>(SharedKeyForTests());
  const std::string bytes = EncodeDelivery(keyed);
  // Cut anywhere inside the key's field: rejected, never read as "no key".
  for (size_t n = old.size() + 1; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeDelivery(bytes.substr(0, n))) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(DecodeDelivery(bytes + "x"));
  // The key twice: malformed.
  EXPECT_FALSE(DecodeDelivery(bytes + bytes.substr(old.size())));
  // A field a later format may add (tag 9) is skipped, before or after the key.
  const std::string later = std::string("\x09\x00\x00\x00\x02", 5) + "zz";
  for (const std::string& with_later : {old + later + bytes.substr(old.size()), bytes + later}) {
    auto decoded = DecodeDelivery(with_later);
    ASSERT_TRUE(decoded);
    ASSERT_NE(decoded->shared_key, nullptr);
    EXPECT_EQ(*decoded->shared_key, SharedKeyForTests());
    EXPECT_EQ(EncodeDelivery(*decoded), bytes);  // written back without it
  }
}

// The fuzzers' promise for delivery records, over every one-byte change of
// a keyed record: whatever decodes encodes to bytes that decode to the same.
TEST(RecordCodecTest, EveryOneByteChangeOfAKeyedRecordDecodesStablyOrNotAtAll) {
  Delivery keyed{FullMessage(), QoS::kAtLeastOnce, true, {1, 2}};
  keyed.shared_key = std::make_shared<const std::string>(SharedKeyForTests());
  const std::string bytes = EncodeInflight(InflightDelivery{keyed, InflightPhase::kAwaitingPuback, 4});
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int flip : {0x01, 0x80, 0xFF}) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(changed[i] ^ flip);
      auto decoded = DecodeInflight(changed);
      if (!decoded) continue;
      const std::string again = EncodeInflight(*decoded);
      auto redecoded = DecodeInflight(again);
      ASSERT_TRUE(redecoded) << "byte " << i;
      EXPECT_EQ(EncodeInflight(*redecoded), again) << "byte " << i;
      EXPECT_EQ(redecoded->delivery.shared_key == nullptr, decoded->delivery.shared_key == nullptr);
    }
  }
}

}  // namespace
// Writes record_codec_fuzz's seeds when ESTUARY_WRITE_CORPUS names a
// directory: a queued and an in-flight record, with and without a group key
// (first byte: 0 queued, 1 in flight).
TEST(RecordCodecTest, SeedCorpus) {
  const char* dir = std::getenv("ESTUARY_WRITE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set ESTUARY_WRITE_CORPUS=dir to write the seeds";
  Delivery plain{FullMessage(), QoS::kAtLeastOnce, false, {3}};
  Delivery keyed = plain;
  keyed.shared_key = std::make_shared<const std::string>(SharedKeyForTests());
  auto write = [&](const std::string& name, char kind, const std::string& record) {
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << kind << record;
  };
  write("queued", '\0', EncodeDelivery(plain));
  write("queued_keyed", '\0', EncodeDelivery(keyed));
  write("inflight", '\1', EncodeInflight(InflightDelivery{plain, InflightPhase::kAwaitingPuback, 4}));
  write("inflight_keyed", '\1', EncodeInflight(InflightDelivery{keyed, InflightPhase::kAwaitingPubrec, 5}));
  write("inflight_released", '\1',
        EncodeInflight(InflightDelivery{Delivery{nullptr, QoS::kExactlyOnce, false, {}},
                                        InflightPhase::kAwaitingPubcomp, 6, MessageId{1, 99, 2}}));
  write("completed", '\1', EncodeCompleted(MessageId{1, 100, 3}));
}

namespace {

// Every record's and key's bytes, pinned (issue 23: the byte codec was
// replaced; a node must read the store it wrote before).
TEST(RecordCodecTest, BytesArePinned) {
  EXPECT_EQ(base::PinnedBytes(EncodeMessage(*FullMessage())), "127 bytes fnv1a64=1b530ff22b1c9a24");
  std::string appended = "head";
  AppendMessage(appended, *FullMessage());
  EXPECT_EQ(base::PinnedBytes(appended), "131 bytes fnv1a64=c61ca39ae5af0d5a");
  EXPECT_EQ(base::PinnedBytes(EncodeSession(FullSessionRecord())), "149 bytes fnv1a64=91e4410e2f7bc542");
  EXPECT_EQ(base::PinnedBytes(EncodeOptions({QoS::kAtLeastOnce, true, true, RetainHandling::kNever, 77})),
            "8 bytes fnv1a64=d2b9fb6f9fc7c529");
  const Delivery delivery{FullMessage(), QoS::kAtLeastOnce, true, {1, 2}};
  EXPECT_EQ(base::PinnedBytes(EncodeDelivery(delivery)), "142 bytes fnv1a64=12e15647710738c4");
  EXPECT_EQ(base::PinnedBytes(EncodeInflight({delivery, InflightPhase::kAwaitingPuback, 9})),
            "151 bytes fnv1a64=d47b1254b2354141");
  const InflightDelivery released{Delivery{nullptr, QoS::kExactlyOnce, false, {}}, InflightPhase::kAwaitingPubcomp, 9,
                                  MessageId{3, 0x0102030405060708ULL, 77}};
  EXPECT_EQ(base::PinnedBytes(EncodeInflight(released)), "36 bytes fnv1a64=3aacc91981f6e245");
  EXPECT_EQ(base::PinnedBytes(EncodeCompleted(MessageId{3, 0x0102030405060708ULL, 77})),
            "16 bytes fnv1a64=2839e0af580e5363");
  EXPECT_EQ(base::PinnedBytes(SessionKey("c") + SubscriptionKey("c", "a/#") + QueuedKey("c", 0x0102030405060708ULL) +
                              InflightKey("c", 513) + InboundKey("c", 258) + RetainedKey("t")),
            "37 bytes fnv1a64=0e7728fb2476291f");
}

}  // namespace
}  // namespace estuary::core::store
