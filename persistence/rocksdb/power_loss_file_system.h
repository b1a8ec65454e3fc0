#pragma once
// PowerLossFileSystem (tests only): a rocksdb::FileSystemWrapper that
// remembers, per file it saw written, how many bytes were made durable
// (Sync/Fsync of the file) and whether its directory entry was made durable
// (an Fsync of its directory after it was created or renamed), and on a
// simulated power loss puts the real directory back in the state a machine
// that lost power would find:
//
// - every tracked file is truncated to its synced length, plus, when
//   `random` is given, a random part of its unsynced tail (pages the kernel
//   happened to write back: torn records);
// - a file created and never dir-synced is removed;
// - a rename not followed by an Fsync of its directory is undone: the
//   target gets its previous content back (kept at rename time, files up to
//   1 MiB such as CURRENT) or is removed if it did not exist. The source
//   name is not brought back (a leftover temporary is no worse).
//
// Simplifications, stated: deletes are durable at once (a deleted file
// never comes back); RangeSync is not a sync; files opened through
// NewRandomRWFile are not tracked; directories created are durable at once.
//
// PowerLoss() freezes the disk: later appends and syncs do nothing, and
// creates, renames and deletes fail, so the DB can then be destroyed
// without its shutdown writing anything; Restore(random) applies the loss
// and unfreezes. Thread-safe (RocksDB calls from its background threads).
#include <rocksdb/file_system.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace estuary::persistence {

class PowerLossFileSystem final : public ::rocksdb::FileSystemWrapper {
 public:
  explicit PowerLossFileSystem(std::shared_ptr<::rocksdb::FileSystem> target = ::rocksdb::FileSystem::Default())
      : FileSystemWrapper(std::move(target)) {}
  static const char* kClassName() { return "EstuaryPowerLossFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // The power goes now (see above).
  void PowerLoss();
  // The next file Sync is where the power goes: its bytes are not synced.
  void PowerLossAtNextSync();
  // Applies the loss to the real files and unfreezes. `random`: keep a
  // random prefix of each unsynced tail; null: drop every unsynced byte.
  void Restore(std::mt19937_64* random);
  bool frozen() const;
  // Counters (tests).
  uint64_t syncs() const;
  uint64_t dir_syncs() const;
  uint64_t files_dropped() const { return files_dropped_; }
  uint64_t bytes_dropped() const { return bytes_dropped_; }
  uint64_t renames_undone() const { return renames_undone_; }

  ::rocksdb::IOStatus NewWritableFile(const std::string& name, const ::rocksdb::FileOptions& options,
                                      std::unique_ptr<::rocksdb::FSWritableFile>* result,
                                      ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus ReopenWritableFile(const std::string& name, const ::rocksdb::FileOptions& options,
                                         std::unique_ptr<::rocksdb::FSWritableFile>* result,
                                         ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                        const ::rocksdb::FileOptions& options,
                                        std::unique_ptr<::rocksdb::FSWritableFile>* result,
                                        ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus NewDirectory(const std::string& name, const ::rocksdb::IOOptions& options,
                                   std::unique_ptr<::rocksdb::FSDirectory>* result,
                                   ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus DeleteFile(const std::string& name, const ::rocksdb::IOOptions& options,
                                 ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                                 const ::rocksdb::IOOptions& options, ::rocksdb::IODebugContext* debug) override;
  ::rocksdb::IOStatus Truncate(const std::string& name, size_t size, const ::rocksdb::IOOptions& options,
                               ::rocksdb::IODebugContext* debug) override;

  // Called by the wrapped files.
  bool OnAppend(const std::string& name, uint64_t offset, uint64_t bytes);  // false: frozen, drop it
  bool OnSync(const std::string& name);                                     // false: do not sync
  void OnTruncate(const std::string& name, uint64_t size);
  void OnDirectorySync(const std::string& dir);

 private:
  struct FileState {
    uint64_t size = 0;
    uint64_t synced = 0;
    bool entry_durable = false;
  };
  struct PendingRename {
    std::string target;
    std::optional<std::string> previous;  // the target's old content; nullopt = did not exist
  };
  static std::string DirOf(const std::string& name);
  ::rocksdb::IOStatus Frozen() const;
  void Track(const std::string& name, uint64_t size, bool entry_durable);

  mutable std::mutex mutex_;
  std::map<std::string, FileState> files_;
  std::map<std::string, std::vector<PendingRename>> renames_;  // by directory
  bool frozen_ = false;
  bool lose_at_next_sync_ = false;
  uint64_t syncs_ = 0;
  uint64_t dir_syncs_ = 0;
  uint64_t files_dropped_ = 0;
  uint64_t bytes_dropped_ = 0;
  uint64_t renames_undone_ = 0;
};

}  // namespace estuary::persistence
