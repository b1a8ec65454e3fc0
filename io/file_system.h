#pragma once
// FileSystem: the seam between storage code and the disk. PosixFileSystem is
// the real one; SimFileSystem keeps files in memory and can lose what was not
// synced (Crash), tear the unsynced tail, flip a bit, run out of space, and
// "kill the process" after N more mutating calls (CrashAfter). Deterministic
// for a given seed.
//
// Durability model (what SimFileSystem enforces and PosixFileSystem relies
// on): File::Sync makes a file's bytes durable; a created, renamed or removed
// directory entry is durable only after SyncDir on its directory.
//
// Threading: a FileSystem and its Files belong to one thread (the storage
// owner). Paths are '/'-separated; no normalisation is done.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace estuary::io {

enum class FsErrc { kNotFound, kNoSpace, kIo, kInvalid };

struct FsError {
  FsErrc code = FsErrc::kIo;
  std::string message;
};

template <typename T>
using FsResult = Expected<T, FsError>;
using FsStatus = Expected<void, FsError>;

// An open file. Destroying it closes it.
class File {
 public:
  virtual ~File() = default;
  // Appends at the end (files opened for reading only refuse).
  virtual FsStatus Append(std::string_view data) = 0;
  // Reads up to `n` bytes at `offset`; fewer only at end of file.
  virtual FsResult<std::string> ReadAt(uint64_t offset, size_t n) const = 0;
  // fdatasync: the bytes written so far survive a crash or power loss.
  virtual FsStatus Sync() = 0;
  virtual FsResult<uint64_t> Size() const = 0;
  // Cuts the file to `size` bytes (used to drop a torn tail).
  virtual FsStatus Truncate(uint64_t size) = 0;
  // Writes `data` at `offset`, over existing bytes or past the end (files
  // from OpenWrite only; others refuse with kInvalid). Overwriting bytes
  // already allocated lets Sync flush data blocks without a size change.
  virtual FsStatus WriteAt(uint64_t offset, std::string_view data) {
    (void)offset;
    (void)data;
    return MakeError(FsError{FsErrc::kInvalid, "positional writes not supported"});
  }
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Opens for appending (and reading), creating an empty file if missing.
  virtual FsResult<std::unique_ptr<File>> OpenAppend(const std::string& path) = 0;
  // Opens an existing file for reading.
  virtual FsResult<std::unique_ptr<File>> OpenRead(const std::string& path) = 0;
  // Opens for positional writes (WriteAt), reads and appends, creating an
  // empty file if missing. Refused (kInvalid) where not supported.
  virtual FsResult<std::unique_ptr<File>> OpenWrite(const std::string& path) {
    return MakeError(FsError{FsErrc::kInvalid, "positional writes not supported: " + path});
  }
  // Atomically replaces `to` with `from`.
  virtual FsStatus Rename(const std::string& from, const std::string& to) = 0;
  virtual FsStatus Remove(const std::string& path) = 0;
  // Entry names (not paths) in `dir`, sorted; no "." or "..".
  virtual FsResult<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual FsResult<uint64_t> FileSize(const std::string& path) = 0;
  // Creates `dir` (one level); succeeds if it already exists.
  virtual FsStatus CreateDir(const std::string& dir) = 0;
  // Makes creations, renames and removals in `dir` durable.
  virtual FsStatus SyncDir(const std::string& dir) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The real file system (open/pwrite/pread/fdatasync/rename/unlink).
class PosixFileSystem final : public FileSystem {
 public:
  FsResult<std::unique_ptr<File>> OpenAppend(const std::string& path) override;
  FsResult<std::unique_ptr<File>> OpenRead(const std::string& path) override;
  FsResult<std::unique_ptr<File>> OpenWrite(const std::string& path) override;
  FsStatus Rename(const std::string& from, const std::string& to) override;
  FsStatus Remove(const std::string& path) override;
  FsResult<std::vector<std::string>> ListDir(const std::string& dir) override;
  FsResult<uint64_t> FileSize(const std::string& path) override;
  FsStatus CreateDir(const std::string& dir) override;
  FsStatus SyncDir(const std::string& dir) override;
  bool Exists(const std::string& path) override;
  static PosixFileSystem& Instance();
};

// In-memory files with a crash model. Files opened before a Crash() refuse
// every call afterwards (the process that held them is gone).
class SimFileSystem final : public FileSystem {
 public:
  explicit SimFileSystem(uint64_t seed = 1);
  ~SimFileSystem() override;

  FsResult<std::unique_ptr<File>> OpenAppend(const std::string& path) override;
  FsResult<std::unique_ptr<File>> OpenRead(const std::string& path) override;
  FsResult<std::unique_ptr<File>> OpenWrite(const std::string& path) override;
  FsStatus Rename(const std::string& from, const std::string& to) override;
  FsStatus Remove(const std::string& path) override;
  FsResult<std::vector<std::string>> ListDir(const std::string& dir) override;
  FsResult<uint64_t> FileSize(const std::string& path) override;
  FsStatus CreateDir(const std::string& dir) override;
  FsStatus SyncDir(const std::string& dir) override;
  bool Exists(const std::string& path) override;

  // Power loss: every file keeps only its synced bytes and every directory
  // only its synced entries. With `torn_tail`, a file whose unsynced bytes
  // extend its synced ones keeps a random (seeded) prefix of them. A file
  // changed by WriteAt since its last Sync keeps its synced bytes with a
  // random prefix of the changed range written over them (writes reach the
  // medium in order and may tear anywhere).
  void Crash(bool torn_tail = true);
  // After `ops` more mutating calls (append, sync, truncate, rename, remove,
  // create, sync dir) succeed, every call fails with kIo, as if the process
  // died; call Crash() next. A negative value disarms.
  void CrashAfter(int64_t ops) { ops_until_dead_ = ops; }
  bool dead() const { return ops_until_dead_ == 0; }
  // Flips bit `bit` (0..7) of the byte at `offset`, in the live and synced
  // copies alike (bit rot on the medium). Returns false if out of range.
  bool FlipBit(const std::string& path, uint64_t offset, int bit);
  // Appends fail with kNoSpace once the total bytes of all files would pass
  // `bytes`. Negative: unlimited.
  void SetCapacity(int64_t bytes) { capacity_ = bytes; }
  // Test inspection: the live contents of a file ("" if missing).
  std::string Contents(const std::string& path) const;
  uint64_t sync_count() const { return sync_count_; }
  std::mt19937_64& random() { return random_; }

  struct Inode {
    std::string data;
    std::string synced;
    bool overwritten = false;  // WriteAt since the last Sync
  };

 private:
  class SimFile;
  friend class SimFile;
  FsStatus CheckAlive(bool mutating);
  FsStatus CheckSpace(size_t extra) const;
  std::shared_ptr<Inode> Find(const std::string& path) const;

  // Directory entries: the live view and the view that survives a crash.
  std::map<std::string, std::shared_ptr<Inode>> names_;
  std::map<std::string, std::shared_ptr<Inode>> durable_names_;
  std::set<std::string> dirs_;
  std::mt19937_64 random_;
  int64_t ops_until_dead_ = -1;
  int64_t capacity_ = -1;
  uint64_t sync_count_ = 0;
  // Bumped by Crash(); files from an older generation are dead. Files must
  // not outlive their SimFileSystem.
  uint64_t generation_ = 0;
};

}  // namespace estuary::io
