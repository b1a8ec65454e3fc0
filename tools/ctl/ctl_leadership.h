#pragma once
// estuaryctl's planned leadership moves (docs/partitions.md "Planned
// leadership moves"): transfer-leader and drain, which take more than one
// request (follow the leader, then watch the move happen).
#include <iosfwd>
#include <string>

#include "io/uv/tcp.h"

namespace estuary::ctl {

struct TransferOptions {
  uint32_t partition = 0;
  unsigned to = 0;      // 0: any other caught-up voter
  bool clear = false;   // drop the pin instead
};

// POST /api/cluster/partitions/transfer at `admin`, following 421 answers to
// the leader (or a replica) through the member table's admin addresses,
// then watches the old leader's /api/cluster/partitions until `to` leads.
// Exit status as RunCtl's.
int RunTransfer(const io::Endpoint& admin, const TransferOptions& options, bool json, int timeout_ms,
                std::ostream& out, std::ostream& err);

// POST /api/drain (or DELETE with `undrain`); with `wait`, watches the
// node's /api/cluster/partitions until it leads no partition.
int RunDrain(const io::Endpoint& admin, bool undrain, bool wait, bool json, int timeout_ms, std::ostream& out,
             std::ostream& err);

// "partition 17: leader 1 -> 3 (pinned; 42ms)" and the like (for tests).
std::string FormatTransfer(uint32_t partition, unsigned from, unsigned to, int64_t took_ms);
std::string FormatDrain(unsigned node, size_t moved, int64_t took_ms);

}  // namespace estuary::ctl
