#pragma once
// FilterTrie<V>: topic filters -> values, matched against topic names.
//
// Each level of a filter is a trie node; '+' and '#' are children like any
// other level, so matching a topic visits only the branches that can match:
// cost grows with the number of levels and matching filters, not with the
// number of filters stored. The MQTT rule that wildcards at the first
// level do not match '$' topics is applied in Match.
//
// V must be equality-comparable. A (filter, value) pair is stored once;
// inserting it again returns false. Not thread-safe: one owner.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace estuary {

template <typename V>
class FilterTrie {
 public:
  // Returns true if inserted, false if (filter, value) was already present.
  bool Insert(std::string_view filter, V value);
  // Returns true if removed. Empty branches are pruned.
  bool Erase(std::string_view filter, const V& value);
  // Calls visit(filter_values) for every stored value whose filter matches
  // `topic`. Order is unspecified. A value stored under two matching
  // filters is visited twice (callers dedupe per client).
  template <typename Visit>
  void Match(std::string_view topic, Visit&& visit) const;

  size_t size() const { return size_; }  // number of (filter, value) pairs
  bool empty() const { return size_ == 0; }

 private:
  struct Node {
    std::unordered_map<std::string, std::unique_ptr<Node>> children;
    std::vector<V> values;
  };
  // implementation below
  Node root_;
  size_t size_ = 0;
  // (helpers implemented in the .inl part)
  template <typename Visit>
  static void MatchFrom(const Node& node, std::string_view topic, size_t pos,
                        bool first_level, Visit& visit);
};

}  // namespace estuary

#include "model/filter_trie_inl.h"
