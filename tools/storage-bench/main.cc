// estuary-storage-bench: the message-queue workload on Bitcask and RocksDB,
// side by side (README.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/storage-bench/options.h"
#include "tools/storage-bench/report.h"
#include "tools/storage-bench/workload.h"

using estuary::storage_bench::RunConfig;
using estuary::storage_bench::RunResult;
using estuary::storage_bench::StartupConfig;
using estuary::storage_bench::StartupResult;

namespace {

std::string MakeParentDir(const std::string& requested) {
  if (!requested.empty()) {
    std::filesystem::create_directories(requested);
    return requested;
  }
  char tmpl[] = "/tmp/estuary_storage_bench_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return {};
  return tmpl;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = estuary::storage_bench::ParseOptions(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  const auto& o = parsed.options;
  std::string parent = MakeParentDir(o.dir);
  if (parent.empty()) {
    std::fprintf(stderr, "cannot create a data directory\n");
    return 1;
  }
  std::string machine = estuary::storage_bench::DescribeMachine(parent);
  if (!o.json)
    std::printf("%s\n%llu messages per run\n\n", machine.c_str(),
                static_cast<unsigned long long>(o.messages));
  std::vector<RunResult> runs;
  bool failed = false;
  // Engines innermost, so each pair of rows compares like with like.
  for (auto sync : o.syncs) {
    for (size_t size : o.sizes) {
      for (size_t batch : o.batches) {
        for (const std::string& engine : o.engines) {
          RunConfig config{engine,     sync,
                           size,       batch,
                           o.messages, o.sync_interval_ms,
                           o.seed,     parent + "/" + engine,
                           o.depth,    o.bitcask_preallocate,
                           o.bitcask_background, o.rocksdb_recycle_logs,
                           o.bitcask_rotate_ahead};
          runs.push_back(estuary::storage_bench::RunQueueWorkload(config));
          failed = failed || !runs.back().error.empty();
          if (!o.keep) std::filesystem::remove_all(config.dir);
        }
      }
    }
  }
  std::vector<StartupResult> startups;
  if (o.startup_gib > 0) {
    for (const std::string& engine : o.engines) {
      StartupConfig config{engine, o.startup_gib, o.startup_size, o.seed,
                           parent + "/" + engine + "-startup"};
      startups.push_back(estuary::storage_bench::RunStartup(config));
      failed = failed || !startups.back().error.empty();
    }
  }
  std::string out = o.json ? estuary::storage_bench::FormatJson(runs, startups, machine)
                           : estuary::storage_bench::FormatTables(runs, startups);
  std::fputs(out.c_str(), stdout);
  if (!o.keep && o.dir.empty()) std::filesystem::remove_all(parent);
  return failed ? 1 : 0;
}
