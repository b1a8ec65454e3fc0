#pragma once
// Wire form of the partition proposal frames (docs/internode.md, frames
// 0x50-0x53): a proposal or read sent to another replica (0x50 kPartitionPropose,
// 0x52 kPartitionRead) and its answer (0x51 kPartitionProposed, 0x53
// kPartitionReadAnswer). Pure functions; the decoders read bytes from other
// nodes and refuse anything malformed or with bytes left over.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cluster-core/meta/raft_codec.h"
#include "cluster-core/partition/partition_host.h"

namespace estuary::partition {

// 0x50 / 0x52: u64 request, u32 partition, u64 producer, u64 sequence,
// bytes data (a read carries write id 0 and its query as data).
struct ProposeFrame {
  uint64_t request = 0;
  PartitionId partition = 0;
  raft::WriteId id{};
  std::string data;
  friend bool operator==(const ProposeFrame&, const ProposeFrame&) = default;
};

// 0x51 / 0x53: u64 request, u8 status (at most kRejected), u64 index, u32
// leader hint (a node id, at most 0xFFFF), u8 has result (0 or 1), bytes
// result (empty when there is none).
struct ProposedFrame {
  uint64_t request = 0;
  meta::ProposeStatus status = meta::ProposeStatus::kOk;
  raft::Index index = 0;
  NodeId leader = 0;
  std::optional<std::string> result;
  friend bool operator==(const ProposedFrame&, const ProposedFrame&) = default;
};

std::string Encode(const ProposeFrame& frame);
std::optional<ProposeFrame> DecodePropose(std::string_view body);
std::string Encode(const ProposedFrame& frame);
// Accepts "no result" with non-empty result bytes (the bytes are dropped),
// as the decoder always has; Encode writes them empty.
std::optional<ProposedFrame> DecodeProposed(std::string_view body);

}  // namespace estuary::partition
