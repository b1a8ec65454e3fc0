#pragma once
// Expected<T, E>: a value or an error, without exceptions (tl::expected, a
// header-only vocabulary type; std::expected once the compiler has it).
//
// The names live in estuary::base and are also declared in estuary itself:
// they are the error vocabulary of every module, on every floor, so a
// module writes `Expected<T, Errc>` as it writes `std::string`.
#include <tl/expected.hpp>

#include <utility>

namespace estuary::base {

template <typename T, typename E>
using Expected = tl::expected<T, E>;

template <typename E>
using Unexpected = tl::unexpected<E>;

template <typename E>
Unexpected<E> MakeError(E error) {
  return tl::unexpected<E>(std::move(error));
}

}  // namespace estuary::base

namespace estuary {
using base::Expected;
using base::MakeError;
using base::Unexpected;
}  // namespace estuary
