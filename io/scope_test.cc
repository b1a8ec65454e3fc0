#include "io/scope.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/sim/sim_loop.h"

namespace estuary::io {
namespace {

// An owner as the cluster code writes one: callbacks capture `this`.
class Owner {
 public:
  explicit Owner(std::vector<std::string>& log) : log_(log) {}
  std::function<void()> Note(std::string what) {
    return scope_.Guard([this, what] { log_.push_back(what); });
  }
  std::function<void(int)> NoteValue() {
    return scope_.Guard([this](int value) { log_.push_back(std::to_string(value)); });
  }

 private:
  std::vector<std::string>& log_;
  Scope scope_;
};

class ScopeTest : public ::testing::Test {
 protected:
  ManualClock clock_{1000};
  SimLoop loop_{clock_};
  std::vector<std::string> log_;
  std::optional<Owner> owner_{std::in_place, log_};
};

TEST_F(ScopeTest, PostedCallbackRunsWhileTheOwnerLives) {
  loop_.Post(owner_->Note("posted"));
  loop_.RunUntilIdle();
  EXPECT_EQ(log_, (std::vector<std::string>{"posted"}));
}

TEST_F(ScopeTest, PostedCallbackDoesNothingOnceTheOwnerIsDestroyed) {
  loop_.Post(owner_->Note("posted"));
  owner_.reset();
  loop_.RunUntilIdle();
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(loop_.pending_posted(), 0u);
}

TEST_F(ScopeTest, TimerFiresWhileTheOwnerLives) {
  loop_.AddTimer(10, owner_->Note("timer"));
  loop_.AdvanceBy(10);
  EXPECT_EQ(log_, (std::vector<std::string>{"timer"}));
}

TEST_F(ScopeTest, TimerDueAfterTheOwnerIsDestroyedFiresIntoNothing) {
  loop_.AddTimer(10, owner_->Note("timer"));
  owner_.reset();
  // Not cancelled (the Scope keeps no Loop&): it fires and returns at once.
  EXPECT_EQ(loop_.pending_timers(), 1u);
  loop_.AdvanceBy(10);
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(loop_.pending_timers(), 0u);
}

TEST_F(ScopeTest, ArgumentsAreForwarded) {
  std::function<void(int)> answer = owner_->NoteValue();
  answer(7);
  EXPECT_EQ(log_, (std::vector<std::string>{"7"}));
  owner_.reset();
  answer(8);
  EXPECT_EQ(log_.size(), 1u);
}

TEST_F(ScopeTest, CopiesAndMovesShareTheOwnersLifetime) {
  std::function<void()> original = owner_->Note("x");
  std::function<void()> copy = original;
  std::function<void()> moved = std::move(original);
  copy();
  moved();
  EXPECT_EQ(log_, (std::vector<std::string>{"x", "x"}));
  owner_.reset();
  copy();
  moved();
  EXPECT_EQ(log_.size(), 2u);
}

TEST_F(ScopeTest, MoveOnlyAndMutableCallablesAreGuarded) {
  Scope scope;
  auto state = std::make_unique<int>(0);
  auto guarded = scope.Guard([state = std::move(state), this]() mutable { log_.push_back(std::to_string(++*state)); });
  guarded();
  guarded();
  auto moved = std::move(guarded);
  moved();
  EXPECT_EQ(log_, (std::vector<std::string>{"1", "2", "3"}));
}

TEST_F(ScopeTest, EachScopeGuardsOnlyItsOwnCallbacks) {
  std::vector<std::string> other_log;
  Owner other(other_log);
  loop_.Post(owner_->Note("gone"));
  loop_.Post(other.Note("kept"));
  owner_.reset();
  loop_.RunUntilIdle();
  EXPECT_TRUE(log_.empty());
  EXPECT_EQ(other_log, (std::vector<std::string>{"kept"}));
}

TEST_F(ScopeTest, OwnerDestroyedByEarlierWorkStopsLaterCallbacks) {
  // The check is made at each call: work that destroys the owner mid-loop
  // stops the guarded callbacks queued behind it.
  std::function<void()> self_destroy = owner_->Note("first");
  loop_.Post([&] {
    self_destroy();
    owner_.reset();
  });
  loop_.Post(owner_->Note("second"));
  loop_.RunUntilIdle();
  EXPECT_EQ(log_, (std::vector<std::string>{"first"}));
}

}  // namespace
}  // namespace estuary::io
