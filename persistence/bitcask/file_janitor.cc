#include "persistence/bitcask/file_janitor.h"

namespace estuary::persistence::bitcask {

FileJanitor::FileJanitor(bool threaded) : threaded_(threaded) {
  if (threaded_) thread_ = std::thread([this] { Run(); });
}

FileJanitor::~FileJanitor() {
  if (!threaded_) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void FileJanitor::Submit(Job job) {
  if (!threaded_) {
    if (failure_) return;
    failure_ = job();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

std::optional<std::string> FileJanitor::Drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return jobs_.empty() && !running_job_; });
  return failure_;
}

std::optional<std::string> FileJanitor::failure() {
  std::lock_guard lock(mutex_);
  return failure_;
}

size_t FileJanitor::pending() {
  std::lock_guard lock(mutex_);
  return jobs_.size() + (running_job_ ? 1 : 0);
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
    if (failed && !failure_) failure_ = std::move(failed);
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace estuary::persistence::bitcask
