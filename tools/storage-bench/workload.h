#pragma once
// The message-queue workload on one engine: append M messages of S bytes
// (keys: a queue prefix and a big-endian sequence) in write batches of B,
// close and reopen (restart time, heap held per key), get random live
// messages one at a time (up to 10,000), read them back in order in
// fetches of B (prefix scans from the next sequence), delete them in acks
// of B, compact (Bitcask Merge, RocksDB CompactRange) and measure the disk;
// then the steady queue: D messages queued, and M more pass through it in
// cycles of append B, fetch B, ack B, so the depth stays D.
//
// RunStartup: fill an engine with G GiB, close, and time Open with hint
// files and (Bitcask) without them.
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
  uint64_t depth = 1000;  // messages queued during the steady phase
  int64_t bitcask_preallocate = -1;  // >= 0: BitcaskOptions::preallocate_bytes
  bool bitcask_background = true;    // BitcaskOptions::background_file_work
  size_t rocksdb_recycle_logs = 0;   // RocksDbOptions::recycle_log_file_num
  bool bitcask_rotate_ahead = true;  // BitcaskOptions::rotate_ahead
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
  Phase steady;  // op = one cycle: append B, fetch B, ack B at depth D
  double close_ms = 0;
  double restart_ms = 0;  // Open of the directory holding M messages
  // Heap (glibc mallinfo2, all arenas, mmapped blocks included) held by the
  // reopened engine, per live message: Bitcask's key directory; RocksDB's
  // memtables refilled from the WAL, table readers, index and filter blocks.
  double heap_bytes_per_key = 0;
  uint64_t disk_after_append = 0;
  uint64_t disk_after_ack = 0;
  uint64_t disk_after_compact = 0;
  uint64_t syncs = 0;  // engine-reported syncs over the append phase
  std::string error;   // non-empty: the run failed here
};

RunResult RunQueueWorkload(const RunConfig& config);

struct StartupConfig {
  std::string engine;
  double gib = 1;      // payload to write
  size_t size = 1024;  // message bytes
  uint64_t seed = 1;
  std::string dir;     // removed first and after
};

struct StartupResult {
  StartupConfig config;
  uint64_t messages = 0;
  uint64_t disk_bytes = 0;
  double fill_seconds = 0;
  double open_ms = 0;               // after a clean Close (Bitcask: with hints)
  double open_without_hints_ms = -1;  // Bitcask with every *.hint deleted
  double heap_bytes_per_key = 0;    // held after open_ms's Open
  std::string error;
};

StartupResult RunStartup(const StartupConfig& config);

// Bytes in use on the heap (mallinfo2 uordblks + hblkhd).
uint64_t HeapInUse();

// Bytes of every file under `dir`.
uint64_t DiskBytes(const std::string& dir);

}  // namespace estuary::storage_bench
