// amqp_body: the sections estuary-bench writes are what Proton decodes, and
// the body is found in messages Proton encodes with every section before it.
#include "tools/bench/amqp_body.h"

#include <gtest/gtest.h>
#include <proton/codec.h>
#include <proton/message.h>

#include <string>

namespace estuary::bench {
namespace {

// A message encoded by Proton; `fill` sets its sections.
template <typename Fill>
std::string Encode(Fill fill) {
  pn_message_t* message = pn_message();
  fill(message);
  std::string bytes(1 << 16, '\0');
  size_t size = bytes.size();
  EXPECT_EQ(pn_message_encode(message, bytes.data(), &size), 0);
  pn_message_free(message);
  bytes.resize(size);
  return bytes;
}

void PutBinaryBody(pn_message_t* message, const std::string& body) {
  pn_data_put_binary(pn_message_body(message), pn_bytes(body.size(), body.data()));
}

TEST(AmqpBody, PrefixPlusPayloadIsADataSectionProtonDecodes) {
  for (size_t size : {24u, 64u, 255u, 256u, 4096u, 70000u}) {
    const std::string payload(size, 'p');
    const std::string bytes = DataSectionPrefix(size) + payload;
    pn_message_t* message = pn_message();
    ASSERT_EQ(pn_message_decode(message, bytes.data(), bytes.size()), 0) << size;
    pn_data_t* body = pn_message_body(message);
    pn_data_rewind(body);
    ASSERT_TRUE(pn_data_next(body));
    ASSERT_EQ(pn_data_type(body), PN_BINARY) << size;
    const pn_bytes_t decoded = pn_data_get_binary(body);
    EXPECT_EQ(std::string(decoded.start, decoded.size), payload) << size;
    pn_message_free(message);
    EXPECT_EQ(FindBody(bytes), std::string_view(payload)) << size;
  }
}

TEST(AmqpBody, FindsTheDataSectionAfterEverySectionBeforeIt) {
  const std::string payload(100, 'b');
  const std::string bytes = Encode([&](pn_message_t* message) {
    pn_message_set_durable(message, true);
    pn_message_set_ttl(message, 5000);
    pn_message_set_priority(message, 7);
    pn_message_set_address(message, "sensors/room1/temp");
    pn_message_set_content_type(message, "application/octet-stream");
    pn_data_t* id = pn_message_id(message);
    pn_data_put_ulong(id, 42);
    pn_data_t* annotations = pn_message_annotations(message);
    pn_data_put_map(annotations);
    pn_data_enter(annotations);
    pn_data_put_symbol(annotations, pn_bytes(12, "x-opt-retain"));
    pn_data_put_bool(annotations, true);
    pn_data_exit(annotations);
    pn_data_t* properties = pn_message_properties(message);
    pn_data_put_map(properties);
    pn_data_enter(properties);
    pn_data_put_string(properties, pn_bytes(1, "k"));
    pn_data_put_list(properties);
    pn_data_put_string(properties, pn_bytes(1, "v"));
    pn_data_exit(properties);
    pn_message_set_inferred(message, true);  // binary body -> data section
    PutBinaryBody(message, payload);
  });
  EXPECT_EQ(FindBody(bytes), std::string_view(payload));
}

TEST(AmqpBody, AcceptsAnAmqpValueStringOrBinary) {
  const std::string text = Encode([](pn_message_t* message) {
    pn_data_put_string(pn_message_body(message), pn_bytes(5, "hello"));
  });
  EXPECT_EQ(FindBody(text), std::string_view("hello"));
  const std::string binary = Encode([](pn_message_t* message) {
    pn_message_set_inferred(message, false);  // binary body -> amqp-value
    PutBinaryBody(message, "bytes");
  });
  EXPECT_EQ(FindBody(binary), std::string_view("bytes"));
}

TEST(AmqpBody, NoBodyForOtherValuesOrMalformedBytes) {
  const std::string number = Encode([](pn_message_t* message) { pn_data_put_int(pn_message_body(message), 7); });
  EXPECT_FALSE(FindBody(number));
  const std::string good = DataSectionPrefix(300) + std::string(300, 'x');
  EXPECT_FALSE(FindBody(good.substr(0, good.size() - 1)));  // truncated body
  EXPECT_FALSE(FindBody(good.substr(0, 5)));                // truncated size
  EXPECT_FALSE(FindBody(std::string("\x00\x53", 2)));       // truncated descriptor
  EXPECT_FALSE(FindBody(std::string("\x53\x75\xa0\x01x", 5)));  // not a described section
  EXPECT_FALSE(FindBody(std::string("\x00\x53\x70\xff", 4)));   // unknown type code in a header
  EXPECT_FALSE(FindBody(""));
}

}  // namespace
}  // namespace estuary::bench
