#include "persistence/bitcask/file_janitor.h"

namespace estuary::persistence::bitcask {

FileJanitor::FileJanitor(Mode mode) : mode_(mode) {
  if (mode_ == Mode::kThread) thread_ = std::thread([this] { Run(); });
}

FileJanitor::~FileJanitor() {
  // kDeferred: what Drain() never ran dies with the janitor, as with a
  // killed process.
  if (mode_ != Mode::kThread) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void FileJanitor::Submit(Job job) {
  if (mode_ == Mode::kInline) {
    if (failure_) return;
    failure_ = job();
    if (failure_) failed_.store(true, std::memory_order_release);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

std::optional<std::string> FileJanitor::Drain() {
  if (mode_ == Mode::kDeferred) RunDeferred();
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return jobs_.empty() && !running_job_; });
  return failure_;
}

std::optional<std::string> FileJanitor::failure() {
  if (!failed_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(mutex_);
  return failure_;
}

size_t FileJanitor::pending() {
  std::lock_guard lock(mutex_);
  return jobs_.size() + (running_job_ ? 1 : 0);
}

// kDeferred: the queued jobs, in order, on the caller's thread.
void FileJanitor::RunDeferred() {
  std::deque<Job> jobs;
  {
    std::lock_guard lock(mutex_);
    jobs.swap(jobs_);
  }
  for (Job& job : jobs) {
    if (failure_) break;  // after a failure nothing else runs
    failure_ = job();
    if (failure_) failed_.store(true, std::memory_order_release);
  }
}

// The thread: runs queued jobs until stopped with nothing queued (the
// destructor's wait lets what was submitted finish).
void FileJanitor::Run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    if (failure_) {
      if (jobs_.empty()) idle_.notify_all();
      continue;  // after a failure nothing else runs
    }
    running_job_ = true;
    lock.unlock();
    std::optional<std::string> failed = job();
    lock.lock();
    running_job_ = false;
    if (failed && !failure_) {
      failure_ = std::move(failed);
      failed_.store(true, std::memory_order_release);
    }
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace estuary::persistence::bitcask
