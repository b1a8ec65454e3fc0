// libFuzzer target for the cluster frame bodies a peer sends after
// authentication (built with -DESTUARY_FUZZ=ON and clang): kForward (shared
// keys, forward id, the message record; also read as a kForwardReplay, the
// same after two bytes naming the gone node), kForwardSafe (forward ids),
// kClientAttached and kGroupConsumers (lists of strings), kSessionHandOff
// (delivery records) and its answer. The first input byte picks the
// decoder, the rest is the body. Beyond the absence of crashes it checks round trips: whatever
// decodes re-encodes to bytes that decode to the same values and re-encode
// to the same bytes, and PeekForwardClientId (which picks the receiving
// shard without decoding) agrees with the full decode. A kForward body is
// also decoded with one MessageRecycler kept across inputs (reusing the
// Messages of earlier inputs, as a receiving shard does), which must agree
// with the plain decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster-core/cluster/cluster_frames.h"
#include "cluster-core/store/record_codec.h"

using namespace estuary;
using namespace estuary::cluster;

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool SameBytes(const Payload& a, const Payload& b) {
  const size_t a_size = a ? a->size() : 0;
  const size_t b_size = b ? b->size() : 0;
  return a_size == b_size && (a_size == 0 || *a == *b);
}

bool SameMessage(const Message& a, const Message& b) {
  return a.id == b.id && a.topic == b.topic && SameBytes(a.payload, b.payload) && a.properties == b.properties &&
         a.qos == b.qos && a.retain == b.retain && a.durable == b.durable && a.origin.protocol == b.origin.protocol &&
         a.origin.client_id == b.origin.client_id && a.origin.node == b.origin.node &&
         SameBytes(a.amqp_extras, b.amqp_extras);
}

void FuzzForward(std::string_view body) {
  auto peeked = PeekForwardClientId(body);
  auto identity = PeekForwardIdentity(body);
  auto frame = DecodeForward(body);
  static core::store::MessageRecycler recycler;
  // Some decoded messages outlive later decodes, as queued ones do: they
  // must never change.
  static MessagePtr kept[3];
  static std::string kept_bytes[3];
  static size_t next = 0;
  auto recycled = DecodeForward(body, recycler);
  Check(recycled.has_value() == frame.has_value());
  for (size_t i = 0; i < 3; ++i) {
    if (kept[i]) Check(core::store::EncodeMessage(*kept[i]) == kept_bytes[i]);
  }
  if (!frame) return;
  Check(peeked.has_value() && *peeked == frame->message->origin.client_id);
  // The peek agrees with the decode on what it reads (dedup of QoS 2 copies).
  Check(identity.has_value() && identity->forward_id == frame->forward_id && identity->id == frame->message->id &&
        identity->qos == frame->message->qos);
  Check(recycled->forward_id == frame->forward_id && recycled->plain == frame->plain &&
        recycled->shared_keys == frame->shared_keys && SameMessage(*recycled->message, *frame->message));
  if (body.size() % 2 == 0) {
    kept[next % 3] = recycled->message;
    kept_bytes[next % 3] = core::store::EncodeMessage(*recycled->message);
    ++next;
  }
  const std::string once = EncodeForward(frame->forward_id, frame->plain, frame->shared_keys, *frame->message);
  std::string appended = "prefix";  // AppendForward appends: the bytes before stay
  AppendForward(appended, frame->forward_id, frame->plain, frame->shared_keys, *frame->message);
  Check(appended.substr(0, 6) == "prefix" && appended.substr(6) == once);
  auto again = DecodeForward(once);
  Check(again.has_value());
  Check(again->forward_id == frame->forward_id && again->plain == frame->plain &&
        again->shared_keys == frame->shared_keys && SameMessage(*again->message, *frame->message));
  Check(EncodeForward(again->forward_id, again->plain, again->shared_keys, *again->message) == once);
  auto peeked_again = PeekForwardClientId(once);
  Check(peeked_again.has_value() && *peeked_again == frame->message->origin.client_id);
}

// kForwardReplay: the same body read as a replay (two bytes of gone node,
// then a forward) must agree with the forward decoder on the rest.
void FuzzReplay(std::string_view body) {
  auto replay = DecodeReplay(body);
  auto forward = body.size() >= 2 ? DecodeForward(body.substr(2)) : std::nullopt;
  Check(replay.has_value() == forward.has_value());
  if (!replay) return;
  Check(replay->forward.forward_id == forward->forward_id && replay->forward.plain == forward->plain &&
        replay->forward.shared_keys == forward->shared_keys && SameMessage(*replay->forward.message, *forward->message));
  const std::string once = EncodeReplay(replay->gone, replay->forward.forward_id, replay->forward.plain,
                                        replay->forward.shared_keys, *replay->forward.message);
  auto again = DecodeReplay(once);
  Check(again.has_value() && again->gone == replay->gone && again->forward.forward_id == replay->forward.forward_id &&
        SameMessage(*again->forward.message, *replay->forward.message));
}

void FuzzForwardSafe(std::string_view body) {
  auto ids = DecodeForwardSafe(body);
  if (!ids) return;
  // The encoding is canonical: what decodes is exactly what re-encodes.
  Check(EncodeForwardSafe(*ids) == body);
}

void FuzzClientIds(std::string_view body) {
  auto ids = DecodeClientIds(body);
  if (!ids) return;
  Check(EncodeClientIds(*ids) == body);
}

void FuzzSessionHandOff(std::string_view body) {
  if (auto done = DecodeSessionHandOffDone(body)) {
    auto again = DecodeSessionHandOffDone(EncodeSessionHandOffDone(done->id, done->taken));
    Check(again.has_value() && again->id == done->id && again->taken == done->taken);
  }
  auto frame = DecodeSessionHandOff(body);
  if (!frame) return;
  const std::string once = EncodeSessionHandOff(frame->id, frame->client_id, frame->deliveries);
  auto again = DecodeSessionHandOff(once);
  Check(again.has_value() && again->id == frame->id && again->client_id == frame->client_id &&
        again->deliveries.size() == frame->deliveries.size());
  for (size_t i = 0; i < frame->deliveries.size(); ++i) {
    const core::Delivery& a = again->deliveries[i];
    const core::Delivery& b = frame->deliveries[i];
    Check(a.qos == b.qos && a.retain == b.retain && a.subscription_ids == b.subscription_ids &&
          SameMessage(*a.message, *b.message));
  }
  Check(EncodeSessionHandOff(again->id, again->client_id, again->deliveries) == once);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
      FuzzForward(body);
      FuzzReplay(body);
      break;
    case 1:
      FuzzForwardSafe(body);
      break;
    case 5:
      FuzzSessionHandOff(body);
      break;
    default:  // 2-4 (retained and route frames before they were retired)
      FuzzClientIds(body);
      break;
  }
  return 0;
}
