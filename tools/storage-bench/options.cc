#include "tools/storage-bench/options.h"

#include <CLI/CLI.hpp>
#include <map>

namespace estuary::storage_bench {

const char* SyncName(persistence::SyncPolicy sync) {
  switch (sync) {
    case persistence::SyncPolicy::kAlways:
      return "always";
    case persistence::SyncPolicy::kInterval:
      return "interval";
    case persistence::SyncPolicy::kNone:
      return "none";
  }
  return "?";
}

Parsed ParseOptions(int argc, char** argv) {
  Parsed parsed;
  Options& o = parsed.options;
  CLI::App app{
      "estuary-storage-bench: the message-queue workload (append, read in order, delete after "
      "ack, steady queue depth, restart) on the Bitcask and RocksDB engines side by side"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<std::string> sync_names{"always", "interval", "none"};
  app.add_option("-e,--engines", o.engines, "Engines: bitcask, rocksdb")
      ->delimiter(',')
      ->check(CLI::IsMember({"bitcask", "rocksdb"}))
      ->capture_default_str();
  app.add_option("--sync", sync_names, "Sync policies: always, interval, none")
      ->delimiter(',')
      ->check(CLI::IsMember({"always", "interval", "none"}))
      ->capture_default_str();
  app.add_option("-s,--size", o.sizes, "Message bytes (list: 100,1024,16384)")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, size_t{64} << 20))
      ->capture_default_str();
  app.add_option("-b,--batch", o.batches,
                 "Messages per write batch, per read fetch and per ack (list); under always one "
                 "WAL/file sync per batch (group commit)")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("-n,--messages", o.messages, "Messages per run")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  app.add_option("--depth", o.depth,
                 "Messages queued during the steady phase (append, fetch and ack one batch per "
                 "cycle)")
      ->capture_default_str();
  app.add_option("--startup-gib", o.startup_gib,
                 "Also fill each engine with this many GiB and time Open with and without hint "
                 "files (0: skip; takes minutes for 1)")
      ->check(CLI::Range(0.0, 64.0))
      ->capture_default_str();
  app.add_option("--startup-size", o.startup_size, "Message bytes of the start-up runs")
      ->check(CLI::Range(size_t{1}, size_t{64} << 20))
      ->capture_default_str();
  app.add_option("--interval-ms", o.sync_interval_ms, "Sync interval of the interval policy")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the payload bytes")->capture_default_str();
  app.add_option("--bitcask-preallocate", o.bitcask_preallocate,
                 "Bitcask's zero-filled step ahead of the active file under always (bytes; 0: "
                 "plain appends, as format version 1; default: the engine's)");
  app.add_option("--bitcask-background", o.bitcask_background,
                 "Bitcask: unlink dropped files and finish merges on a thread of the engine's "
                 "own (1, the default) or on the caller's (0)")
      ->capture_default_str();
  app.add_option("--bitcask-rotate-ahead", o.bitcask_rotate_ahead,
                 "Bitcask: prepare the next data file and finish a rotated one (trim, hint) on "
                 "the janitor (1, the default) or on the writer's path (0)")
      ->capture_default_str();
  app.add_option("--rocksdb-recycle-logs", o.rocksdb_recycle_logs,
                 "RocksDB recycle_log_file_num (0: off, the engine's setting; > 0 also switches "
                 "to kTolerateCorruptedTailRecords recovery, outside the engine contract: "
                 "measurement only)")
      ->capture_default_str();
  app.add_option("--dir", o.dir,
                 "Parent directory for the engines' data (default: a new /tmp dir)");
  app.add_flag("--json", o.json, "Print JSON instead of the tables");
  app.add_flag("--keep", o.keep, "Keep the data directories");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    parsed.exit_code = app.exit(e);
    return parsed;
  }
  std::map<std::string, persistence::SyncPolicy> by_name{
      {"always", persistence::SyncPolicy::kAlways},
      {"interval", persistence::SyncPolicy::kInterval},
      {"none", persistence::SyncPolicy::kNone}};
  o.syncs.clear();
  for (const std::string& name : sync_names) o.syncs.push_back(by_name.at(name));
  return parsed;
}

}  // namespace estuary::storage_bench
