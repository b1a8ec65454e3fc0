#pragma once
// The message-queue workload on one engine: append M messages of S bytes
// (keys: a queue prefix and a big-endian sequence) in write batches of B,
// close and reopen (restart time), get random live messages one at a time
// (up to 10,000), read them back in order in fetches of B
// (prefix scans from the next sequence), delete them in acks of B, then
// compact (Bitcask Merge, RocksDB CompactRange) and measure the disk.
#include <cstdint>
#include <string>
#include <vector>

#include "persistence/storage_engine.h"

namespace estuary::storage_bench {

struct RunConfig {
  std::string engine;  // "bitcask" or "rocksdb"
  persistence::SyncPolicy sync = persistence::SyncPolicy::kAlways;
  size_t size = 1024;
  size_t batch = 1;
  uint64_t messages = 1000;
  int64_t sync_interval_ms = 100;
  uint64_t seed = 1;
  std::string dir;  // the engine's directory; removed first
};

// One phase: operations are write batches, fetches or acks of `batch`
// messages; latencies are per operation.
struct Phase {
  uint64_t messages = 0;
  uint64_t operations = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  double MessagesPerSecond() const { return seconds > 0 ? messages / seconds : 0; }
};

struct RunResult {
  RunConfig config;
  Phase append, get, read, ack;  // get: one random live message per op
  double close_ms = 0;
  double restart_ms = 0;  // Open of the directory holding M messages
  uint64_t disk_after_append = 0;
  uint64_t disk_after_ack = 0;
  uint64_t disk_after_compact = 0;
  uint64_t syncs = 0;  // engine-reported syncs over the append phase
  std::string error;   // non-empty: the run failed here
};

RunResult RunQueueWorkload(const RunConfig& config);

// Bytes of every file under `dir`.
uint64_t DiskBytes(const std::string& dir);

}  // namespace estuary::storage_bench
