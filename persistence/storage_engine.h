#pragma once
// StorageEngine: the key-value store under sessions, queues, retained
// messages, raft logs and metadata. Keys and values are byte strings; keys
// are ordered bytewise (memcmp), so big-endian sequence numbers scan in
// numeric order.
//
// Threading: an engine belongs to one owner thread (a shard's loop). Every
// method must be called there; callbacks (WriteAsync's `done`, timers) run
// there too. Nothing is thread-safe.
//
// Durability, by SyncPolicy. "Acknowledged" means Write returned ok, or
// WriteAsync called `done` with ok.
//   kAlways:   an acknowledged write has been fdatasync'ed (and, for a new
//              file, its directory synced): it survives kill -9 and power
//              loss. WriteAsync groups every write of one loop iteration
//              behind a single fdatasync (group commit).
//   kInterval: writes reach the OS at once (they survive kill -9 of the
//              process) and are synced every `sync_interval_ms`, driven by
//              the injected Loop's timer or by Tick(now). Power loss may lose
//              the last interval.
//   kNone:     synced only on Sync(), Close() and file rotation; power loss
//              may lose anything unsynced.
// Under every policy a crash never corrupts: what survives is a prefix of
// the acknowledged writes, and a WriteBatch survives whole or not at all.
//
// Reads see every write as soon as Write returns (even before it is
// durable).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace estuary::persistence {

enum class Errc {
  kInvalidArgument,  // e.g. a key or value over the engine's limits
  kCorruption,       // a CRC mismatch on read
  kIo,               // the file system failed
  kNoSpace,          // the disk is full; the engine stays readable
  kClosed,           // used after Close()
};

struct Error {
  Errc code = Errc::kIo;
  std::string message;
};

template <typename T>
using Result = Expected<T, Error>;
using Status = Expected<void, Error>;

inline Unexpected<Error> Fail(Errc code, std::string message) {
  return MakeError(Error{code, std::move(message)});
}

enum class SyncPolicy { kAlways, kInterval, kNone };

// Puts and deletes applied atomically, in order (a later op on the same key
// wins).
class WriteBatch {
 public:
  struct Op {
    bool is_delete = false;
    std::string key;
    std::string value;
  };
  void Put(std::string_view key, std::string_view value) {
    ops_.push_back(Op{false, std::string(key), std::string(value)});
  }
  void Delete(std::string_view key) { ops_.push_back(Op{true, std::string(key), {}}); }
  void Clear() { ops_.clear(); }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

struct Stats {
  uint64_t live_keys = 0;
  uint64_t live_bytes = 0;  // bytes of records still reachable (engine-defined)
  uint64_t dead_bytes = 0;  // bytes of overwritten or deleted records
  uint64_t files = 0;       // data files on disk (0 in memory)
  uint64_t syncs = 0;       // fdatasync calls made
};

// Return false to stop a scan early.
using ScanVisitor = std::function<bool(std::string_view key, std::string_view value)>;

class StorageEngine {
 public:
  virtual ~StorageEngine() = default;

  // One put or delete: Write of a batch of one. An engine may override them
  // to encode straight from the caller's bytes, sparing the batch's copy.
  virtual Status Put(std::string_view key, std::string_view value) {
    WriteBatch batch;
    batch.Put(key, value);
    return Write(batch);
  }
  virtual Status Delete(std::string_view key) {
    WriteBatch batch;
    batch.Delete(key);
    return Write(batch);
  }
  // Applies `batch` atomically; returns once it is acknowledged under the
  // sync policy (under kAlways: durable).
  virtual Status Write(const WriteBatch& batch) = 0;
  // Applies `batch` now (readable at once) and calls `done` once it is
  // acknowledged. Under kAlways an engine with a Loop batches all writes of
  // the current loop iteration into one fdatasync; the default calls
  // Write() and then `done` synchronously.
  virtual void WriteAsync(const WriteBatch& batch, std::function<void(Status)> done) {
    done(Write(batch));
  }
  // The value, or nullopt if the key does not exist.
  virtual Result<std::optional<std::string>> Get(std::string_view key) = 0;
  // Visits keys starting with `prefix` and not below `start`, in ascending
  // order, until `visit` returns false. The engine must not be written to
  // from inside `visit`.
  virtual Status Scan(std::string_view prefix, std::string_view start,
                      const ScanVisitor& visit) = 0;
  Status Scan(std::string_view prefix, const ScanVisitor& visit) {
    return Scan(prefix, prefix, visit);
  }
  // Makes every acknowledged write durable now.
  virtual Status Sync() = 0;
  // Periodic work: interval syncs and merges. `now_ms` is Loop::NowMs().
  virtual Status Tick(int64_t now_ms) = 0;
  virtual Stats GetStats() const = 0;
  // Syncs and releases files. Safe to call twice; later calls fail kClosed.
  virtual Status Close() = 0;
};

}  // namespace estuary::persistence
