#include "cluster-core/cluster/cluster_frames.h"

#include <gtest/gtest.h>

#include "base/pinned_bytes.h"

namespace estuary::cluster {
namespace {

MessagePtr Make(std::string topic, std::string payload) {
  auto message = std::make_shared<Message>();
  message->id = MessageId{3, 12345, 7};
  message->topic = std::move(topic);
  message->payload = MakePayload(std::move(payload));
  message->qos = QoS::kExactlyOnce;
  message->properties.user_properties.push_back({"k", "v"});
  message->origin = Origin{Protocol::kMqtt, "publisher", 3};
  return message;
}

TEST(ClusterFramesTest, ForwardRoundTripKeepsTheWholeMessage) {
  auto message = Make("t/1", std::string(1000, 'x'));
  auto frame = DecodeForward(EncodeForward(42, true, {"k1", "k2"}, *message));
  ASSERT_TRUE(frame);
  EXPECT_EQ(frame->forward_id, 42u);
  EXPECT_TRUE(frame->plain);
  EXPECT_EQ(frame->shared_keys, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(frame->message->topic, "t/1");
  EXPECT_EQ(*frame->message->payload, *message->payload);
  EXPECT_EQ(frame->message->qos, QoS::kExactlyOnce);
  EXPECT_EQ(frame->message->origin.client_id, "publisher");
  EXPECT_EQ(frame->message->properties, message->properties);
  EXPECT_EQ(frame->message->id, message->id);
}

TEST(ClusterFramesTest, AppendForwardAppendsEncodeForwardsBytes) {
  auto message = std::make_shared<Message>(*Make("t/2", std::string(300, 'y')));
  message->properties.content_type = "text/plain";
  message->properties.expiry_at_ms = 99;
  std::string out = "prefix";
  AppendForward(out, 7, false, {"g"}, *message);
  EXPECT_EQ(out, "prefix" + EncodeForward(7, false, {"g"}, *message));
  out.clear();  // a reused buffer
  AppendForward(out, 8, true, {}, *Make("u", ""));
  EXPECT_EQ(out, EncodeForward(8, true, {}, *Make("u", "")));
}

TEST(ClusterFramesTest, PeekForwardClientIdReadsOnlyTheOrigin) {
  auto message = std::make_shared<Message>(*Make("t/3", "payload"));
  message->properties.response_topic = "r";
  message->properties.payload_format = 1;
  const std::string forward = EncodeForward(5, true, {"k1", "k2"}, *message);
  EXPECT_EQ(PeekForwardClientId(forward), std::optional<std::string_view>("publisher"));
  size_t last_good = forward.size();
  for (size_t cut = 0; cut < forward.size(); ++cut) {
    if (PeekForwardClientId(std::string_view(forward).substr(0, cut))) {
      last_good = std::min(last_good, cut);
    }
  }
  // Only cuts after the client id (its node id and the AMQP flag) still peek.
  EXPECT_EQ(last_good, forward.size() - 3);
}

TEST(ClusterFramesTest, SafeAndClientIdsRoundTrip) {
  EXPECT_EQ(DecodeForwardSafe(EncodeForwardSafe({1, 2, 300})), (std::vector<uint64_t>{1, 2, 300}));
  EXPECT_EQ(DecodeClientIds(EncodeClientIds({"c1", ""})), (std::vector<std::string>{"c1", ""}));
}

TEST(ClusterFramesTest, TruncatedOrWrongVersionBodiesAreRejected) {
  const std::string forward = EncodeForward(1, false, {"k"}, *Make("t", "payload"));
  for (size_t cut = 0; cut < forward.size(); ++cut) {
    EXPECT_FALSE(DecodeForward(std::string_view(forward).substr(0, cut))) << cut;
  }
  std::string ids = EncodeClientIds({"a"});
  EXPECT_FALSE(DecodeClientIds(ids + "x"));
  ids[0] = 9;
  EXPECT_FALSE(DecodeClientIds(ids));
  EXPECT_FALSE(DecodeClientIds(""));
}

TEST(ClusterFramesTest, SessionHandOffRoundTripsEveryDeliveryAndRejectsATruncatedOne) {
  core::Delivery first;
  first.message = Make("t/1", "one");
  first.qos = QoS::kAtLeastOnce;
  first.subscription_ids = {4, 9};
  core::Delivery second;
  second.message = Make("t/2", std::string(500, 'z'));
  second.qos = QoS::kExactlyOnce;
  second.retain = true;
  const std::string body = EncodeSessionHandOff(77, "device-1", {first, second});
  auto frame = DecodeSessionHandOff(body);
  ASSERT_TRUE(frame);
  EXPECT_EQ(frame->id, 77u);
  EXPECT_EQ(frame->client_id, "device-1");
  ASSERT_EQ(frame->deliveries.size(), 2u);
  EXPECT_EQ(frame->deliveries[0].qos, QoS::kAtLeastOnce);
  EXPECT_EQ(frame->deliveries[0].subscription_ids, (std::vector<uint32_t>{4, 9}));
  EXPECT_EQ(frame->deliveries[0].message->topic, "t/1");
  EXPECT_TRUE(frame->deliveries[1].retain);
  EXPECT_EQ(*frame->deliveries[1].message->payload, std::string(500, 'z'));
  EXPECT_EQ(frame->deliveries[1].message->id, second.message->id);
  for (size_t cut = 0; cut < body.size(); ++cut) {
    EXPECT_FALSE(DecodeSessionHandOff(std::string_view(body).substr(0, cut))) << cut;
  }
  auto done = DecodeSessionHandOffDone(EncodeSessionHandOffDone(77, true));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->id, 77u);
  EXPECT_TRUE(done->taken);
  EXPECT_FALSE(DecodeSessionHandOffDone(EncodeSessionHandOffDone(1, false) + "x"));
}

// Every frame's bytes, pinned (issue 23: the byte codec was replaced;
// nodes of the old and the new build must still talk).
TEST(ClusterFramesTest, BytesArePinned) {
  Message full = *Make("t/1", "payload");
  full.properties.content_type = "text/plain";
  full.properties.expiry_at_ms = 1700000000000;
  const MessagePtr message = std::make_shared<const Message>(full);
  EXPECT_EQ(base::PinnedBytes(EncodeForward(0x0102030405060708ULL, true, {"k1", "k2"}, *message)),
            "113 bytes fnv1a64=da7a74590d3764c5");
  EXPECT_EQ(base::PinnedBytes(EncodeReplay(515, 42, false, {"k"}, *message)), "110 bytes fnv1a64=c701e3cf95064bbf");
  EXPECT_EQ(base::PinnedBytes(EncodeForwardSafe({1, 0x0102030405060708ULL})), "21 bytes fnv1a64=163c949eb4f9fc0d");
  EXPECT_EQ(base::PinnedBytes(EncodeClientIds({"a", "client-2"})), "18 bytes fnv1a64=9370275eea67aaa8");
}

}  // namespace
}  // namespace estuary::cluster
