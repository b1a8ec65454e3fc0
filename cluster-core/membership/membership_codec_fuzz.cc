// libFuzzer: membership frame bodies come from other nodes. Every decoder
// must reject or accept any bytes without crashing, and what it accepts must
// re-encode to a body that decodes to the same value.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster-core/membership/membership_codec.h"

using namespace estuary::cluster;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto table = DecodeTable(body)) {
    auto again = DecodeTable(EncodeTable(table->rejoin ? 1 : 0, table->table));
    if (!again || again->table != table->table || again->rejoin != table->rejoin) std::abort();
    if (table->table.size() >= 2) (void)Supersedes(table->table[0], table->table[1]);
  }
  if (auto probe = DecodeProbe(body)) {
    auto again = DecodeProbe(EncodeProbe(*probe));
    if (!again || again->target != probe->target || again->reachable != probe->reachable) std::abort();
  }
  if (auto reason = DecodeReason(body)) {
    if (DecodeReason(EncodeReason(*reason)) != reason) std::abort();
  }
  if (auto flag = DecodeFlag(body)) {
    if (DecodeFlag(EncodeFlag(*flag)) != flag) std::abort();
  }
  (void)DecodeEmpty(body);
  return 0;
}
