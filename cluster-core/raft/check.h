#pragma once
// An always-on check: raft crashes loudly on a broken invariant instead of
// limping on with state that could acknowledge a lost write.
#include <cstdio>
#include <cstdlib>

#define ESTUARY_RAFT_CHECK(condition)                                              \
  do {                                                                             \
    if (!(condition)) {                                                            \
      std::fprintf(stderr, "%s:%d: raft check failed: %s\n", __FILE__, __LINE__, \
                   #condition);                                                    \
      std::abort();                                                                \
    }                                                                              \
  } while (false)
