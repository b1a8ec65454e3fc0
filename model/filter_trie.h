#pragma once
// FilterTrie<V>: topic filters -> values, matched against topic names.
//
// Each level of a filter is a trie node; '+' is a child like any other
// level and a trailing '#' is a value list on its parent, so matching a
// topic visits only the branches that can match: cost grows with the number
// of levels and matching filters, not with the number of filters stored.
// The MQTT rule that wildcards at the first level do not match '$' topics
// is applied in Match.
//
// Filters are plain MQTT filters (strip "$share/<group>/" first). Insert
// checks only the wildcard rule (HasValidWildcards) and non-emptiness; the
// caller validates UTF-8 and length with ValidateTopicFilter.
//
// V must be equality-comparable. A (filter, value) pair is stored once;
// inserting it again returns false. When std::hash<V> exists, filters with
// many values keep a hash index so Insert and Erase stay O(1) per value;
// otherwise they scan that filter's values. Not thread-safe: one owner.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/topic.h"

namespace estuary {

template <typename V>
class FilterTrie {
 public:
  FilterTrie() = default;
  ~FilterTrie();
  FilterTrie(const FilterTrie&) = delete;
  FilterTrie& operator=(const FilterTrie&) = delete;
  // A moved-from trie is empty.
  FilterTrie(FilterTrie&& other) noexcept;
  FilterTrie& operator=(FilterTrie&& other) noexcept;

  // Returns true if inserted, false if (filter, value) was already present
  // or the filter is empty or misplaces a wildcard.
  bool Insert(std::string_view filter, V value);
  // Returns true if removed. Empty branches are pruned.
  bool Erase(std::string_view filter, const V& value);
  // Calls visit(const V&) once for every stored value whose filter matches
  // `topic`. Order is unspecified. A value stored under two matching
  // filters is visited twice (callers dedupe per client). `visit` must not
  // modify the trie. Does not allocate unless a topic takes more than
  // kInlineBranches pending '+' branches at once.
  template <typename Visit>
  void Match(std::string_view topic, Visit&& visit) const;
  // True if (filter, value) is stored.
  bool Contains(std::string_view filter, const V& value) const;

  size_t size() const { return size_; }  // number of (filter, value) pairs
  bool empty() const { return size_ == 0; }
  // Nodes in the trie, the root included (1 when empty): shows pruning.
  size_t node_count() const { return node_count_; }

  static constexpr size_t kInlineBranches = 32;

 private:
  struct Node;    // defined in filter_trie_inl.h
  struct Branch;  // a '+' branch Match has yet to follow

  static bool IsStorable(std::string_view filter);
  // Frees the nodes below `root` without recursion (filters can be deep).
  static void Dismantle(Node& root);
  Node& StepOrCreate(Node& node, std::string_view level);
  // Removes empty nodes from `last` upwards along the (parent, level) path.
  template <typename Path>
  void Prune(Node& last, Path& path);

  Node root_;
  size_t size_ = 0;
  size_t node_count_ = 1;
};

}  // namespace estuary

#include "model/filter_trie_inl.h"
