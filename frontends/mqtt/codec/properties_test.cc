// v5 properties (§2.2.2): which packet may carry which, duplicates, values.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "frontends/mqtt/codec/test_util.h"

namespace estuary::mqtt {
namespace {

using testing::Bytes;
using testing::DecodeReason;
using testing::Frame;
using testing::Str;

constexpr auto kV5 = ProtocolVersion::kV5;

// The properties with their length in front (lengths here stay under 128).
std::string List(std::string_view properties) {
  return Bytes({static_cast<int>(properties.size())}) + std::string(properties);
}

using Builder = std::function<std::string(std::string_view properties)>;

// One v5 packet per place properties can appear, with `properties` there.
const std::map<std::string, Builder>& Builders() {
  static const auto* builders = new std::map<std::string, Builder>{
      {"CONNECT", [](auto p) {
         return Frame(0x10, Str("MQTT") + Bytes({5, 0x02, 0, 60}) + List(p) + Str("c"));
       }},
      {"WILL", [](auto p) {
         return Frame(0x10, Str("MQTT") + Bytes({5, 0x06, 0, 60, 0}) + Str("c") + List(p) +
                                Str("w") + Str("m"));
       }},
      {"CONNACK", [](auto p) { return Frame(0x20, Bytes({0, 0}) + List(p)); }},
      {"PUBLISH", [](auto p) { return Frame(0x32, Str("t") + Bytes({0, 1}) + List(p) + "x"); }},
      {"PUBACK", [](auto p) { return Frame(0x40, Bytes({0, 1, 0}) + List(p)); }},
      {"PUBREC", [](auto p) { return Frame(0x50, Bytes({0, 1, 0}) + List(p)); }},
      {"PUBREL", [](auto p) { return Frame(0x62, Bytes({0, 1, 0}) + List(p)); }},
      {"PUBCOMP", [](auto p) { return Frame(0x70, Bytes({0, 1, 0}) + List(p)); }},
      {"SUBSCRIBE",
       [](auto p) { return Frame(0x82, Bytes({0, 1}) + List(p) + Str("f") + Bytes({0})); }},
      {"SUBACK", [](auto p) { return Frame(0x90, Bytes({0, 1}) + List(p) + Bytes({0})); }},
      {"UNSUBSCRIBE", [](auto p) { return Frame(0xA2, Bytes({0, 1}) + List(p) + Str("f")); }},
      {"UNSUBACK", [](auto p) { return Frame(0xB0, Bytes({0, 1}) + List(p) + Bytes({0})); }},
      {"DISCONNECT", [](auto p) { return Frame(0xE0, Bytes({0}) + List(p)); }},
      {"AUTH", [](auto p) { return Frame(0xF0, Bytes({0x18}) + List(p)); }},
  };
  return *builders;
}

struct PropertyCase {
  int id;
  std::string encoded;  // one valid occurrence, identifier included
  std::set<std::string> allowed_in;
};

// Written from the table of §2.2.2.2, independently of properties.cc.
std::vector<PropertyCase> PropertyTable() {
  const std::set<std::string> publish_like = {"PUBLISH", "WILL"};
  const std::set<std::string> connect_connack = {"CONNECT", "CONNACK"};
  const std::set<std::string> auth = {"CONNECT", "CONNACK", "AUTH"};
  std::set<std::string> everywhere;
  for (const auto& [name, builder] : Builders()) everywhere.insert(name);
  return {
      {0x01, Bytes({0x01, 1}), publish_like},
      {0x02, Bytes({0x02, 0, 0, 0, 9}), publish_like},
      {0x03, Bytes({0x03}) + Str("text/plain"), publish_like},
      {0x08, Bytes({0x08}) + Str("r/t"), publish_like},
      {0x09, Bytes({0x09}) + Str(Bytes({0xFF, 0x00})), publish_like},
      {0x0B, Bytes({0x0B, 0x81, 0x01}), {"PUBLISH", "SUBSCRIBE"}},
      {0x11, Bytes({0x11, 0, 0, 0, 9}), {"CONNECT", "CONNACK", "DISCONNECT"}},
      {0x12, Bytes({0x12}) + Str("id"), {"CONNACK"}},
      {0x13, Bytes({0x13, 0, 30}), {"CONNACK"}},
      {0x15, Bytes({0x15}) + Str("PLAIN"), auth},
      {0x16, Bytes({0x15}) + Str("PLAIN") + Bytes({0x16}) + Str("data"), auth},
      {0x17, Bytes({0x17, 1}), {"CONNECT"}},
      {0x18, Bytes({0x18, 0, 0, 0, 9}), {"WILL"}},
      {0x19, Bytes({0x19, 0}), {"CONNECT"}},
      {0x1A, Bytes({0x1A}) + Str("info"), {"CONNACK"}},
      {0x1C, Bytes({0x1C}) + Str("host"), {"CONNACK", "DISCONNECT"}},
      {0x1F, Bytes({0x1F}) + Str("why"),
       {"CONNACK", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBACK", "UNSUBACK", "DISCONNECT",
        "AUTH"}},
      {0x21, Bytes({0x21, 0, 10}), connect_connack},
      {0x22, Bytes({0x22, 0, 0}), connect_connack},
      {0x23, Bytes({0x23, 0, 1}), {"PUBLISH"}},
      {0x24, Bytes({0x24, 1}), {"CONNACK"}},
      {0x25, Bytes({0x25, 0}), {"CONNACK"}},
      {0x26, Bytes({0x26}) + Str("k") + Str("v"), everywhere},
      {0x27, Bytes({0x27, 0, 0, 1, 0}), connect_connack},
      {0x28, Bytes({0x28, 1}), {"CONNACK"}},
      {0x29, Bytes({0x29, 1}), {"CONNACK"}},
      {0x2A, Bytes({0x2A, 0}), {"CONNACK"}},
  };
}

TEST(PropertiesTest, EachPropertyOnlyWhereTheSpecAllowsIt) {
  for (const PropertyCase& property : PropertyTable()) {
    for (const auto& [packet, build] : Builders()) {
      // §2.2.2.2: an identifier not valid for its packet type is malformed.
      const ReasonCode expected = property.allowed_in.count(packet) != 0
                                      ? ReasonCode::kSuccess
                                      : ReasonCode::kMalformedPacket;
      EXPECT_EQ(DecodeReason(build(property.encoded), kV5), expected)
          << "property 0x" << std::hex << property.id << " in " << packet;
    }
  }
}

TEST(PropertiesTest, EmptyListIsFineEverywhere) {
  for (const auto& [packet, build] : Builders()) {
    EXPECT_EQ(DecodeReason(build(""), kV5), ReasonCode::kSuccess) << packet;
  }
}

TEST(PropertiesTest, DuplicatesAreProtocolErrors) {
  for (const PropertyCase& property : PropertyTable()) {
    if (property.id == 0x26) continue;  // User Property repeats freely
    const std::string twice = property.encoded + property.encoded;
    for (const std::string& packet : property.allowed_in) {
      const bool repeatable = property.id == 0x0B && packet == "PUBLISH";
      EXPECT_EQ(DecodeReason(Builders().at(packet)(twice), kV5),
                repeatable ? ReasonCode::kSuccess : ReasonCode::kProtocolError)
          << "property 0x" << std::hex << property.id << " twice in " << packet;
    }
  }
}

TEST(PropertiesTest, RepeatedListsKeepTheirOrder) {
  const std::string properties = Bytes({0x26}) + Str("k") + Str("2") + Bytes({0x0B, 7}) +
                                 Bytes({0x26}) + Str("k") + Str("1") + Bytes({0x0B, 3});
  auto decoded = DecodePacket(Builders().at("PUBLISH")(properties), kV5);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  const Properties& p = std::get<PublishPacket>(*decoded).properties;
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.user_properties, (Pairs{{"k", "2"}, {"k", "1"}}));
  EXPECT_EQ(p.subscription_identifiers, (std::vector<uint32_t>{7, 3}));
}

TEST(PropertiesTest, UnknownIdentifiersAreMalformed) {
  const Builder& publish = Builders().at("PUBLISH");
  for (int id : {0x00, 0x04, 0x0A, 0x14, 0x2B, 0x7F}) {
    EXPECT_EQ(DecodeReason(publish(Bytes({id, 0})), kV5), ReasonCode::kMalformedPacket) << id;
  }
  EXPECT_EQ(DecodeReason(publish(Bytes({0x81, 0x01, 0})), kV5), ReasonCode::kMalformedPacket);
  // A known identifier in a non-minimal two-byte form.
  EXPECT_EQ(DecodeReason(publish(Bytes({0x81, 0x00, 1})), kV5), ReasonCode::kMalformedPacket);
}

TEST(PropertiesTest, ZeroValuesThatAreNotAllowed) {
  EXPECT_EQ(DecodeReason(Builders().at("PUBLISH")(Bytes({0x0B, 0})), kV5),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Builders().at("SUBSCRIBE")(Bytes({0x0B, 0})), kV5),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Builders().at("CONNECT")(Bytes({0x21, 0, 0})), kV5),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Builders().at("CONNACK")(Bytes({0x21, 0, 0})), kV5),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Builders().at("CONNECT")(Bytes({0x27, 0, 0, 0, 0})), kV5),
            ReasonCode::kProtocolError);
  EXPECT_EQ(DecodeReason(Builders().at("PUBLISH")(Bytes({0x23, 0, 0})), kV5),
            ReasonCode::kTopicAliasInvalid);
}

TEST(PropertiesTest, FlagsMustBeZeroOrOne) {
  const std::pair<int, const char*> flags[] = {
      {0x01, "PUBLISH"}, {0x01, "WILL"},    {0x17, "CONNECT"}, {0x19, "CONNECT"},
      {0x24, "CONNACK"}, {0x25, "CONNACK"}, {0x28, "CONNACK"}, {0x29, "CONNACK"},
      {0x2A, "CONNACK"}};
  for (const auto& [id, packet] : flags) {
    EXPECT_EQ(DecodeReason(Builders().at(packet)(Bytes({id, 1})), kV5), ReasonCode::kSuccess);
    EXPECT_EQ(DecodeReason(Builders().at(packet)(Bytes({id, 2})), kV5),
              ReasonCode::kProtocolError) << id;
  }
}

TEST(PropertiesTest, AuthenticationDataNeedsAMethod) {
  EXPECT_EQ(DecodeReason(Builders().at("CONNECT")(Bytes({0x16}) + Str("d")), kV5),
            ReasonCode::kProtocolError);
}

TEST(PropertiesTest, LengthsMustFit) {
  const Builder& disconnect = Builders().at("DISCONNECT");
  // A property length past the end of the packet.
  EXPECT_EQ(DecodeReason(Frame(0xE0, Bytes({0x00, 0x05, 0x11, 0, 0})), kV5),
            ReasonCode::kMalformedPacket);
  // A value running past the property length.
  EXPECT_EQ(DecodeReason(Frame(0xE0, Bytes({0x00, 0x03, 0x11, 0, 0, 0, 1})), kV5),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(disconnect(Bytes({0x1F, 0x00, 0x05, 'a'})), kV5),
            ReasonCode::kMalformedPacket);
}

TEST(PropertiesTest, StringsMustBeUtf8ButBinaryNeedNot) {
  const Builder& publish = Builders().at("PUBLISH");
  EXPECT_EQ(DecodeReason(publish(Bytes({0x03}) + Str(Bytes({0xC0, 0xAF}))), kV5),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(publish(Bytes({0x26}) + Str(Bytes({0xFF})) + Str("v")), kV5),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(publish(Bytes({0x26}) + Str("k") + Str(Bytes({0xED, 0xA0, 0x80}))), kV5),
            ReasonCode::kMalformedPacket);
  EXPECT_EQ(DecodeReason(publish(Bytes({0x09}) + Str(Bytes({0xC0, 0xAF}))), kV5),
            ReasonCode::kSuccess);
}

// Encoding writes properties in identifier order whatever order they came in.
TEST(PropertiesTest, EncodingIsCanonical) {
  const std::string reordered = Bytes({0x23, 0, 2, 0x02, 0, 0, 0, 5, 0x01, 1});
  auto decoded = DecodePacket(Builders().at("PUBLISH")(reordered), kV5);
  ASSERT_TRUE(decoded.has_value());
  const std::string expected =
      Builders().at("PUBLISH")(Bytes({0x01, 1, 0x02, 0, 0, 0, 5, 0x23, 0, 2}));
  EXPECT_EQ(testing::Encode(*decoded, kV5), expected);
}

}  // namespace
}  // namespace estuary::mqtt
