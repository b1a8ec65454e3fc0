#include "io/clock.h"

#include <time.h>

namespace estuary::io {
namespace {

int64_t ReadMs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

int64_t SystemClock::NowMs() const { return ReadMs(CLOCK_MONOTONIC); }

int64_t SystemClock::WallMs() const { return ReadMs(CLOCK_REALTIME); }

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace estuary::io
