#include "conformance/mqtt/raw_fixture.h"

#include <algorithm>

namespace estuary::conformance {

void RawFixture::ExpectRejected(const std::string& bytes, std::vector<ReasonCode> reasons) {
  auto client = Connect(Unique("offender"));
  client->SendBytes(bytes);
  const auto reason = ExpectDisconnected(*client);
  if (version_ == ProtocolVersion::kV5) {
    ASSERT_TRUE(reason.has_value()) << "closed without DISCONNECT";
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), *reason), reasons.end())
        << "DISCONNECT reason " << mqtt::ToString(*reason);
  } else {
    EXPECT_FALSE(reason.has_value()) << "a 3.1.1 server sent DISCONNECT";
  }
  ExpectBrokerServes();
}

void RawFixture::ExpectConnectRefused(const std::string& bytes, std::optional<ReasonCode> refusal) {
  auto client = Open();
  client->SendBytes(bytes);
  auto first = client->Receive();
  if (refusal) {
    ASSERT_TRUE(first.has_value()) << "no CONNACK";
    auto* connack = std::get_if<mqtt::ConnackPacket>(&*first);
    ASSERT_NE(connack, nullptr) << "first packet is " << mqtt::ToString(mqtt::TypeOf(*first));
    EXPECT_EQ(connack->reason, *refusal) << mqtt::ToString(connack->reason);
    EXPECT_FALSE(connack->session_present);
  } else {
    EXPECT_FALSE(first.has_value()) << "got " << mqtt::ToString(mqtt::TypeOf(*first));
  }
  EXPECT_TRUE(client->WaitClosed()) << "the connection stayed open";
  ExpectBrokerServes();
}

void RawFixture::ExpectMarkerFirst(RawClient& subscriber, const std::string& marker) {
  auto first = ReceivePublish(subscriber);
  ASSERT_TRUE(first.has_value()) << "not even the marker arrived";
  EXPECT_EQ(first->topic, marker) << "got '" << first->payload << "' on " << first->topic << " first";
}

}  // namespace estuary::conformance
