#pragma once
// UvLoop: a Loop on a libuv loop, one per shard thread.
//
// Owns its uv_loop_t and every handle it creates (timers, the mailbox async,
// the post/check handles). Post()ed functions run in a uv_check phase of
// the current iteration, so a shell can batch writes and flush once per
// iteration. Stop() may be called from the loop's own thread; from other
// threads use mailbox().Send([&]{ loop.Stop(); }).
#include <uv.h>

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "io/loop.h"

namespace estuary::io {

class UvLoop;

// Mailbox: the one cross-thread door into a loop. Send() is thread-safe;
// the functions run on the loop's thread, in the order sent, batched per
// wake-up (one uv_async_send per batch).
class Mailbox {
 public:
  void Send(std::function<void()> fn);

 private:
  friend class UvLoop;
  explicit Mailbox(uv_loop_t* loop);
  void Drain();
  uv_async_t async_;
  std::mutex mutex_;
  std::vector<std::function<void()>> pending_;
  bool closing_ = false;
};

class UvLoop final : public Loop {
 public:
  explicit UvLoop(const Clock& clock = SystemClock::Instance());
  ~UvLoop() override;  // closes remaining handles and runs the loop dry
  UvLoop(const UvLoop&) = delete;
  UvLoop& operator=(const UvLoop&) = delete;

  const Clock& clock() const override { return clock_; }
  TimerId AddTimer(int64_t delay_ms, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;
  void Post(std::function<void()> fn) override;

  // Runs until Stop(). Call on the owning thread.
  void Run();
  void Stop();
  Mailbox& mailbox() { return *mailbox_; }
  uv_loop_t* raw() { return &loop_; }

 private:
  struct Timer;
  static void OnCheck(uv_check_t* handle);
  void RunPosted();

  const Clock& clock_;
  uv_loop_t loop_;
  std::unique_ptr<Mailbox> mailbox_;
  uv_check_t check_;
  uv_idle_t idle_;  // keeps the loop from blocking while work is posted
  std::vector<std::function<void()>> posted_;
  std::unordered_map<TimerId, Timer*> timers_;
  TimerId next_timer_ = 1;
  bool stopping_ = false;
};

}  // namespace estuary::io
