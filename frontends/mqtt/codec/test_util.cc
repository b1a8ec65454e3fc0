#include "frontends/mqtt/codec/test_util.h"

#include <cstdio>

namespace estuary::mqtt::testing {

std::string Bytes(std::initializer_list<int> values) {
  std::string bytes;
  for (int value : values) bytes.push_back(static_cast<char>(value));
  return bytes;
}

std::string Frame(uint8_t first_byte, std::string_view body) {
  std::string frame(1, static_cast<char>(first_byte));
  size_t length = body.size();
  do {
    uint8_t byte = length & 0x7F;
    length >>= 7;
    if (length != 0) byte |= 0x80;
    frame.push_back(static_cast<char>(byte));
  } while (length != 0);
  frame.append(body);
  return frame;
}

std::string Str(std::string_view text) {
  const auto size = static_cast<int>(text.size());
  std::string field = Bytes({size >> 8, size & 0xFF});
  field.append(text);
  return field;
}

std::string Encode(const Packet& packet, ProtocolVersion version) {
  std::string out;
  EncodePacket(packet, version, out);
  return out;
}

ReasonCode DecodeReason(std::string_view frame, ProtocolVersion version) {
  auto decoded = DecodePacket(frame, version);
  return decoded ? ReasonCode::kSuccess : decoded.error().reason;
}

std::string Hex(std::string_view bytes) {
  std::string hex;
  char buffer[4];
  for (unsigned char byte : bytes) {
    std::snprintf(buffer, sizeof(buffer), "%02X ", byte);
    hex += buffer;
  }
  return hex;
}

const char* VersionName(ProtocolVersion version) {
  switch (version) {
    case ProtocolVersion::kV31: return "v31";
    case ProtocolVersion::kV311: return "v311";
    case ProtocolVersion::kV5: return "v5";
  }
  return "unknown";
}

namespace {

bool IsV5(ProtocolVersion version) { return version == ProtocolVersion::kV5; }

Properties PublishProperties() {
  Properties properties;
  properties.payload_format_indicator = 1;
  properties.message_expiry_interval = 3600;
  properties.content_type = "text/plain";
  properties.response_topic = "reply/here";
  properties.correlation_data = std::string("\x00\x01\xFF", 3);
  properties.user_properties = {{"k", "v"}, {"k", "v"}, {"", ""}};
  return properties;
}

void AddConnects(ProtocolVersion version, std::vector<Sample>& samples) {
  ConnectPacket minimal;
  minimal.protocol_name = version == ProtocolVersion::kV31 ? "MQIsdp" : "MQTT";
  minimal.version = version;
  minimal.client_id = "client-1";
  minimal.keep_alive = 60;
  samples.push_back({"connect_minimal", minimal});

  ConnectPacket full = minimal;
  full.clean_start = false;
  full.keep_alive = 0xFFFF;
  full.client_id = "";
  full.username = "user";
  full.password = std::string("p\0ss", 4);
  full.will = Will{"will/topic", std::string("\0bye", 4), 1, true, {}};
  if (IsV5(version)) {
    full.will->properties = PublishProperties();
    full.will->properties.will_delay_interval = 30;
    Properties& p = full.properties;
    p.session_expiry_interval = 0xFFFFFFFF;
    p.receive_maximum = 20;
    p.maximum_packet_size = 1 << 20;
    p.topic_alias_maximum = 10;
    p.request_response_information = 1;
    p.request_problem_information = 0;
    p.user_properties = {{"a", "b"}};
    p.authentication_method = "SCRAM-SHA-1";
    p.authentication_data = std::string("\x01\x02", 2);
  }
  samples.push_back({"connect_full", full});

  ConnectPacket will_qos2 = minimal;
  will_qos2.will = Will{"w", "", 2, false, {}};
  will_qos2.username = "";
  samples.push_back({"connect_will_qos2", will_qos2});

  if (IsV5(version)) {
    ConnectPacket password_only = minimal;
    password_only.password = "secret";
    samples.push_back({"connect_password_only", password_only});
  }
}

void AddConnacks(ProtocolVersion version, std::vector<Sample>& samples) {
  ConnackPacket accepted;
  accepted.session_present = version != ProtocolVersion::kV31;
  samples.push_back({"connack_accepted", accepted});
  for (ReasonCode reason : {ReasonCode::kUnsupportedProtocolVersion,
                            ReasonCode::kClientIdentifierNotValid, ReasonCode::kServerUnavailable,
                            ReasonCode::kBadUserNameOrPassword, ReasonCode::kNotAuthorized}) {
    samples.push_back({"connack_refused_" + std::to_string(static_cast<int>(reason)),
                       ConnackPacket{false, reason, {}}});
  }
  if (!IsV5(version)) return;
  ConnackPacket full;
  Properties& p = full.properties;
  p.session_expiry_interval = 0;
  p.receive_maximum = 65535;
  p.maximum_qos = 1;
  p.retain_available = 0;
  p.maximum_packet_size = 268435460;
  p.assigned_client_identifier = "auto-7f3a";
  p.topic_alias_maximum = 0;
  p.reason_string = "welcome";
  p.user_properties = {{"x", "y"}};
  p.wildcard_subscription_available = 1;
  p.subscription_identifier_available = 0;
  p.shared_subscription_available = 1;
  p.server_keep_alive = 120;
  p.response_information = "resp/";
  p.server_reference = "other:1883";
  p.authentication_method = "m";
  p.authentication_data = "d";
  samples.push_back({"connack_full_properties", full});
  samples.push_back({"connack_banned", ConnackPacket{false, ReasonCode::kBanned, {}}});
}

void AddPublishes(ProtocolVersion version, std::vector<Sample>& samples) {
  samples.push_back({"publish_qos0", PublishPacket{false, 0, false, "a/b", 0, {}, "hello"}});
  samples.push_back({"publish_qos1_dup_retain",
                     PublishPacket{true, 1, true, "sensors/1/temp", 1, {}, "21.5"}});
  samples.push_back({"publish_qos2_empty", PublishPacket{false, 2, false, "x", 0xFFFF, {}, ""}});
  samples.push_back({"publish_binary",
                     PublishPacket{false, 1, false, "bin", 7, {}, std::string("\0\xFF\x80", 3)}});
  samples.push_back({"publish_utf8_topic",
                     PublishPacket{false, 0, false, "caf\xC3\xA9/\xF0\x9F\x98\x80", 0, {}, "x"}});
  samples.push_back({"publish_large",
                     PublishPacket{false, 0, false, "big", 0, {}, std::string(20000, 'z')}});
  if (!IsV5(version)) return;
  PublishPacket with_properties{false, 1, false, "a/b", 10, PublishProperties(), "payload"};
  with_properties.properties.subscription_identifiers = {1, 268435455, 16384};
  samples.push_back({"publish_properties", with_properties});
  PublishPacket aliased{false, 0, false, "", 0, {}, "by alias"};
  aliased.properties.topic_alias = 3;
  samples.push_back({"publish_topic_alias", aliased});
}

void AddAcks(ProtocolVersion version, std::vector<Sample>& samples) {
  for (PacketType type : {PacketType::kPuback, PacketType::kPubrec, PacketType::kPubrel,
                          PacketType::kPubcomp}) {
    samples.push_back({std::string("ack_") + ToString(type),
                       AckPacket{type, 10, ReasonCode::kSuccess, {}}});
  }
  if (!IsV5(version)) return;
  samples.push_back({"puback_reason", AckPacket{PacketType::kPuback, 1,
                                                ReasonCode::kNoMatchingSubscribers, {}}});
  Properties reason_string;
  reason_string.reason_string = "quota";
  reason_string.user_properties = {{"u", "v"}};
  samples.push_back({"pubrec_properties",
                     AckPacket{PacketType::kPubrec, 2, ReasonCode::kQuotaExceeded, reason_string}});
  samples.push_back({"pubrel_not_found", AckPacket{PacketType::kPubrel, 3,
                                                   ReasonCode::kPacketIdentifierNotFound, {}}});
  samples.push_back({"pubcomp_success_properties",
                     AckPacket{PacketType::kPubcomp, 4, ReasonCode::kSuccess, reason_string}});
}

void AddSubscriptions(ProtocolVersion version, std::vector<Sample>& samples) {
  const bool v5 = IsV5(version);
  SubscribePacket subscribe{10, {}, {{"a/b", {1, false, false, 0}}, {"c/#", {2, false, false, 0}},
                                     {"+/x", {0, false, false, 0}}}};
  if (v5) {
    subscribe.subscriptions.push_back({"$share/g/t", {1, true, true, 2}});
    subscribe.subscriptions.push_back({"d", {0, false, true, 1}});
    subscribe.properties.subscription_identifiers = {42};
    subscribe.properties.user_properties = {{"a", "b"}};
  }
  samples.push_back({"subscribe", subscribe});

  SubackPacket suback{10, {}, {ReasonCode::kSuccess, ReasonCode::kGrantedQos1,
                               ReasonCode::kGrantedQos2, ReasonCode::kUnspecifiedError}};
  if (v5) {
    suback.reasons.push_back(ReasonCode::kWildcardSubscriptionsNotSupported);
    suback.properties.reason_string = "partly";
  }
  samples.push_back({"suback", suback});

  UnsubscribePacket unsubscribe{11, {}, {"a/b", "c/#"}};
  if (v5) unsubscribe.properties.user_properties = {{"why", "done"}};
  samples.push_back({"unsubscribe", unsubscribe});

  UnsubackPacket unsuback{11, {}, {}};
  if (v5) {
    unsuback.reasons = {ReasonCode::kSuccess, ReasonCode::kNoSubscriptionExisted};
    unsuback.properties.reason_string = "ok";
  }
  samples.push_back({"unsuback", unsuback});
}

void AddControl(ProtocolVersion version, std::vector<Sample>& samples) {
  samples.push_back({"pingreq", PingreqPacket{}});
  samples.push_back({"pingresp", PingrespPacket{}});
  samples.push_back({"disconnect", DisconnectPacket{}});
  if (!IsV5(version)) return;
  samples.push_back({"disconnect_with_will",
                     DisconnectPacket{ReasonCode::kDisconnectWithWill, {}}});
  DisconnectPacket moved{ReasonCode::kServerMoved, {}};
  moved.properties.server_reference = "elsewhere:1883";
  moved.properties.reason_string = "rebalancing";
  moved.properties.session_expiry_interval = 0;
  samples.push_back({"disconnect_properties", moved});
  samples.push_back({"auth_success", AuthPacket{}});
  AuthPacket continue_auth{ReasonCode::kContinueAuthentication, {}};
  continue_auth.properties.authentication_method = "SCRAM-SHA-1";
  continue_auth.properties.authentication_data = "challenge";
  samples.push_back({"auth_continue", continue_auth});
  AuthPacket reauth{ReasonCode::kReAuthenticate, {}};
  reauth.properties.authentication_method = "SCRAM-SHA-1";
  samples.push_back({"auth_reauthenticate", reauth});
}

}  // namespace

std::vector<Sample> SamplePackets(ProtocolVersion version) {
  std::vector<Sample> samples;
  AddConnects(version, samples);
  AddConnacks(version, samples);
  AddPublishes(version, samples);
  AddAcks(version, samples);
  AddSubscriptions(version, samples);
  AddControl(version, samples);
  return samples;
}

}  // namespace estuary::mqtt::testing
