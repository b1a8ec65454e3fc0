#pragma once
// ESTUARY_IO_CHECK: an always-on assertion for states that cannot happen
// (a libuv call failing where its documented errors cannot apply). Prints
// the condition and aborts; never used for what traffic can cause.
#include <cstdio>
#include <cstdlib>

#define ESTUARY_IO_CHECK(condition)                                                       \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)
