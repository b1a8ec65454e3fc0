#pragma once
// Building blocks of FilterTrie<V> (filter_trie.h): not a public API.
#include <array>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace estuary {
namespace filter_trie_internal {

// Hashes std::string keys and std::string_view probes alike, so Match looks
// levels up without building a std::string per level.
struct LevelHash {
  using is_transparent = void;
  size_t operator()(std::string_view level) const noexcept {
    return std::hash<std::string_view>{}(level);
  }
};

// The literal children of a node. Most nodes have a handful (a device's
// streams), which live in a vector scanned in place: one cache miss instead
// of a bucket array plus a hash node. Past kSmall they move to a hash map.
template <typename Node>
class ChildTable {
 public:
  static constexpr size_t kSmall = 8;

  bool empty() const { return large_ ? large_->empty() : small_.empty(); }

  Node* Find(std::string_view level) const {
    if (large_) {
      auto found = large_->find(level);
      return found == large_->end() ? nullptr : found->second.get();
    }
    for (const Entry& entry : small_) {
      if (entry.first == level) return entry.second.get();
    }
    return nullptr;
  }

  // Returns the child and whether it was created.
  std::pair<Node*, bool> FindOrCreate(std::string_view level) {
    if (Node* child = Find(level)) return {child, false};
    auto node = std::make_unique<Node>();
    Node* child = node.get();
    if (large_) {
      large_->emplace(std::string(level), std::move(node));
    } else {
      small_.emplace_back(std::string(level), std::move(node));
      if (small_.size() > kSmall) Grow();
    }
    return {child, true};
  }

  void Erase(std::string_view level) {
    if (large_) {
      auto found = large_->find(level);
      if (found != large_->end()) large_->erase(found);
      if (large_->size() < kSmall / 2) Shrink();
      return;
    }
    for (Entry& entry : small_) {
      if (entry.first == level) {
        if (&entry != &small_.back()) entry = std::move(small_.back());
        small_.pop_back();
        return;
      }
    }
  }

  // Moves every child out into `out` and leaves the table empty.
  void TakeAll(std::vector<std::unique_ptr<Node>>& out) {
    for (Entry& entry : small_) out.push_back(std::move(entry.second));
    if (large_) {
      for (auto& entry : *large_) out.push_back(std::move(entry.second));
    }
    small_.clear();
    large_.reset();
  }

 private:
  using Entry = std::pair<std::string, std::unique_ptr<Node>>;
  using Map = std::unordered_map<std::string, std::unique_ptr<Node>, LevelHash, std::equal_to<>>;

  void Grow() {
    large_ = std::make_unique<Map>();
    for (Entry& entry : small_) large_->emplace(std::move(entry.first), std::move(entry.second));
    small_.clear();
    small_.shrink_to_fit();
  }

  // Back to the vector well below kSmall, so churn at the boundary does not
  // rebuild the map each time.
  void Shrink() {
    small_.reserve(large_->size());
    for (auto& entry : *large_) small_.emplace_back(entry.first, std::move(entry.second));
    large_.reset();
  }

  std::vector<Entry> small_;
  std::unique_ptr<Map> large_;
};

// A LIFO stack that keeps its first N items inline, so the common case
// never touches the heap.
template <typename T, size_t N>
class SmallStack {
 public:
  bool empty() const { return size_ == 0; }
  void Push(const T& item) {
    if (size_ < N) {
      inline_[size_] = item;
    } else {
      spill_.push_back(item);
    }
    ++size_;
  }
  T Pop() {
    --size_;
    if (size_ < N) return inline_[size_];
    T item = spill_.back();
    spill_.pop_back();
    return item;
  }

 private:
  std::array<T, N> inline_;
  std::vector<T> spill_;
  size_t size_ = 0;
};

template <typename T>
concept StdHashable = requires(const T& value) {
  { std::hash<T>{}(value) } -> std::convertible_to<size_t>;
};

// The values stored under one filter: a vector, plus a hash index from
// value to position once there are many and V is hashable (a broadcast
// filter can have one value per connected client).
template <typename V>
class ValueSet {
 public:
  static constexpr size_t kIndexFrom = 16;  // build the index at this size
  static constexpr size_t kIndexUntil = 8;  // drop it below this size

  bool empty() const { return values_.empty(); }
  size_t size() const { return values_.size(); }
  bool Contains(const V& value) const { return Find(value) != values_.size(); }

  bool Insert(V value) {
    if (Contains(value)) return false;
    values_.push_back(std::move(value));
    if constexpr (kHashable) {
      if (index_) {
        index_->emplace(values_.back(), values_.size() - 1);
      } else if (values_.size() >= kIndexFrom) {
        BuildIndex();
      }
    }
    return true;
  }

  // Swaps the last value into the hole: order is not part of the contract.
  bool Erase(const V& value) {
    const size_t position = Find(value);
    if (position == values_.size()) return false;
    if constexpr (kHashable) {
      if (index_) index_->erase(values_[position]);
    }
    if (position + 1 != values_.size()) {
      values_[position] = std::move(values_.back());
      if constexpr (kHashable) {
        if (index_) (*index_)[values_[position]] = position;
      }
    }
    values_.pop_back();
    if constexpr (kHashable) {
      if (index_ && values_.size() < kIndexUntil) index_.reset();
    }
    return true;
  }

  template <typename Visit>
  void ForEach(Visit& visit) const {
    for (const V& value : values_) visit(value);
  }

 private:
  static constexpr bool kHashable = StdHashable<V>;
  using Index = std::unordered_map<V, size_t>;
  struct NoIndex {};

  // Position of `value`, or size() when absent.
  size_t Find(const V& value) const {
    if constexpr (kHashable) {
      if (index_) {
        auto found = index_->find(value);
        return found == index_->end() ? values_.size() : found->second;
      }
    }
    for (size_t i = 0; i < values_.size(); ++i) {
      if (values_[i] == value) return i;
    }
    return values_.size();
  }

  void BuildIndex() {
    if constexpr (kHashable) {
      index_ = std::make_unique<Index>();
      index_->reserve(values_.size() * 2);
      for (size_t i = 0; i < values_.size(); ++i) index_->emplace(values_[i], i);
    }
  }

  std::vector<V> values_;
  [[no_unique_address]] std::conditional_t<kHashable, std::unique_ptr<Index>, NoIndex> index_;
};

}  // namespace filter_trie_internal
}  // namespace estuary
