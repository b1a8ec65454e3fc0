#pragma once
// What a leader knows about one follower's log (replication flow control).
#include <cstdint>
#include <deque>

#include "cluster-core/raft/types.h"

namespace estuary::raft {

struct Progress {
  enum class State {
    kProbe,      // one append at a time until the match point is found
    kReplicate,  // pipelined: up to max_inflight appends outstanding
    kSnapshot,   // an InstallSnapshot is outstanding
  };
  State state = State::kProbe;
  Index match = 0;  // highest index known replicated (and persisted) there
  Index next = 1;   // next index to send
  bool probe_sent = false;          // kProbe: an append awaits its answer
  std::deque<Index> inflight{};      // kReplicate: last index of each append
  bool acked_since_heartbeat = false;  // any success since the last heartbeat
  bool recent_active = false;       // heard from since the last quorum check
  uint64_t lease_ack = 0;           // latest send_time it echoed back
  uint64_t match_at = 0;            // send_time of the append whose ack last raised match
  Index snapshot_index = 0;         // the snapshot being sent (kSnapshot)
  uint64_t snapshot_offset = 0;     // bytes of it the follower holds
};

}  // namespace estuary::raft
