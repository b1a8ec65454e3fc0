#include "tools/storage-bench/workload.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>

#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/rocksdb/rocksdb_engine.h"

namespace estuary::storage_bench {
namespace {

using Clock = std::chrono::steady_clock;
using persistence::Status;
using persistence::StorageEngine;

constexpr std::string_view kQueuePrefix = "queue/bench/";
constexpr std::string_view kSteadyPrefix = "queue/steady/";  // same length

std::string Key(uint64_t sequence, std::string_view prefix = kQueuePrefix) {
  std::string key(prefix);
  for (int shift = 56; shift >= 0; shift -= 8) key.push_back(static_cast<char>(sequence >> shift));
  return key;
}

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// An open engine and its engine-specific compaction.
struct Opened {
  std::unique_ptr<StorageEngine> engine;
  std::function<Status()> compact;
  std::string error;
  // Waits for file work an engine does in the background (Bitcask's
  // janitor), so that disk figures count what is deleted as deleted.
  std::function<Status()> settle = [] { return Status{}; };
};

Opened OpenEngine(const RunConfig& config) {
  Opened opened;
  auto quiet = [](const std::string&) {};
  if (config.engine == "rocksdb") {
    persistence::RocksDbOptions options;
    options.sync = config.sync;
    options.sync_interval_ms = config.sync_interval_ms;
    options.recycle_log_file_num = config.rocksdb_recycle_logs;
    options.log = quiet;
    auto engine = persistence::RocksDbEngine::Open(config.dir, options);
    if (!engine) return Opened{nullptr, {}, engine.error().message};
    persistence::RocksDbEngine* raw = engine->get();
    opened.compact = [raw] { return raw->CompactAll(); };
    opened.engine = std::move(*engine);
    return opened;
  }
  persistence::bitcask::BitcaskOptions options;
  options.sync = config.sync;
  options.sync_interval_ms = config.sync_interval_ms;
  options.log = quiet;
  options.background_file_work = config.bitcask_background;
  options.rotate_ahead = config.bitcask_rotate_ahead;
  if (config.bitcask_preallocate >= 0) {
    options.preallocate_bytes = static_cast<uint64_t>(config.bitcask_preallocate);
  }
  auto engine = persistence::bitcask::BitcaskEngine::Open(io::PosixFileSystem::Instance(),
                                                          config.dir, options);
  if (!engine) return Opened{nullptr, {}, engine.error().message};
  persistence::bitcask::BitcaskEngine* raw = engine->get();
  opened.compact = [raw] { return raw->Merge(); };
  opened.settle = [raw] { return raw->WaitForFileWork(); };
  opened.engine = std::move(*engine);
  return opened;
}

// Times `op` once per operation; fills the phase's totals and percentiles.
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase& phase) : phase_(phase), start_(Clock::now()) {}
  template <typename Op>
  auto Time(Op&& op) {
    auto t0 = Clock::now();
    auto result = op();
    latencies_.push_back(Micros(Clock::now() - t0));
    return result;
  }
  void Finish(uint64_t messages) {
    phase_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    phase_.messages = messages;
    phase_.operations = latencies_.size();
    phase_.p50_us = Percentile(0.50);
    phase_.p99_us = Percentile(0.99);
  }

 private:
  double Percentile(double q) {
    if (latencies_.empty()) return 0;
    size_t index = std::min(latencies_.size() - 1, static_cast<size_t>(q * latencies_.size()));
    std::nth_element(latencies_.begin(), latencies_.begin() + index, latencies_.end());
    return latencies_[index];
  }
  Phase& phase_;
  Clock::time_point start_;
  std::vector<double> latencies_;
};

// Interval syncs (and Bitcask merges) are driven by Tick, as a shard's loop
// would; the bench has no loop.
Status Tick(StorageEngine& engine, Clock::time_point origin) {
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - origin);
  return engine.Tick(now_ms.count());
}

// Messages are slices of one random pool at scattered offsets: far enough
// apart that neighbouring messages share no bytes, so a block compressor
// (RocksDB's LZ4) finds nothing to gain, as with real encrypted or
// compressed payloads. (Slices 0..63 bytes apart made RocksDB's SST files
// 3.5x smaller than the data.)
constexpr size_t kPayloadPoolBytes = 8u << 20;

std::string RandomPayload(const RunConfig& config) {
  std::mt19937_64 random(config.seed);
  std::string payload(kPayloadPoolBytes + config.size, '\0');
  for (size_t i = 0; i + 8 <= payload.size(); i += 8) {
    uint64_t word = random();
    std::memcpy(payload.data() + i, &word, 8);
  }
  return payload;
}

std::string_view Message(const std::string& payload, uint64_t sequence, size_t size) {
  constexpr uint64_t kStride = 1'048'583;  // a prime: offsets cover the pool
  return std::string_view(payload).substr((sequence * kStride) % kPayloadPoolBytes, size);
}

std::string RunAppend(const RunConfig& config, StorageEngine& engine, Phase& phase) {
  std::string payload = RandomPayload(config);
  PhaseTimer timer(phase);
  auto origin = Clock::now();
  for (uint64_t next = 0; next < config.messages;) {
    // A batch of one is a Put: what a caller with one message would call
    // (an engine may encode it without the batch's copy).
    if (config.batch == 1) {
      std::string key = Key(next);
      std::string_view value = Message(payload, next++, config.size);
      if (auto s = timer.Time([&] { return engine.Put(key, value); }); !s) {
        return s.error().message;
      }
    } else {
      persistence::WriteBatch batch;
      for (size_t i = 0; i < config.batch && next < config.messages; ++i, ++next) {
        batch.Put(Key(next), Message(payload, next, config.size));
      }
      if (auto s = timer.Time([&] { return engine.Write(batch); }); !s) return s.error().message;
    }
    if (auto s = Tick(engine, origin); !s) return s.error().message;
  }
  timer.Finish(config.messages);
  return {};
}

std::string RunRandomGets(const RunConfig& config, StorageEngine& engine, Phase& phase) {
  std::mt19937_64 random(config.seed + 1);
  uint64_t count = std::min<uint64_t>(config.messages, 10000);
  PhaseTimer timer(phase);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t sequence = random() % config.messages;
    auto value = timer.Time([&] { return engine.Get(Key(sequence)); });
    if (!value) return value.error().message;
    if (!*value || (*value)->size() != config.size) {
      return "message " + std::to_string(sequence) + " missing or of the wrong size";
    }
  }
  timer.Finish(count);
  return {};
}

std::string RunRead(const RunConfig& config, StorageEngine& engine, Phase& phase) {
  PhaseTimer timer(phase);
  uint64_t next = 0;
  std::string error;
  while (next < config.messages && error.empty()) {
    uint64_t fetched = 0;
    auto s = timer.Time([&] {
      return engine.Scan(kQueuePrefix, Key(next), [&](std::string_view, std::string_view value) {
        if (value.size() != config.size) error = "read a message of the wrong size";
        return ++fetched < config.batch;
      });
    });
    if (!s) return s.error().message;
    if (fetched == 0) return "queue ended early at message " + std::to_string(next);
    next += fetched;
  }
  timer.Finish(next);
  return error;
}

std::string RunAck(const RunConfig& config, StorageEngine& engine, Phase& phase) {
  PhaseTimer timer(phase);
  auto origin = Clock::now();
  for (uint64_t next = 0; next < config.messages;) {
    if (config.batch == 1) {
      std::string key = Key(next++);
      if (auto s = timer.Time([&] { return engine.Delete(key); }); !s) return s.error().message;
    } else {
      persistence::WriteBatch batch;
      for (size_t i = 0; i < config.batch && next < config.messages; ++i, ++next) {
        batch.Delete(Key(next));
      }
      if (auto s = timer.Time([&] { return engine.Write(batch); }); !s) return s.error().message;
    }
    if (auto s = Tick(engine, origin); !s) return s.error().message;
  }
  timer.Finish(config.messages);
  return {};
}

double TimeMs(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Status AppendRange(const RunConfig& config, StorageEngine& engine, const std::string& payload,
                   uint64_t from, uint64_t to) {
  if (to == from + 1) return engine.Put(Key(from, kSteadyPrefix), Message(payload, from, config.size));
  persistence::WriteBatch batch;
  for (uint64_t sequence = from; sequence < to; ++sequence) {
    batch.Put(Key(sequence, kSteadyPrefix),
              Message(payload, sequence, config.size));
  }
  return engine.Write(batch);
}

// One steady-state cycle: append `count` at the tail, fetch `count` from
// the head, ack what was fetched.
Status SteadyCycle(const RunConfig& config, StorageEngine& engine, const std::string& payload,
                   uint64_t count, uint64_t& head, uint64_t& tail, std::string& error) {
  if (auto s = AppendRange(config, engine, payload, tail, tail + count); !s) return s;
  tail += count;
  persistence::WriteBatch ack;
  auto s = engine.Scan(kSteadyPrefix, Key(head, kSteadyPrefix),
                       [&](std::string_view key, std::string_view value) {
                         if (value.size() != config.size) error = "steady: wrong size";
                         ack.Delete(key);
                         return ack.size() < count;
                       });
  if (!s) return s;
  if (ack.size() != count) error = "steady: queue shorter than the batch";
  head += ack.size();
  if (ack.size() == 1) return engine.Delete(ack.ops().front().key);
  return engine.Write(ack);
}

std::string RunSteady(const RunConfig& config, StorageEngine& engine, Phase& phase) {
  std::string payload = RandomPayload(config);
  uint64_t head = 0;
  uint64_t tail = 0;
  while (tail < config.depth) {
    uint64_t to = std::min(config.depth, tail + config.batch);
    if (auto s = AppendRange(config, engine, payload, tail, to); !s) return s.error().message;
    tail = to;
  }
  PhaseTimer timer(phase);
  auto origin = Clock::now();
  std::string error;
  while (head < config.messages && error.empty()) {
    uint64_t count = std::min<uint64_t>(config.batch, config.messages - head);
    auto s = timer.Time(
        [&] { return SteadyCycle(config, engine, payload, count, head, tail, error); });
    if (!s) return s.error().message;
    if (auto t = Tick(engine, origin); !t) return t.error().message;
  }
  timer.Finish(head);
  return error;
}

}  // namespace

uint64_t HeapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

RunResult RunQueueWorkload(const RunConfig& config) {
  RunResult result;
  result.config = config;
  auto fail = [&result](std::string where, std::string error) {
    result.error = where + ": " + error;
    return result;
  };
  std::filesystem::remove_all(config.dir);
  std::filesystem::create_directories(std::filesystem::path(config.dir).parent_path());
  Opened opened = OpenEngine(config);
  if (!opened.engine) return fail("open", opened.error);
  if (auto e = RunAppend(config, *opened.engine, result.append); !e.empty()) {
    return fail("append", e);
  }
  result.syncs = opened.engine->GetStats().syncs;
  result.disk_after_append = DiskBytes(config.dir);
  result.close_ms = TimeMs([&] { (void)opened.engine->Close(); });
  opened = Opened{};
  uint64_t heap_before = HeapInUse();
  result.restart_ms = TimeMs([&] { opened = OpenEngine(config); });
  if (!opened.engine) return fail("reopen", opened.error);
  result.heap_bytes_per_key =
      (static_cast<double>(HeapInUse()) - static_cast<double>(heap_before)) / config.messages;
  if (auto e = RunRandomGets(config, *opened.engine, result.get); !e.empty()) {
    return fail("get", e);
  }
  if (auto e = RunRead(config, *opened.engine, result.read); !e.empty()) {
    return fail("read", e);
  }
  if (auto e = RunAck(config, *opened.engine, result.ack); !e.empty()) {
    return fail("ack", e);
  }
  if (auto s = opened.engine->Sync(); !s) return fail("sync", s.error().message);
  if (auto s = opened.settle(); !s) return fail("settle", s.error().message);
  result.disk_after_ack = DiskBytes(config.dir);
  if (auto s = opened.compact(); !s) return fail("compact", s.error().message);
  if (auto s = opened.settle(); !s) return fail("settle", s.error().message);
  result.disk_after_compact = DiskBytes(config.dir);
  if (auto e = RunSteady(config, *opened.engine, result.steady); !e.empty()) {
    return fail("steady", e);
  }
  (void)opened.engine->Close();
  return result;
}

namespace {

void RemoveHints(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".hint") std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

StartupResult RunStartup(const StartupConfig& startup) {
  StartupResult result;
  result.config = startup;
  auto fail = [&result](std::string where, std::string error) {
    result.error = where + ": " + error;
    std::filesystem::remove_all(result.config.dir);
    return result;
  };
  RunConfig config;
  config.engine = startup.engine;
  config.sync = persistence::SyncPolicy::kNone;
  config.size = startup.size;
  config.batch = 64;
  config.seed = startup.seed;
  config.dir = startup.dir;
  config.messages = static_cast<uint64_t>(startup.gib * (1ull << 30) / startup.size);
  std::filesystem::remove_all(config.dir);
  std::filesystem::create_directories(std::filesystem::path(config.dir).parent_path());
  Opened opened = OpenEngine(config);
  if (!opened.engine) return fail("open", opened.error);
  Phase fill;
  if (auto e = RunAppend(config, *opened.engine, fill); !e.empty()) return fail("fill", e);
  if (auto s = opened.engine->Close(); !s) return fail("close", s.error().message);
  opened = Opened{};
  result.messages = config.messages;
  result.fill_seconds = fill.seconds;
  result.disk_bytes = DiskBytes(config.dir);
  uint64_t heap_before = HeapInUse();
  result.open_ms = TimeMs([&] { opened = OpenEngine(config); });
  if (!opened.engine) return fail("reopen", opened.error);
  result.heap_bytes_per_key =
      (static_cast<double>(HeapInUse()) - static_cast<double>(heap_before)) / config.messages;
  (void)opened.engine->Close();
  opened = Opened{};
  if (config.engine == "bitcask") {
    RemoveHints(config.dir);
    result.open_without_hints_ms = TimeMs([&] { opened = OpenEngine(config); });
    if (!opened.engine) return fail("reopen without hints", opened.error);
    (void)opened.engine->Close();
    opened = Opened{};
  }
  std::filesystem::remove_all(config.dir);
  return result;
}

}  // namespace estuary::storage_bench
