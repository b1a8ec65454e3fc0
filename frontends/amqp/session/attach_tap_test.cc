#include "frontends/amqp/session/attach_tap.h"

#include <gtest/gtest.h>
#include <proton/codec.h>

#include <cstdint>
#include <string>
#include <vector>

namespace estuary::amqp {
namespace {

using namespace std::string_literals;

std::string Frame(const std::string& body, uint8_t type = 0, uint16_t channel = 0) {
  const uint32_t size = static_cast<uint32_t>(8 + body.size());
  std::string frame;
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(size >> shift));
  frame += static_cast<char>(2);
  frame += static_cast<char>(type);
  frame += static_cast<char>(channel >> 8);
  frame += static_cast<char>(channel & 0xFF);
  return frame + body;
}

std::string Encode(pn_data_t* data) {
  std::vector<char> bytes(4096);
  const ssize_t n = pn_data_encode(data, bytes.data(), bytes.size());
  EXPECT_GT(n, 0);
  return std::string(bytes.data(), static_cast<size_t>(n));
}

void PutState(pn_data_t* d, uint64_t code, bool undeliverable = false) {
  pn_data_put_described(d);
  pn_data_enter(d);
  pn_data_put_ulong(d, code);
  pn_data_put_list(d);
  if (code == 0x27) {
    pn_data_enter(d);
    pn_data_put_bool(d, false);
    pn_data_put_bool(d, undeliverable);
    pn_data_exit(d);
  }
  pn_data_exit(d);
}

// An attach performative (§2.7.3) with an unsettled map: tag -> state code
// (0 = null).
std::string Attach(const std::string& name, bool receiver, const std::vector<std::pair<std::string, uint64_t>>* map,
                   bool undeliverable = false) {
  pn_data_t* d = pn_data(0);
  pn_data_put_described(d);
  pn_data_enter(d);
  pn_data_put_ulong(d, 0x12);
  pn_data_put_list(d);
  pn_data_enter(d);
  pn_data_put_string(d, pn_bytes(name.size(), name.data()));
  pn_data_put_uint(d, 0);
  pn_data_put_bool(d, receiver);
  pn_data_put_null(d);  // snd-settle-mode
  pn_data_put_null(d);  // rcv-settle-mode
  pn_data_put_null(d);  // source
  pn_data_put_null(d);  // target
  if (map != nullptr) {
    pn_data_put_map(d);
    pn_data_enter(d);
    for (const auto& [tag, code] : *map) {
      pn_data_put_binary(d, pn_bytes(tag.size(), tag.data()));
      if (code == 0) {
        pn_data_put_null(d);
      } else {
        PutState(d, code, undeliverable);
      }
    }
    pn_data_exit(d);
  }
  pn_data_exit(d);
  pn_data_exit(d);
  std::string out = Encode(d);
  pn_data_free(d);
  return out;
}

std::string Flow() {  // any other performative
  pn_data_t* d = pn_data(0);
  pn_data_put_described(d);
  pn_data_enter(d);
  pn_data_put_ulong(d, 0x13);
  pn_data_put_list(d);
  pn_data_enter(d);
  pn_data_put_uint(d, 0);
  pn_data_put_uint(d, 2048);
  pn_data_exit(d);
  pn_data_exit(d);
  std::string out = Encode(d);
  pn_data_free(d);
  return out;
}

std::string Stream() {
  std::vector<std::pair<std::string, uint64_t>> map = {
      {"\x00\x01"s, 0x24}, {"\x00\x02"s, 0x25}, {"\x00\x03"s, 0x26}, {"\x00\x04"s, 0}, {"\x00\x05"s, 0x23}};
  std::string bytes = "AMQP\x03\x01\x00\x00"s;
  bytes += Frame("\x00\x53\x41\x45"s, 1);  // a SASL frame
  bytes += "AMQP\x00\x01\x00\x00"s;
  bytes += Frame("");  // heartbeat
  bytes += Frame(Flow());
  bytes += Frame(Attach("sender-link", false, &map));  // a client sender: not ours to recover
  bytes += Frame(Attach("plain", true, nullptr));
  bytes += Frame(Attach("durable", true, &map), 0, 1);
  bytes += Frame(Flow() + std::string(300, 'x'));  // a frame with a payload
  return bytes;
}

void ExpectMap(AttachTap& tap) {
  EXPECT_FALSE(tap.Take("sender-link").has_value());
  EXPECT_FALSE(tap.Take("plain").has_value()) << "no unsettled map: nothing to recover";
  auto map = tap.Take("durable");
  ASSERT_TRUE(map.has_value());
  ASSERT_EQ(map->size(), 5u);
  EXPECT_EQ(map->at("\x00\x01"s), RemoteDeliveryState::kAccepted);
  EXPECT_EQ(map->at("\x00\x02"s), RemoteDeliveryState::kRejected);
  EXPECT_EQ(map->at("\x00\x03"s), RemoteDeliveryState::kReleased);
  EXPECT_EQ(map->at("\x00\x04"s), RemoteDeliveryState::kNone);
  EXPECT_EQ(map->at("\x00\x05"s), RemoteDeliveryState::kNone) << "received is not terminal";
  EXPECT_FALSE(tap.Take("durable").has_value()) << "taken once";
}

// §2.7.3 attach.unsettled, §2.6.13: read off the stream, which Proton-C drops.
TEST(AttachTap, ReadsTheUnsettledMapOfAReceiversAttach) {
  AttachTap tap;
  tap.Feed(Stream());
  ExpectMap(tap);
}

TEST(AttachTap, FollowsFramesSplitAtEveryByte) {
  AttachTap tap;
  const std::string bytes = Stream();
  for (char c : bytes) tap.Feed(std::string_view(&c, 1));
  ExpectMap(tap);
}

TEST(AttachTap, FollowsFramesSplitAtAnyPoint) {
  const std::string bytes = Stream();
  for (size_t split = 0; split <= bytes.size(); ++split) {
    AttachTap tap;
    tap.Feed(std::string_view(bytes).substr(0, split));
    tap.Feed(std::string_view(bytes).substr(split));
    ExpectMap(tap);
  }
}

TEST(AttachTap, ModifiedUndeliverableHereIsTold) {
  std::vector<std::pair<std::string, uint64_t>> map = {{"t"s, 0x27}};
  AttachTap tap;
  tap.Feed("AMQP\x00\x01\x00\x00"s + Frame(Attach("a", true, &map, true)) + Frame(Attach("b", true, &map, false)));
  EXPECT_EQ(tap.Take("a")->at("t"), RemoteDeliveryState::kModifiedUndeliverable);
  EXPECT_EQ(tap.Take("b")->at("t"), RemoteDeliveryState::kModified);
}

TEST(AttachTap, StopsAtBytesItCannotFollow) {
  std::vector<std::pair<std::string, uint64_t>> map = {{"t"s, 0x24}};
  AttachTap tap;
  tap.Feed("AMQP\x02\x01\x00\x00"s + "\x17\x03\x03"s + Frame(Attach("a", true, &map)));  // TLS
  EXPECT_FALSE(tap.Take("a").has_value());
  AttachTap garbage;
  garbage.Feed("\x00\x00\x00\x01\x02\x00\x00\x00"s + Frame(Attach("a", true, &map)));  // size 1
  EXPECT_FALSE(garbage.Take("a").has_value());
}

}  // namespace
}  // namespace estuary::amqp
