// libFuzzer target over the two parsers of AMQP frame streams that work
// beside Proton (link recovery, docs/amqp.md): AttachTap on client bytes and
// UnsettledAnnouncer on ours. Arbitrary bytes must not crash either, and:
//  - with nothing announced, the announcer passes every byte unchanged;
//  - fed whole or split in two, the announcer writes the same bytes and the
//    tap finds the same unsettled maps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frontends/amqp/session/attach_tap.h"
#include "frontends/amqp/session/unsettled_announcer.h"

namespace {

using estuary::amqp::AttachTap;
using estuary::amqp::UnsettledAnnouncer;

void Check(bool ok) {
  if (!ok) std::abort();
}

std::string Announced(std::string_view first, std::string_view second) {
  UnsettledAnnouncer announcer;
  announcer.Announce("durable", {std::string("\x00\x01", 2)}, {std::string("\x00\x01", 2)});
  std::string out;
  announcer.Write(first, out);
  announcer.Write(second, out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);

  UnsettledAnnouncer plain;
  std::string out;
  plain.Write(bytes.substr(0, split), out);
  plain.Write(bytes.substr(split), out);
  Check(out == bytes);

  Check(Announced(bytes, {}) == Announced(bytes.substr(0, split), bytes.substr(split)));

  AttachTap whole;
  AttachTap halves;
  whole.Feed(bytes);
  halves.Feed(bytes.substr(0, split));
  halves.Feed(bytes.substr(split));
  for (const char* name : {"durable", "sub", "a", ""}) Check(whole.Take(name) == halves.Take(name));
  return 0;
}
