#include "io/uv/uv_loop.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace estuary::io {

// ---- Mailbox --------------------------------------------------------------

Mailbox::Mailbox(uv_loop_t* loop) {
  int rc = uv_async_init(loop, &async_, [](uv_async_t* async) {
    static_cast<Mailbox*>(async->data)->Drain();
  });
  ESTUARY_CHECK(rc == 0);
  async_.data = this;
}

void Mailbox::Send(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closing_) return;  // `fn` is destroyed by the caller, outside the lock
  bool wake = pending_.empty();
  pending_.push_back(std::move(fn));
  // Under the lock, so Close() cannot close the handle in between.
  if (wake) uv_async_send(&async_);
}

void Mailbox::Drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.swap(pending_);
  }
  for (auto& fn : running_) {
    if (fn) fn();
  }
  running_.clear();
}

void Mailbox::Close() {
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    dropped.swap(pending_);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

// ---- UvLoop ---------------------------------------------------------------

struct UvLoop::Timer {
  uv_timer_t handle;
  UvLoop* loop = nullptr;
  TimerId id = 0;
  std::function<void()> fn;

  // The memory goes in the close callback; the function goes now, so what
  // it captured is released when the timer is cancelled or fires.
  static void Close(Timer* timer) {
    std::function<void()> released = std::move(timer->fn);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer->handle),
             [](uv_handle_t* closed) { delete static_cast<Timer*>(closed->data); });
  }
};

namespace {
constexpr int kMaxShutdownRounds = 100;
}  // namespace

UvLoop::UvLoop(const Clock& clock) : clock_(clock), read_buffer_(new char[kReadBufferSize]) {
  ESTUARY_CHECK(uv_loop_init(&loop_) == 0);
  loop_.data = this;
  mailbox_.reset(new Mailbox(&loop_));
  ESTUARY_CHECK(uv_check_init(&loop_, &check_) == 0);
  check_.data = this;
  ESTUARY_CHECK(uv_check_start(&check_, OnCheck) == 0);
  ESTUARY_CHECK(uv_idle_init(&loop_, &idle_) == 0);
  idle_.data = this;
}

UvLoop::~UvLoop() {
  RunPosted();  // deferred deletes and last flushes still get to run
  shutting_down_ = true;
  mailbox_->Close();
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), nullptr);
  // Close callbacks may post work or release objects that add timers, so
  // repeat until nothing is left; a stale uv_stop() also costs one round.
  for (int round = 0; round < kMaxShutdownRounds; ++round) {
    RunPosted();
    CloseEverything();
    uv_run(&loop_, UV_RUN_DEFAULT);
    if (posted_.empty() && timers_.empty() && uv_loop_close(&loop_) == 0) return;
  }
  ESTUARY_CHECK(!"UvLoop: handles still open after shutdown");
}

void UvLoop::CloseEverything() {
  std::unordered_map<TimerId, Timer*> timers;
  timers.swap(timers_);
  for (auto& [id, timer] : timers) Timer::Close(timer);
  std::vector<HandleOwner*> owners(owners_.begin(), owners_.end());
  for (HandleOwner* owner : owners) {
    if (owners_.count(owner) != 0) owner->CloseForShutdown();
  }
  // Anything else created on raw(): closed without a callback, so the loop
  // can close; its memory is its creator's business.
  uv_walk(
      &loop_,
      [](uv_handle_t* handle, void*) {
        if (!uv_is_closing(handle)) uv_close(handle, nullptr);
      },
      nullptr);
}

TimerId UvLoop::AddTimer(int64_t delay_ms, std::function<void()> fn) {
  auto* timer = new Timer;
  timer->loop = this;
  timer->id = next_timer_++;
  timer->fn = std::move(fn);
  ESTUARY_CHECK(uv_timer_init(&loop_, &timer->handle) == 0);
  timer->handle.data = timer;
  // libuv caches the loop time per iteration; refresh it so a timer added
  // late in a long iteration does not fire early.
  uv_update_time(&loop_);
  uint64_t delay = static_cast<uint64_t>(std::max<int64_t>(delay_ms, 0));
  ESTUARY_CHECK(uv_timer_start(&timer->handle, OnTimer, delay, 0) == 0);
  timers_.emplace(timer->id, timer);
  return timer->id;
}

void UvLoop::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  Timer* timer = it->second;
  timers_.erase(it);
  Timer::Close(timer);
}

void UvLoop::OnTimer(uv_timer_t* handle) {
  auto* timer = static_cast<Timer*>(handle->data);
  timer->loop->timers_.erase(timer->id);
  // Moved out first: the function may cancel its own id or add timers.
  std::function<void()> fn = std::move(timer->fn);
  Timer::Close(timer);
  if (fn) fn();
}

void UvLoop::Post(std::function<void()> fn) {
  if (posted_.empty() && !shutting_down_) {
    uv_idle_start(&idle_, [](uv_idle_t*) {});
  }
  posted_.push_back(std::move(fn));
}

void UvLoop::OnCheck(uv_check_t* handle) { static_cast<UvLoop*>(handle->data)->RunPosted(); }

void UvLoop::RunPosted() {
  // One batch: work posted by this batch waits for the next iteration, so
  // a function that keeps re-posting itself cannot starve I/O.
  running_.swap(posted_);
  for (auto& fn : running_) {
    if (fn) fn();
  }
  running_.clear();
  if (posted_.empty() && !shutting_down_) uv_idle_stop(&idle_);
}

void UvLoop::Run() {
  running_loop_ = true;
  while (!stopping_) uv_run(&loop_, UV_RUN_DEFAULT);
  running_loop_ = false;
  stopping_ = false;
}

void UvLoop::Stop() {
  stopping_ = true;
  if (running_loop_) uv_stop(&loop_);
}

}  // namespace estuary::io
