#include "server/storage.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/clock.h"
#include "io/file_system.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/rocksdb/rocksdb_engine.h"
#include "server/node.h"

namespace estuary::server {
namespace {

constexpr char kMetaName[] = "estuary.meta";

persistence::SyncPolicy SyncPolicyOf(const std::string& sync) {
  if (sync == "always") return persistence::SyncPolicy::kAlways;
  if (sync == "none") return persistence::SyncPolicy::kNone;
  return persistence::SyncPolicy::kInterval;
}

std::string MetaText(const NodeConfig& config) {
  return fmt::format("format=1\nshards={}\nstorage={}\n", config.shards, config.storage);
}

// Writes the file and its directory entry durably (temp file, fsync, rename).
Expected<void, std::string> WriteDurably(const std::string& dir, const std::string& name,
                                         const std::string& text) {
  const std::string path = dir + "/" + name;
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return MakeError(fmt::format("{}: {}", temp, std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    return MakeError(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return {};
}

std::string ValueOf(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return {};
}

}  // namespace

bool StorageEnabled(const NodeConfig& config) {
  return !config.data_dir.empty() && config.storage != "memory";
}

Expected<void, std::string> PrepareDataDir(const NodeConfig& config) {
  std::error_code error;
  std::filesystem::create_directories(config.data_dir, error);
  if (error) return MakeError(fmt::format("data dir {}: {}", config.data_dir, error.message()));
  const std::string meta = config.data_dir + "/" + kMetaName;
  std::ifstream in(meta);
  if (!in) return WriteDurably(config.data_dir, kMetaName, MetaText(config));
  std::stringstream text;
  text << in.rdbuf();
  const std::string shards = ValueOf(text.str(), "shards");
  const std::string storage = ValueOf(text.str(), "storage");
  if (shards != std::to_string(config.shards)) {
    return MakeError(fmt::format(
        "data dir {} was written with --shards {}; start with --shards {} (moving sessions between "
        "shard counts is not supported)",
        config.data_dir, shards, shards));
  }
  if (storage != config.storage) {
    return MakeError(fmt::format("data dir {} was written with --storage {}; start with --storage {}",
                                 config.data_dir, storage, storage));
  }
  return {};
}

namespace {
constexpr char kIncarnationName[] = "incarnation";
}  // namespace

std::optional<uint64_t> LoadIncarnation(const NodeConfig& config) {
  if (!StorageEnabled(config)) return std::nullopt;
  std::ifstream in(config.data_dir + "/" + kIncarnationName);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const std::string value = ValueOf(text.str(), "incarnation");
  uint64_t incarnation = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), incarnation);
  if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
    spdlog::warn("membership: {}/{} does not parse; the incarnation comes from the clock", config.data_dir,
                 kIncarnationName);
    return std::nullopt;
  }
  return incarnation;
}

Expected<void, std::string> SaveIncarnation(const NodeConfig& config, uint64_t incarnation) {
  if (!StorageEnabled(config)) return {};
  std::error_code error;
  std::filesystem::create_directories(config.data_dir, error);
  if (error) return MakeError(fmt::format("data dir {}: {}", config.data_dir, error.message()));
  return WriteDurably(config.data_dir, kIncarnationName, fmt::format("incarnation={}\n", incarnation));
}

namespace {

// One engine of the configured kind in `dir`, on `loop`.
Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenEngineIn(
    const NodeConfig& config, const std::string& dir, std::function<void(const std::string&)> log,
    io::Loop& loop) {
  if (config.storage == "rocksdb") {
    persistence::RocksDbOptions options;
    options.sync = SyncPolicyOf(config.sync);
    options.loop = &loop;
    options.log = log;
    auto engine = persistence::RocksDbEngine::Open(dir, options);
    if (!engine) return MakeError(fmt::format("rocksdb {}: {}", dir, engine.error().message));
    return std::unique_ptr<persistence::StorageEngine>(std::move(*engine));
  }
  persistence::bitcask::BitcaskOptions options;
  options.sync = SyncPolicyOf(config.sync);
  options.loop = &loop;
  options.log = log;
  // Unlinks, a merge's final renames, rotation hints and the write-behind
  // sync run on the engine's own thread, off the shard's loop
  // (docs/storage.md).
  options.background_file_work = true;
  options.rotate_ahead = true;  // the janitor prepares the next data file and finishes the rotated one
  auto engine = persistence::bitcask::BitcaskEngine::Open(io::PosixFileSystem::Instance(), dir, options);
  if (!engine) return MakeError(fmt::format("bitcask {}: {}", dir, engine.error().message));
  return std::unique_ptr<persistence::StorageEngine>(std::move(*engine));
}

}  // namespace

Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenShardEngine(
    const NodeConfig& config, uint16_t shard, io::Loop& loop) {
  const std::string dir = fmt::format("{}/shard-{}", config.data_dir, shard);
  auto log = [shard](const std::string& line) { spdlog::info("storage shard {}: {}", shard, line); };
  return OpenEngineIn(config, dir, log, loop);
}

Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenMetaEngine(const NodeConfig& config,
                                                                                  io::Loop& loop) {
  auto log = [](const std::string& line) { spdlog::info("storage meta: {}", line); };
  return OpenEngineIn(config, config.data_dir + "/meta", log, loop);
}

Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenPartitionEngine(const NodeConfig& config,
                                                                                       io::Loop& loop) {
  auto log = [](const std::string& line) { spdlog::info("storage partitions: {}", line); };
  return OpenEngineIn(config, config.data_dir + "/partitions", log, loop);
}

Expected<void, std::string> Node::OpenStorage() {
  if (!StorageEnabled(config_)) {
    spdlog::info("storage: in memory (no --data-dir or --storage memory); nothing survives a restart");
    return {};
  }
  const int64_t started = io::SystemClock::Instance().NowMs();
  if (auto prepared = PrepareDataDir(config_); !prepared) return prepared;
  core::ShardBroker::RecoveryCounts total;
  int64_t open_ms = 0;
  for (uint16_t i = 0; i < shards_.size(); ++i) {
    const int64_t opening = io::SystemClock::Instance().NowMs();
    auto engine = OpenShardEngine(config_, i, shards_[i]->loop());
    if (!engine) return MakeError(engine.error());
    open_ms += io::SystemClock::Instance().NowMs() - opening;
    shards_[i]->AttachStorage(std::move(*engine));
    auto counts = shards_[i]->broker().Recover();
    if (!counts) return MakeError(counts.error());
    total.sessions += counts->sessions;
    total.subscriptions += counts->subscriptions;
    total.queued += counts->queued;
    total.inflight += counts->inflight;
    total.inbound_qos2 += counts->inbound_qos2;
    total.wills += counts->wills;
    total.retained += counts->retained;
    total.skipped += counts->skipped;
  }
  spdlog::info(
      "storage: {} in {} (sync={}, {} shards): recovered {} sessions, {} subscriptions, {} queued, "
      "{} in flight, {} inbound QoS 2 ids, {} wills, {} retained ({} records skipped) in {} ms "
      "({} ms opening the engines)",
      config_.storage, config_.data_dir, config_.sync, shards_.size(), total.sessions,
      total.subscriptions, total.queued, total.inflight, total.inbound_qos2, total.wills,
      total.retained, total.skipped, io::SystemClock::Instance().NowMs() - started, open_ms);
  return {};
}

}  // namespace estuary::server
