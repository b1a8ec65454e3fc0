#pragma once
// ESTUARY_CHECK(condition): an always-on check (release builds too) for
// states that cannot happen: a broken invariant, a caller breaking a
// documented contract, a system call failing where its documented errors
// cannot apply. Prints the file, line and condition to stderr and aborts,
// so the process crashes loudly instead of limping on with bad state.
// Never for what traffic or the environment can cause: return an error.
#include <cstdio>
#include <cstdlib>

#define ESTUARY_CHECK(condition)                                                          \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)
