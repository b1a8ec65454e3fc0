// libFuzzer target for what every partition runs (partition_state.h): the
// registry, retained messages, the retained index, persistent sessions and
// replicated queues behind one dispatch,
// built with -DESTUARY_FUZZ=ON and clang. Entries and snapshots come from
// other replicas (authenticated, but a bug or a bad disk must not crash a
// node). The first byte picks the input:
//   0: a run of entries (u8 length, u8 time step in seconds, bytes) applied
//      in order, with a query after each (the same bytes); then the state
//      must snapshot, restore into a fresh state and snapshot to the same
//      bytes, and answer the same queries;
//   1: a snapshot from another replica: if Restore takes it, the state
//      snapshots and restores to itself;
//   2: a query result from another node: the decoders refuse or accept it,
//      never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cluster-core/partition/partition_state.h"
#include "model/hlc.h"

using namespace estuary::partition;

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

int64_t WallMs() { return 1'800'000'000'000; }

void RoundTrip(const PartitionState& state, const std::vector<std::string>& queries) {
  PartitionState copy(WallMs);
  Check(copy.Restore(state.Snapshot()));
  Check(copy.Snapshot() == state.Snapshot());
  for (const std::string& query : queries) Check(copy.Query(query) == state.Query(query));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      PartitionState state(WallMs);
      std::vector<std::string> queries;
      uint64_t ms = WallMs();
      size_t at = 0;
      estuary::raft::Index index = 0;
      while (at + 2 <= input.size()) {
        const size_t length = static_cast<uint8_t>(input[at]);
        ms += uint64_t{static_cast<uint8_t>(input[at + 1])} * 1000;
        at += 2;
        const std::string_view bytes = input.substr(at, length);
        at += bytes.size();
        estuary::raft::Entry entry;
        entry.index = ++index;
        entry.term = 1;
        entry.timestamp = estuary::HybridLogicalClock::Pack(ms, 0);
        entry.data.assign(bytes.begin(), bytes.end());
        state.Apply(entry);
        queries.emplace_back(bytes);
        (void)state.Query(bytes);
      }
      RoundTrip(state, queries);
      break;
    }
    case 1: {
      PartitionState state(WallMs);
      if (state.Restore(std::vector<uint8_t>(input.begin(), input.end()))) RoundTrip(state, {});
      break;
    }
    case 2: {
      (void)DecodeRetainedMatchResult(input);
      (void)DecodeRetainedIndexList(input);
      (void)DecodeSessionLoadResult(input);
      (void)DecodeSessionWriteResult(input);
      (void)DecodeQueueAppendResult(input);
      (void)DecodeQueueAckResult(input);
      (void)DecodeQueueReadResult(input);
      (void)DecodeQueueStats(input);
      break;
    }
  }
  return 0;
}
