#include "tools/bench/inflight_window.h"

#include <gtest/gtest.h>

#include <set>

namespace estuary::bench {
namespace {

TEST(InflightWindow, HandsOutDistinctIdsUpToCapacity) {
  InflightWindow window(3);
  std::set<uint16_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto id = window.Acquire(i);
    ASSERT_TRUE(id);
    EXPECT_NE(*id, 0);
    ids.insert(*id);
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_TRUE(window.full());
  EXPECT_FALSE(window.Acquire(9));
}

TEST(InflightWindow, ReleaseReturnsSendTimeOnce) {
  InflightWindow window(2);
  auto id = window.Acquire(1234);
  ASSERT_TRUE(id);
  EXPECT_EQ(window.Release(*id), 1234);
  EXPECT_FALSE(window.Release(*id));
  EXPECT_FALSE(window.Release(0));
  EXPECT_EQ(window.in_use(), 0u);
}

TEST(InflightWindow, QosTwoStages) {
  InflightWindow window(1);
  auto id = window.Acquire(0);
  ASSERT_TRUE(id);
  EXPECT_EQ(window.stage(*id), InflightWindow::Stage::kAwaitingAck);
  window.MarkAwaitingComplete(*id);
  EXPECT_EQ(window.stage(*id), InflightWindow::Stage::kAwaitingComplete);
  window.Release(*id);
  EXPECT_EQ(window.stage(*id), InflightWindow::Stage::kFree);
}

TEST(InflightWindow, WrapsAroundAndSkipsIdsInUse) {
  InflightWindow window(65535);
  auto held = window.Acquire(0);  // id 1 stays in flight
  ASSERT_EQ(held, 1);
  for (int i = 0; i < 200000; ++i) {
    auto id = window.Acquire(i);
    ASSERT_TRUE(id);
    ASSERT_NE(*id, 1);
    window.Release(*id);
  }
}

TEST(InflightWindow, CapacityClampedAndLowered) {
  InflightWindow window(0);
  EXPECT_EQ(window.capacity(), 1u);
  window.set_capacity(100000);
  EXPECT_EQ(window.capacity(), 65535u);
  window.Acquire(0);
  window.Acquire(0);
  window.set_capacity(1);
  EXPECT_TRUE(window.full());
}

}  // namespace
}  // namespace estuary::bench
