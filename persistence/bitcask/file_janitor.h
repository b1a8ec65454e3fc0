#pragma once
// FileJanitor: the Bitcask engine's file work that no reader or writer waits
// for — unlinking dropped files, a committed merge's renames and removals,
// write-behind syncs, preparing the next data file and finishing a rotated
// one — run in order, either on a thread of its own or at once on the
// caller's thread (docs/bitcask_format.md, "Maintenance").
//
// Jobs run strictly in submission order; each makes its own changes durable
// (a directory sync) before the next starts, so a later job may rely on an
// earlier one. After a job fails no further job runs (a later removal could
// otherwise outrun a failed one); the failure is reported by TakeFailure()
// and Drain().
//
// Threading: Submit, Drain and TakeFailure belong to the engine's owner
// thread. With kThread, jobs run on the janitor's thread and must touch
// nothing but what they capture by value and a FileSystem that allows calls
// from another thread (PosixFileSystem; not SimFileSystem). kDeferred (tests)
// queues jobs and runs them on the owner's thread in Drain() only, so a test
// can crash a SimFileSystem with jobs still pending.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace estuary::persistence::bitcask {

class FileJanitor {
 public:
  // A job returns an error message, or nullopt on success.
  using Job = std::function<std::optional<std::string>()>;

  enum class Mode { kInline, kThread, kDeferred };
  explicit FileJanitor(Mode mode);
  explicit FileJanitor(bool threaded) : FileJanitor(threaded ? Mode::kThread : Mode::kInline) {}
  ~FileJanitor();  // kThread: waits for what is queued; kDeferred: drops it
  FileJanitor(const FileJanitor&) = delete;
  FileJanitor& operator=(const FileJanitor&) = delete;

  bool threaded() const { return mode_ == Mode::kThread; }
  // Jobs may still be pending after Submit returns (kThread, kDeferred).
  bool asynchronous() const { return mode_ != Mode::kInline; }
  // Queues `job` (kThread, kDeferred), or runs it now.
  void Submit(Job job);
  // Returns once every submitted job has run; the first failure, if any.
  std::optional<std::string> Drain();
  // The first failure so far, without waiting (it stays reported).
  std::optional<std::string> failure();
  // Jobs queued or running.
  size_t pending();

 private:
  void Run();
  void RunDeferred();

  const Mode mode_;
  std::mutex mutex_;
  std::condition_variable wake_;  // jobs queued or stopping
  std::condition_variable idle_;  // the queue ran empty
  std::deque<Job> jobs_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::optional<std::string> failure_;
  // failure_ is set: lets failure() answer without the lock (every Tick asks).
  std::atomic<bool> failed_{false};
  std::thread thread_;  // last: started after the members it uses
};

}  // namespace estuary::persistence::bitcask
