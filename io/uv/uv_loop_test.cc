#include "io/uv/uv_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "io/uv/test_util.h"

namespace estuary::io {
namespace {

using testing::LoopThread;
using testing::RunUntil;

// Deadlines count from when each timer is added (the loop time is refreshed
// then), so the delays are spaced widely enough for slow runs (valgrind).
TEST(UvLoopTest, TimersFireInDelayOrderAndNotEarly) {
  UvLoop loop;
  std::vector<std::string> fired;
  int64_t start = loop.NowMs();
  int64_t c_fired_at = 0;
  loop.AddTimer(90, [&] {
    fired.push_back("c");
    c_fired_at = loop.NowMs();
  });
  loop.AddTimer(30, [&] { fired.push_back("a"); });
  loop.AddTimer(60, [&] { fired.push_back("b"); });
  ASSERT_TRUE(RunUntil(loop, [&] { return fired.size() == 3; }));
  EXPECT_EQ(fired, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_GE(c_fired_at - start, 89);  // libuv counts whole milliseconds
  EXPECT_EQ(loop.pending_timers(), 0u);
}

TEST(UvLoopTest, ZeroDelayTimersWithEqualDelaysFireInInsertionOrder) {
  UvLoop loop;
  std::vector<int> fired;
  for (int i = 0; i < 5; ++i) loop.AddTimer(0, [&fired, i] { fired.push_back(i); });
  ASSERT_TRUE(RunUntil(loop, [&] { return fired.size() == 5; }));
  EXPECT_EQ(fired, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(UvLoopTest, CancelledTimerNeverFiresAndCancelIsSafeForAnyId) {
  UvLoop loop;
  bool cancelled_fired = false;
  bool later_fired = false;
  TimerId cancelled = loop.AddTimer(5, [&] { cancelled_fired = true; });
  loop.CancelTimer(cancelled);
  loop.CancelTimer(cancelled);
  loop.CancelTimer(123'456);
  TimerId later = loop.AddTimer(20, [&] { later_fired = true; });
  ASSERT_TRUE(RunUntil(loop, [&] { return later_fired; }));
  loop.CancelTimer(later);  // already fired
  EXPECT_FALSE(cancelled_fired);
}

TEST(UvLoopTest, TimerCallbackMayCancelItselfAndAddTimers) {
  UvLoop loop;
  TimerId self = 0;
  int chained = 0;
  std::function<void()> chain = [&] {
    if (++chained < 3) loop.AddTimer(1, chain);
  };
  self = loop.AddTimer(1, [&] {
    loop.CancelTimer(self);
    loop.AddTimer(0, chain);
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return chained == 3; }));
  EXPECT_EQ(loop.pending_timers(), 0u);
}

TEST(UvLoopTest, CancelReleasesWhatTheTimerCaptured) {
  UvLoop loop;
  auto token = std::make_shared<int>(7);
  TimerId id = loop.AddTimer(60'000, [token] {});
  EXPECT_EQ(token.use_count(), 2);
  loop.CancelTimer(id);
  EXPECT_EQ(token.use_count(), 1);
}

TEST(UvLoopTest, PostedWorkRunsInOrderAfterTheCurrentCallback) {
  UvLoop loop;
  std::vector<std::string> log;
  loop.AddTimer(0, [&] {
    loop.Post([&] {
      log.push_back("p1");
      loop.Post([&] { log.push_back("p3"); });
    });
    loop.Post([&] { log.push_back("p2"); });
    log.push_back("timer");
  });
  ASSERT_TRUE(RunUntil(loop, [&] { return log.size() == 4; }));
  EXPECT_EQ(log, (std::vector<std::string>{"timer", "p1", "p2", "p3"}));
}

TEST(UvLoopTest, PostedWorkRunsPromptlyWithNothingElseToDo) {
  UvLoop loop;
  bool ran = false;
  bool gave_up = false;
  TimerId guard = loop.AddTimer(10'000, [&] {
    gave_up = true;
    loop.Stop();
  });
  loop.Post([&] {
    ran = true;
    loop.Stop();
  });
  loop.Run();
  loop.CancelTimer(guard);
  EXPECT_TRUE(ran);
  EXPECT_FALSE(gave_up);
  // And the idle handle stops again: an empty loop now blocks until a timer.
  bool second = false;
  loop.AddTimer(5, [&] {
    second = true;
    loop.Stop();
  });
  loop.Run();
  EXPECT_TRUE(second);
}

TEST(UvLoopTest, MailboxDeliversFromOtherThreadsInSendOrder) {
  UvLoop loop;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<int>> received(kThreads);
  int total = 0;
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop.mailbox().Send([&, t, i] {
          received[t].push_back(i);
          ++total;
        });
      }
    });
  }
  bool done = RunUntil(loop, [&] { return total == kThreads * kPerThread; });
  for (auto& sender : senders) sender.join();
  ASSERT_TRUE(done);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(received[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(received[t][i], i);
  }
}

TEST(UvLoopTest, StopFromAnotherThreadThroughTheMailbox) {
  LoopThread worker;
  std::atomic<bool> ran{false};
  worker.RunSync([&](UvLoop& loop) {
    loop.Post([&] { ran = true; });
  });
  // The post ran in the iteration that handled the mailbox or the next one;
  // a second round trip orders after it.
  worker.RunSync([](UvLoop&) {});
  worker.RunSync([](UvLoop&) {});
  EXPECT_TRUE(ran.load());
}  // ~LoopThread sends Stop through the mailbox and joins

TEST(UvLoopTest, DestructionRunsPostedWorkAndReleasesTimers) {
  auto token = std::make_shared<int>(1);
  bool posted_ran = false;
  {
    UvLoop loop;
    loop.AddTimer(60'000, [token] {});
    loop.AddTimer(0, [token] {});
    loop.Post([&posted_ran] { posted_ran = true; });
    EXPECT_EQ(token.use_count(), 3);
  }
  EXPECT_TRUE(posted_ran);
  EXPECT_EQ(token.use_count(), 1);
}

TEST(UvLoopTest, DestructionClosesForeignHandles) {
  auto foreign = std::make_unique<uv_timer_t>();
  {
    UvLoop loop;
    uv_timer_init(loop.raw(), foreign.get());
    uv_timer_start(foreign.get(), [](uv_timer_t*) {}, 60'000, 0);
  }  // must neither hang nor fail uv_loop_close
  SUCCEED();
}

TEST(UvLoopTest, StopBeforeRunReturnsAtOnce) {
  UvLoop loop;
  loop.Stop();
  loop.Run();
  SUCCEED();
}

}  // namespace
}  // namespace estuary::io
