#pragma once
// UvLoop: a Loop on a libuv loop, one per shard thread.
//
// Owns its uv_loop_t and every handle it creates (timers, the mailbox async,
// the post/check handles). Post()ed functions run in a uv_check phase of
// the current iteration, so a shell can batch writes and flush once per
// iteration; work posted by posted work runs in the next iteration. Stop()
// may be called from the loop's own thread; from other threads use
// mailbox().Send([&]{ loop.Stop(); }).
//
// Destruction (on the owning thread, not from inside one of its callbacks):
// runs work still posted, closes every timer and every registered
// HandleOwner (connections and listeners, which then call none of their
// handlers), closes any other handle left on raw(), and runs the loop until
// all close callbacks ran. Mailbox functions not yet run are dropped.
#include <uv.h>

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "io/loop.h"

namespace estuary::io {

class UvLoop;

// Mailbox: the one cross-thread door into a loop. Send() is thread-safe;
// the functions run on the loop's thread, in the order sent, batched per
// wake-up (one uv_async_send per batch). The sender must know the loop is
// still alive; functions sent while it is being destroyed are dropped.
class Mailbox {
 public:
  void Send(std::function<void()> fn);

 private:
  friend class UvLoop;
  explicit Mailbox(uv_loop_t* loop);
  void Drain();
  void Close();  // on the loop thread, from ~UvLoop
  uv_async_t async_;
  std::mutex mutex_;
  std::vector<std::function<void()>> pending_;
  std::vector<std::function<void()>> running_;  // loop thread only
  bool closing_ = false;
};

class UvLoop final : public Loop {
 public:
  explicit UvLoop(const Clock& clock = SystemClock::Instance());
  ~UvLoop() override;  // closes remaining handles and runs the loop dry
  UvLoop(const UvLoop&) = delete;
  UvLoop& operator=(const UvLoop&) = delete;

  const Clock& clock() const override { return clock_; }
  // Timers run on libuv's monotonic clock, refreshed when one is added.
  TimerId AddTimer(int64_t delay_ms, std::function<void()> fn) override;
  void CancelTimer(TimerId id) override;
  void Post(std::function<void()> fn) override;

  // Runs until Stop(). Call on the owning thread. A Stop() made while the
  // loop was not running makes the next Run() return at once.
  void Run();
  void Stop();
  Mailbox& mailbox() { return *mailbox_; }
  uv_loop_t* raw() { return &loop_; }

  // For io/uv types that own libuv handles (TcpConnection, TcpListener):
  // a registered owner is told to close its handles when the loop is
  // destroyed, and unregisters itself from its close callback.
  class HandleOwner {
   public:
    virtual void CloseForShutdown() = 0;

   protected:
    ~HandleOwner() = default;
  };
  void RegisterOwner(HandleOwner* owner) { owners_.insert(owner); }
  void UnregisterOwner(HandleOwner* owner) { owners_.erase(owner); }
  // One read buffer for every stream on this loop: libuv's alloc and read
  // callbacks come in pairs and never nest, and readers get a view that is
  // valid only during their callback.
  uv_buf_t read_buffer() { return uv_buf_init(read_buffer_.get(), kReadBufferSize); }
  size_t pending_timers() const { return timers_.size(); }

 private:
  struct Timer;
  static constexpr unsigned kReadBufferSize = 64 * 1024;
  static void OnCheck(uv_check_t* handle);
  static void OnTimer(uv_timer_t* handle);
  void RunPosted();
  void CloseEverything();

  const Clock& clock_;
  uv_loop_t loop_;
  std::unique_ptr<Mailbox> mailbox_;
  uv_check_t check_;
  uv_idle_t idle_;  // keeps the loop from blocking while work is posted
  std::vector<std::function<void()>> posted_;
  std::vector<std::function<void()>> running_;  // the batch RunPosted runs
  std::unordered_map<TimerId, Timer*> timers_;
  std::unordered_set<HandleOwner*> owners_;
  std::unique_ptr<char[]> read_buffer_;
  TimerId next_timer_ = 1;
  bool stopping_ = false;
  bool running_loop_ = false;  // inside Run()
  bool shutting_down_ = false;
};

}  // namespace estuary::io
