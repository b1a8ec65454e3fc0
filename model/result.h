#pragma once
// Result<T>: a value or an error, without exceptions (tl::expected, a
// header-only vocabulary type; std::expected once the compiler has it).
#include <tl/expected.hpp>

namespace estuary {

template <typename T, typename E>
using Expected = tl::expected<T, E>;

template <typename E>
using Unexpected = tl::unexpected<E>;

template <typename E>
Unexpected<E> MakeError(E error) {
  return tl::unexpected<E>(std::move(error));
}

}  // namespace estuary
