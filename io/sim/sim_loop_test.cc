#include "io/sim/sim_loop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace estuary::io {
namespace {

class SimLoopTest : public ::testing::Test {
 protected:
  ManualClock clock_{1000};
  SimLoop loop_{clock_};
  std::vector<std::string> log_;

  std::function<void()> Record(std::string what) {
    return [this, what] { log_.push_back(what + "@" + std::to_string(clock_.NowMs())); };
  }
};

TEST_F(SimLoopTest, FiresTimersInDeadlineOrderAtTheirDeadlines) {
  loop_.AddTimer(30, Record("c"));
  loop_.AddTimer(10, Record("a"));
  loop_.AddTimer(20, Record("b"));
  loop_.AdvanceBy(25);
  EXPECT_EQ(log_, (std::vector<std::string>{"a@1010", "b@1020"}));
  EXPECT_EQ(clock_.NowMs(), 1025);
  loop_.AdvanceBy(100);
  EXPECT_EQ(log_.back(), "c@1030");
  EXPECT_EQ(clock_.NowMs(), 1125);
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

TEST_F(SimLoopTest, BreaksTiesByInsertionOrder) {
  for (const char* name : {"first", "second", "third"}) loop_.AddTimer(5, Record(name));
  loop_.AdvanceBy(5);
  EXPECT_EQ(log_, (std::vector<std::string>{"first@1005", "second@1005", "third@1005"}));
}

TEST_F(SimLoopTest, CancelledTimersNeverFire) {
  TimerId gone = loop_.AddTimer(10, Record("gone"));
  loop_.AddTimer(10, Record("kept"));
  loop_.CancelTimer(gone);
  loop_.CancelTimer(gone);    // twice: no-op
  loop_.CancelTimer(999'999);  // unknown: no-op
  loop_.AdvanceBy(10);
  EXPECT_EQ(log_, (std::vector<std::string>{"kept@1010"}));
}

TEST_F(SimLoopTest, CancellingAFiredTimerIsANoOp) {
  TimerId id = loop_.AddTimer(1, Record("fired"));
  loop_.AdvanceBy(1);
  loop_.CancelTimer(id);
  EXPECT_EQ(log_.size(), 1u);
}

TEST_F(SimLoopTest, TimerMayCancelALaterTimerDueAtTheSameTime) {
  TimerId second = 0;
  loop_.AddTimer(10, [&] { loop_.CancelTimer(second); });
  second = loop_.AddTimer(10, Record("second"));
  loop_.AdvanceBy(10);
  EXPECT_TRUE(log_.empty());
}

TEST_F(SimLoopTest, TimersAddedWhileAdvancingFireIfDueOnTheWay) {
  loop_.AddTimer(10, [&] {
    log_.push_back("outer@" + std::to_string(clock_.NowMs()));
    loop_.AddTimer(5, Record("inner"));
    loop_.AddTimer(50, Record("late"));
  });
  loop_.AdvanceBy(20);
  EXPECT_EQ(log_, (std::vector<std::string>{"outer@1010", "inner@1015"}));
  EXPECT_EQ(loop_.pending_timers(), 1u);
}

TEST_F(SimLoopTest, PostedWorkRunsFifoAndBeforeTheNextTimer) {
  loop_.AddTimer(10, [&] {
    log_.push_back("timer1");
    loop_.Post([&] { log_.push_back("posted-by-timer1"); });
  });
  loop_.AddTimer(10, [&] { log_.push_back("timer2"); });
  loop_.Post([&] {
    log_.push_back("p1");
    loop_.Post([&] { log_.push_back("p3"); });
  });
  loop_.Post([&] { log_.push_back("p2"); });
  loop_.AdvanceBy(10);
  EXPECT_EQ(log_, (std::vector<std::string>{"p1", "p2", "p3", "timer1", "posted-by-timer1", "timer2"}));
}

TEST_F(SimLoopTest, RunUntilIdleFiresOnlyTimersAlreadyDue) {
  loop_.AddTimer(0, Record("now"));
  loop_.AddTimer(1, Record("later"));
  loop_.RunUntilIdle();
  EXPECT_EQ(log_, (std::vector<std::string>{"now@1000"}));
  clock_.Advance(5);  // moved by hand: the overdue timer fires at the current time
  loop_.RunUntilIdle();
  EXPECT_EQ(log_.back(), "later@1005");
}

TEST_F(SimLoopTest, NegativeDelayMeansNow) {
  loop_.AddTimer(-5, Record("now"));
  loop_.RunUntilIdle();
  EXPECT_EQ(log_, (std::vector<std::string>{"now@1000"}));
}

TEST_F(SimLoopTest, AdvanceToTheSameScheduleGivesTheSameOrder) {
  auto run = [](std::vector<int>& out) {
    ManualClock clock;
    SimLoop loop(clock);
    for (int i = 0; i < 50; ++i) loop.AddTimer((i * 7) % 13, [&out, i] { out.push_back(i); });
    loop.AdvanceTo(clock.NowMs() + 100);
  };
  std::vector<int> first, second;
  run(first);
  run(second);
  EXPECT_EQ(first.size(), 50u);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace estuary::io
