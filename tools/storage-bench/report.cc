#include "tools/storage-bench/report.h"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tools/storage-bench/options.h"

namespace estuary::storage_bench {
namespace {

double Mb(uint64_t bytes) { return bytes / 1e6; }

std::string RunLabel(const RunConfig& c) {
  return fmt::format("{:<8} {:<8} {:>6} {:>5}", c.engine, SyncName(c.sync), c.size, c.batch);
}

std::string PhaseRow(const RunResult& run, const char* name, const Phase& phase) {
  double mb_per_s = phase.MessagesPerSecond() * run.config.size / 1e6;
  return fmt::format("{} {:<7} {:>10.0f} {:>8.1f} {:>9.1f} {:>9.1f}\n", RunLabel(run.config), name,
                     phase.MessagesPerSecond(), mb_per_s, phase.p50_us, phase.p99_us);
}

nlohmann::json PhaseJson(const RunResult& run, const Phase& phase) {
  return {{"messages", phase.messages},
          {"operations", phase.operations},
          {"seconds", phase.seconds},
          {"messages_per_s", phase.MessagesPerSecond()},
          {"mb_per_s", phase.MessagesPerSecond() * run.config.size / 1e6},
          {"p50_us_per_op", phase.p50_us},
          {"p99_us_per_op", phase.p99_us}};
}

}  // namespace

std::string DescribeMachine(const std::string& dir) {
  std::string cpu = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname name{};
  ::uname(&name);
  return fmt::format("{}, {} cpus, Linux {}, data in {}", cpu, std::thread::hardware_concurrency(),
                     name.release, dir);
}

namespace {

std::string FormatStartups(const std::vector<StartupResult>& startups) {
  if (startups.empty()) return {};
  std::string out = fmt::format("\n{:<8} {:>6} {:>10} {:>9} {:>8} {:>10} {:>10} {:>12} {:>10}\n",
                                "engine", "bytes", "messages", "disk MB", "fill s", "open ms",
                                "ms/GiB", "no-hints ms", "heap B/key");
  for (const StartupResult& s : startups) {
    if (!s.error.empty()) {
      out += fmt::format("{:<8} start-up FAILED: {}\n", s.config.engine, s.error);
      continue;
    }
    double gib = s.disk_bytes / double(1ull << 30);
    std::string no_hints =
        s.open_without_hints_ms < 0 ? "-" : fmt::format("{:.0f}", s.open_without_hints_ms);
    out += fmt::format(
        "{:<8} {:>6} {:>10} {:>9.0f} {:>8.1f} {:>10.0f} {:>10.0f} {:>12} {:>10.1f}\n",
        s.config.engine, s.config.size, s.messages, Mb(s.disk_bytes), s.fill_seconds, s.open_ms,
        gib > 0 ? s.open_ms / gib : 0, no_hints, s.heap_bytes_per_key);
  }
  out +=
      "start-up: fill (sync none, batches of 64), Close, then time Open (Bitcask: from hint "
      "files; RocksDB: WAL replay and flush); no-hints = Bitcask Open with every .hint deleted "
      "(scans and rewrites them); ms/GiB per GiB on disk; heap = bytes held per key after Open. "
      "Page cache warm.\n";
  return out;
}

}  // namespace

std::string FormatTables(const std::vector<RunResult>& runs,
                         const std::vector<StartupResult>& startups) {
  std::string out =
      fmt::format("{:<8} {:<8} {:>6} {:>5} {:<7} {:>10} {:>8} {:>9} {:>9}\n", "engine", "sync",
                  "bytes", "batch", "phase", "msg/s", "MB/s", "p50 us/op", "p99 us/op");
  for (const RunResult& run : runs) {
    if (!run.error.empty()) {
      out += fmt::format("{} FAILED: {}\n", RunLabel(run.config), run.error);
      continue;
    }
    out += PhaseRow(run, "append", run.append);
    out += PhaseRow(run, "get", run.get);
    out += PhaseRow(run, "read", run.read);
    out += PhaseRow(run, "ack", run.ack);
    out += PhaseRow(run, "steady", run.steady);
  }
  out += fmt::format("\n{:<8} {:<8} {:>6} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
                     "engine", "sync", "bytes", "batch", "syncs", "close ms", "restart ms",
                     "heap B/key", "disk MB", "acked MB", "compact MB");
  for (const RunResult& run : runs) {
    if (!run.error.empty()) continue;
    out +=
        fmt::format("{} {:>8} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.2f} {:>10.2f} {:>8.2f}\n",
                    RunLabel(run.config), run.syncs, run.close_ms, run.restart_ms,
                    run.heap_bytes_per_key, Mb(run.disk_after_append), Mb(run.disk_after_ack),
                    Mb(run.disk_after_compact));
  }
  out +=
      "\nop = one write batch (append), Get of one random live message (get), fetch (read) "
      "or ack batch of `batch` messages, steady = one cycle (append, fetch and ack `batch` "
      "with the queue held at --depth); restart = Open with every message live; heap B/key "
      "= heap held by the reopened engine per live message; disk MB after append, after "
      "acking all, after Merge/CompactRange.\n";
  out += FormatStartups(startups);
  return out;
}

std::string FormatJson(const std::vector<RunResult>& runs,
                       const std::vector<StartupResult>& startups, const std::string& machine) {
  nlohmann::json doc = {{"machine", machine},
                        {"runs", nlohmann::json::array()},
                        {"startup", nlohmann::json::array()}};
  for (const StartupResult& s : startups) {
    nlohmann::json j = {{"engine", s.config.engine},
                        {"gib", s.config.gib},
                        {"message_bytes", s.config.size}};
    if (!s.error.empty()) {
      j["error"] = s.error;
    } else {
      j["messages"] = s.messages;
      j["disk_bytes"] = s.disk_bytes;
      j["fill_seconds"] = s.fill_seconds;
      j["open_ms"] = s.open_ms;
      if (s.open_without_hints_ms >= 0) j["open_without_hints_ms"] = s.open_without_hints_ms;
      j["heap_bytes_per_key"] = s.heap_bytes_per_key;
    }
    doc["startup"].push_back(std::move(j));
  }
  for (const RunResult& run : runs) {
    nlohmann::json j = {{"engine", run.config.engine},
                        {"sync", SyncName(run.config.sync)},
                        {"message_bytes", run.config.size},
                        {"batch", run.config.batch},
                        {"messages", run.config.messages}};
    if (!run.error.empty()) {
      j["error"] = run.error;
    } else {
      j["append"] = PhaseJson(run, run.append);
      j["get"] = PhaseJson(run, run.get);
      j["read"] = PhaseJson(run, run.read);
      j["ack"] = PhaseJson(run, run.ack);
      j["steady"] = PhaseJson(run, run.steady);
      j["steady_depth"] = run.config.depth;
      j["heap_bytes_per_key"] = run.heap_bytes_per_key;
      j["append_syncs"] = run.syncs;
      j["close_ms"] = run.close_ms;
      j["restart_ms"] = run.restart_ms;
      j["disk_bytes"] = {{"after_append", run.disk_after_append},
                         {"after_ack", run.disk_after_ack},
                         {"after_compact", run.disk_after_compact}};
    }
    doc["runs"].push_back(std::move(j));
  }
  return doc.dump(2) + "\n";
}

}  // namespace estuary::storage_bench
