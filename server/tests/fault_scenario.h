#pragma once
// The fault suite's scenarios (issue 7 point 7, docs/reliability.md): a
// loopback cluster of real estuaryd processes, a Workload streaming one
// publish at a time from a node that survives, and one fault injected in
// the middle of the stream, then undone:
//
//   start, warm up (every key written once) -> stream -> FAULT -> stream
//   -> [read back on the survivors] -> RECOVERY -> stream -> read back on
//   every node.
//
// Faults: kill -9 of a leader of the stream's partitions, then a restart
// with its data; kill -9 of a replica that leads none of them (the stream
// is limited to those keys), restart with data; kill -9 of two nodes of five
// sharing the most partitions, both restarted with data once the stream
// stalls; kill -9 of node 1 and a restart with its data folder wiped;
// a leader cut off by the transport fault switch, then healed.
#include <ostream>
#include <string>
#include <vector>

#include "server/tests/fault_workload.h"

namespace estuary::server::testing {

enum class FaultKind { kKillLeader, kKillFollower, kKillTwo, kWipeRestart, kIsolateLeader };

struct FaultCase {
  int nodes = 3;
  std::string storage = "bitcask";
  FaultKind fault = FaultKind::kKillLeader;
  bool in_ci = false;         // run by ctest; the rest only with ESTUARY_FAULT_MATRIX=full
  std::string expected_fail;  // why it cannot pass today; empty: it must pass
  std::vector<std::string> node_flags;  // more estuaryd flags for every node (e.g. --replication-ack leader)

  std::string Name() const;      // "n3_bitcask_kill_leader" (a gtest parameter name)
  std::string Describe() const;  // the fault, in words
};
// For gtest's messages (instead of the bytes of the struct).
inline void PrintTo(const FaultCase& fault_case, std::ostream* out) { *out << fault_case.Name(); }

// 3 and 5 nodes x bitcask and rocksdb x the faults (kill-two only on 5).
std::vector<FaultCase> FullMatrix();

struct CaseResult {
  FaultCase fault_case;
  std::string workload;        // Workload::name()
  bool no_duplicates = false;  // a duplicate fails the case (QoS 2, sessions)
  int publisher = 0;
  std::vector<int> victims;
  std::string victim_role;  // what the victims held of the stream's partitions
  StreamCounters counters;
  double seconds = 0;
  std::string error;  // the case could not run to its end
  std::string notes;

  bool passed() const {
    return error.empty() && counters.lost == 0 && !(no_duplicates && counters.duplicated > 0);
  }
  bool meets_window_target() const { return counters.longest_unacked_ms <= 2000; }
  std::string FiguresLine() const;  // one line for the test's output
  std::string MarkdownRow() const;  // one row of the table in docs/reliability.md
};

CaseResult RunFaultCase(const FaultCase& fault_case, Workload& workload);

}  // namespace estuary::server::testing
