// libFuzzer target for InboundLedger::Restore, which reads the `a` records
// (kept outcomes of exactly-once senders) back from the shard's store at
// start (built with -DESTUARY_FUZZ=ON and clang). The input is a sequence
// of records, each a u8 key length, the key, a u8 value length and the
// value. Beyond the absence of crashes: a record that restores is counted
// in links(); the suspended-link bound holds after every record; and
// restoring the same records into a second ledger gives the same counts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "frontends/amqp/session/inbound_ledger.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

std::vector<std::pair<std::string_view, std::string_view>> Split(std::string_view input) {
  std::vector<std::pair<std::string_view, std::string_view>> records;
  while (input.size() >= 2) {
    const size_t key_size = static_cast<uint8_t>(input[0]);
    if (input.size() < 1 + key_size + 1) break;
    const std::string_view key = input.substr(1, key_size);
    const size_t value_size = static_cast<uint8_t>(input[1 + key_size]);
    if (input.size() < 2 + key_size + value_size) break;
    const std::string_view value = input.substr(2 + key_size, value_size);
    records.emplace_back(key, value);
    input.remove_prefix(2 + key_size + value_size);
  }
  return records;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto records = Split(std::string_view(reinterpret_cast<const char*>(data), size));
  constexpr size_t kMaxSuspended = 4;
  estuary::amqp::InboundLedger first(16, kMaxSuspended);
  estuary::amqp::InboundLedger second(16, kMaxSuspended);
  size_t restored = 0;
  for (const auto& [key, value] : records) {
    const bool ok = first.Restore(key, value);
    Check(second.Restore(key, value) == ok);
    if (ok) ++restored;
    Check(first.suspended() <= kMaxSuspended);
    Check(first.links() == first.suspended());  // nothing attached during recovery
    Check(first.links() == second.links());
  }
  Check(restored == 0 || first.links() > 0);
  return 0;
}
