#pragma once
// Flags of estuary-storage-bench (CLI11). See README.md.
#include <cstdint>
#include <string>
#include <vector>

#include "persistence/storage_engine.h"

namespace estuary::storage_bench {

struct Options {
  std::vector<std::string> engines{"bitcask", "rocksdb"};
  std::vector<persistence::SyncPolicy> syncs{persistence::SyncPolicy::kAlways,
                                             persistence::SyncPolicy::kInterval,
                                             persistence::SyncPolicy::kNone};
  std::vector<size_t> sizes{100, 1024, 16384};  // message bytes
  std::vector<size_t> batches{1, 64};  // messages per write (per sync under always)
  uint64_t messages = 20000;
  uint64_t depth = 1000;       // queue depth of the steady phase
  double startup_gib = 0;      // > 0: the start-up runs, this many GiB each
  size_t startup_size = 1024;  // message bytes of the start-up runs
  int64_t sync_interval_ms = 100;
  uint64_t seed = 1;  // payload bytes (random, so compression gains nothing)
  int64_t bitcask_preallocate = -1;  // >= 0: BitcaskOptions::preallocate_bytes
  bool bitcask_background = true;    // BitcaskOptions::background_file_work
  size_t rocksdb_recycle_logs = 0;   // RocksDbOptions::recycle_log_file_num
  bool bitcask_rotate_ahead = true;  // BitcaskOptions::rotate_ahead
  std::string dir;    // a fresh directory under /tmp when empty
  bool json = false;
  bool keep = false;  // keep the data directories
};

const char* SyncName(persistence::SyncPolicy sync);

// Parses argv; on --help or a bad flag returns the exit code to use.
struct Parsed {
  Options options;
  int exit_code = -1;  // >= 0: exit now
};
Parsed ParseOptions(int argc, char** argv);

}  // namespace estuary::storage_bench
