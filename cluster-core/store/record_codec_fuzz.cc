// libFuzzer target: the stored delivery records (record_codec.h), which a
// node also reads from its partitions' session state, written by other
// nodes. First byte: 0 a queued delivery, 1 an in-flight one (or a
// completed QoS 2 delivery's marker, which shares its key); the rest is
// the record. What decodes must encode to bytes that decode again and
// encode the same (unknown trailing fields are dropped on the way, so the
// input itself need not come back).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster-core/store/record_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view record(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto delivery = estuary::core::store::DecodeDelivery(record);
    if (!delivery) return 0;
    const std::string once = estuary::core::store::EncodeDelivery(*delivery);
    auto again = estuary::core::store::DecodeDelivery(once);
    if (!again || estuary::core::store::EncodeDelivery(*again) != once) std::abort();
  } else {
    auto inflight = estuary::core::store::DecodeInflight(record);
    if (!inflight) {
      auto completed = estuary::core::store::DecodeCompleted(record);
      if (completed && estuary::core::store::EncodeCompleted(*completed) != record) std::abort();
      return 0;
    }
    const std::string once = estuary::core::store::EncodeInflight(*inflight);
    auto again = estuary::core::store::DecodeInflight(once);
    if (!again || estuary::core::store::EncodeInflight(*again) != once) std::abort();
  }
  return 0;
}
