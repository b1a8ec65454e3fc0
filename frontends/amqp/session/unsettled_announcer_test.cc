#include "frontends/amqp/session/unsettled_announcer.h"

#include <gtest/gtest.h>
#include <proton/codec.h>

#include <memory>
#include <string>
#include <vector>

#include "frontends/amqp/session/attach_tap.h"

namespace estuary::amqp {
namespace {

using namespace std::string_literals;

using Data = std::unique_ptr<pn_data_t, void (*)(pn_data_t*)>;

std::string Frame(const std::string& body, uint8_t type = 0) {
  std::string frame;
  const uint32_t size = static_cast<uint32_t>(8 + body.size());
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(size >> shift));
  frame += "\x02"s;
  frame += static_cast<char>(type);
  frame += "\x00\x03"s;  // channel 3
  return frame + body;
}

std::string Encode(pn_data_t* d) {
  std::string out(static_cast<size_t>(pn_data_encoded_size(d)), '\0');
  EXPECT_GT(pn_data_encode(d, out.data(), out.size()), 0);
  return out;
}

// An attach as Proton writes one for a sending link: fields up to
// max-message-size, unsettled null.
std::string SenderAttach(const std::string& name, bool role = false) {
  Data d(pn_data(0), pn_data_free);
  pn_data_put_described(d.get());
  pn_data_enter(d.get());
  pn_data_put_ulong(d.get(), 0x12);
  pn_data_put_list(d.get());
  pn_data_enter(d.get());
  pn_data_put_string(d.get(), pn_bytes(name.size(), name.data()));
  pn_data_put_uint(d.get(), 7);
  pn_data_put_bool(d.get(), role);
  pn_data_put_ubyte(d.get(), 0);
  pn_data_put_ubyte(d.get(), 0);
  pn_data_put_described(d.get());  // source
  pn_data_enter(d.get());
  pn_data_put_ulong(d.get(), 0x28);
  pn_data_put_list(d.get());
  pn_data_enter(d.get());
  pn_data_put_string(d.get(), pn_bytes(5, "a/b/c"));
  pn_data_exit(d.get());
  pn_data_exit(d.get());
  pn_data_put_null(d.get());  // target
  pn_data_put_null(d.get());  // unsettled
  pn_data_put_null(d.get());  // incomplete-unsettled
  pn_data_put_uint(d.get(), 42);  // initial-delivery-count
  pn_data_put_ulong(d.get(), 1 << 20);  // max-message-size
  pn_data_exit(d.get());
  pn_data_exit(d.get());
  return Encode(d.get());
}

// The attach's fields after decoding: name, handle, unsettled tags, idc, max size.
struct Decoded {
  std::string name;
  uint32_t handle = 0;
  bool unsettled_is_map = false;
  std::vector<std::string> tags;
  uint32_t initial_delivery_count = 0;
  uint64_t max_message_size = 0;
};

Decoded Decode(const std::string& body) {
  Decoded out;
  Data d(pn_data(0), pn_data_free);
  EXPECT_EQ(pn_data_decode(d.get(), body.data(), body.size()), static_cast<ssize_t>(body.size()));
  pn_data_rewind(d.get());
  pn_data_next(d.get());
  pn_data_enter(d.get());
  pn_data_next(d.get());
  pn_data_next(d.get());
  pn_data_enter(d.get());
  for (int field = 0; pn_data_next(d.get()); ++field) {
    if (field == 0) out.name = std::string(pn_data_get_string(d.get()).start, pn_data_get_string(d.get()).size);
    if (field == 1) out.handle = pn_data_get_uint(d.get());
    if (field == 7 && pn_data_type(d.get()) == PN_MAP) {
      out.unsettled_is_map = true;
      pn_data_enter(d.get());
      while (pn_data_next(d.get())) {
        const pn_bytes_t tag = pn_data_get_binary(d.get());
        out.tags.emplace_back(tag.start, tag.size);
        pn_data_next(d.get());
        EXPECT_EQ(pn_data_type(d.get()), PN_NULL);
      }
      pn_data_exit(d.get());
    }
    if (field == 9) out.initial_delivery_count = pn_data_get_uint(d.get());
    if (field == 10) out.max_message_size = pn_data_get_ulong(d.get());
  }
  return out;
}

TEST(UnsettledAnnouncer, RewritesOnlyTheAttachOfAnAnnouncedSender) {
  const std::vector<std::string> tags = {"\x00\x03"s, "\x00\x07"s};
  const std::string other = Frame(SenderAttach("other"));
  const std::string receiver = Frame(SenderAttach("durable", true));  // same name, other role
  const std::string ours = Frame(SenderAttach("durable"));
  const std::string input =
      "AMQP\x00\x01\x00\x00"s + Frame("") + other + receiver + ours + Frame(std::string(100, 'x'), 1);
  for (bool byte_by_byte : {false, true}) {
    UnsettledAnnouncer announcer;
    announcer.Announce("durable", tags);
    std::string out;
    if (byte_by_byte) {
      for (char c : input) announcer.Write(std::string_view(&c, 1), out);
    } else {
      announcer.Write(input, out);
    }
    const size_t at = input.find(ours);
    ASSERT_EQ(out.substr(0, at), input.substr(0, at)) << "bytes before the attach pass unchanged";
    const uint32_t size = static_cast<uint32_t>(static_cast<unsigned char>(out[at + 2])) << 8 |
                          static_cast<unsigned char>(out[at + 3]);
    EXPECT_EQ(out.substr(at + 4, 4), "\x02\x00\x00\x03"s) << "doff, type and channel kept";
    const Decoded decoded = Decode(out.substr(at + 8, size - 8));
    EXPECT_EQ(decoded.name, "durable");
    EXPECT_EQ(decoded.handle, 7u);
    EXPECT_TRUE(decoded.unsettled_is_map);
    EXPECT_EQ(decoded.tags, tags);
    EXPECT_EQ(decoded.initial_delivery_count, 42u);
    EXPECT_EQ(decoded.max_message_size, 1u << 20);
    EXPECT_EQ(out.substr(at + size), input.substr(at + ours.size())) << "bytes after it pass unchanged";
    // Read back as a client would: the tap sees a sender's map, not a receiver's.
    AttachTap tap;
    tap.Feed(out);
    EXPECT_FALSE(tap.Take("durable").has_value());
  }
}

TEST(UnsettledAnnouncer, AnEmptyMapIsAMapAndAnnouncesOnce) {
  UnsettledAnnouncer announcer;
  announcer.Announce("d", {});
  const std::string frame = Frame(SenderAttach("d"));
  std::string out;
  announcer.Write("AMQP\x00\x01\x00\x00"s + frame, out);
  const Decoded decoded = Decode(out.substr(16));
  EXPECT_TRUE(decoded.unsettled_is_map);
  EXPECT_TRUE(decoded.tags.empty());
  std::string again;
  announcer.Write(frame, again);
  EXPECT_EQ(again, frame) << "the next attach of that name is not rewritten";
}

// A transfer as Proton writes one: handle, delivery-id, tag, format,
// settled, more; then the payload.
std::string Transfer(uint32_t handle, const std::string& tag, const std::string& payload) {
  Data d(pn_data(0), pn_data_free);
  pn_data_put_described(d.get());
  pn_data_enter(d.get());
  pn_data_put_ulong(d.get(), 0x14);
  pn_data_put_list(d.get());
  pn_data_enter(d.get());
  pn_data_put_uint(d.get(), handle);
  pn_data_put_uint(d.get(), 0);
  pn_data_put_binary(d.get(), pn_bytes(tag.size(), tag.data()));
  pn_data_put_uint(d.get(), 0);
  pn_data_put_bool(d.get(), false);
  pn_data_put_bool(d.get(), false);
  pn_data_exit(d.get());
  pn_data_exit(d.get());
  return Encode(d.get()) + payload;
}

// §2.7.5 resume, §2.6.13: the first transfer of a tag the client holds
// unsettled, on the announced link, carries resume true; nothing else.
TEST(UnsettledAnnouncer, SetsResumeOnTheFirstTransferOfEachResumedTag) {
  UnsettledAnnouncer announcer;
  announcer.Announce("d", {"\x00\x07"s, "\x00\x08"s}, {"\x00\x07"s});
  const std::string before = "AMQP\x00\x01\x00\x00"s + Frame(SenderAttach("d"));
  std::string out;
  announcer.Write(before, out);
  const std::string other_handle = Frame(Transfer(9, "\x00\x07"s, "payload-0"));
  const std::string resumed = Frame(Transfer(7, "\x00\x07"s, "payload-1"));
  const std::string fresh = Frame(Transfer(7, "\x00\x08"s, "payload-2"));
  std::string rest;
  announcer.Write(other_handle + resumed + fresh + resumed, rest);
  ASSERT_EQ(rest.substr(0, other_handle.size()), other_handle) << "another link's transfer is left alone";
  const std::string_view rewritten = std::string_view(rest).substr(other_handle.size());
  const uint32_t size = static_cast<uint32_t>(static_cast<unsigned char>(rewritten[2])) << 8 |
                        static_cast<unsigned char>(rewritten[3]);
  const std::string body(rewritten.substr(8, size - 8));
  EXPECT_EQ(body.substr(body.size() - 9), "payload-1") << "the payload follows unchanged";
  Data d(pn_data(0), pn_data_free);
  const ssize_t n = pn_data_decode(d.get(), body.data(), body.size());
  ASSERT_EQ(static_cast<size_t>(n), body.size() - 9);
  pn_data_rewind(d.get());
  pn_data_next(d.get());
  pn_data_enter(d.get());
  pn_data_next(d.get());
  pn_data_next(d.get());
  pn_data_enter(d.get());
  std::vector<pn_type_t> types;
  bool resume = false;
  for (int field = 0; pn_data_next(d.get()); ++field) {
    if (field == 8) resume = pn_data_get_bool(d.get());
    types.push_back(pn_data_type(d.get()));
  }
  ASSERT_EQ(types.size(), 9u);
  EXPECT_EQ(types[2], PN_BINARY);
  EXPECT_TRUE(resume);
  EXPECT_EQ(rest.substr(other_handle.size() + size), fresh + resumed)
      << "a tag not held by the client, and the same tag again, pass unchanged";
}

TEST(UnsettledAnnouncer, WithNothingAnnouncedPassesFramesSplitAnywhere) {
  const std::string input = "AMQP\x00\x01\x00\x00"s + Frame(SenderAttach("a")) + Frame("") +
                            Frame(Transfer(7, "t"s, std::string(500, 'p'))) + Frame(SenderAttach("b"));
  ASSERT_LT(40u, input.rfind(Frame(SenderAttach("b"))));
  for (size_t split = 0; split <= input.size(); split += 4) {
    UnsettledAnnouncer announcer;
    std::string out;
    announcer.Write(std::string_view(input).substr(0, split), out);
    if (split == 40) announcer.Announce("b", {"x"s});  // announced mid-stream: still found
    announcer.Write(std::string_view(input).substr(split), out);
    if (split == 40) {
      EXPECT_NE(out, input) << "b's attach, after the split, is rewritten";
    } else {
      EXPECT_EQ(out, input) << split;
    }
  }
}

TEST(UnsettledAnnouncer, PassesAnythingItCannotFollow) {
  UnsettledAnnouncer announcer;
  announcer.Announce("d", {"t"});
  const std::string input = "AMQP\x02\x01\x00\x00"s + "\x16\x03\x01"s + Frame(SenderAttach("d"));
  std::string out;
  announcer.Write(input, out);
  EXPECT_EQ(out, input);
}

}  // namespace
}  // namespace estuary::amqp
