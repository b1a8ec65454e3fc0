#pragma once
// Template implementation of FilterTrie<V>; included by filter_trie.h only.
#include <utility>

#include "model/filter_trie_internal.h"

namespace estuary {

template <typename V>
struct FilterTrie<V>::Node {
  filter_trie_internal::ChildTable<Node> children;  // literal levels
  std::unique_ptr<Node> plus;                       // the '+' level
  filter_trie_internal::ValueSet<V> values;         // filters ending here
  filter_trie_internal::ValueSet<V> hash_values;    // filters ending here + "/#"

  bool IsEmpty() const {
    return children.empty() && !plus && values.empty() && hash_values.empty();
  }
  Node* Literal(std::string_view level) const { return children.Find(level); }
  // The child a filter level leads to: '+' or a literal level.
  Node* Step(std::string_view level) const { return level == "+" ? plus.get() : Literal(level); }
};

template <typename V>
struct FilterTrie<V>::Branch {
  const Node* node;
  size_t position;  // offset of the next topic level
};

template <typename V>
FilterTrie<V>::FilterTrie(FilterTrie&& other) noexcept
    : root_(std::exchange(other.root_, Node())),
      size_(std::exchange(other.size_, 0)),
      node_count_(std::exchange(other.node_count_, 1)) {}

template <typename V>
FilterTrie<V>::~FilterTrie() {
  Dismantle(root_);
}

template <typename V>
void FilterTrie<V>::Dismantle(Node& root) {
  std::vector<std::unique_ptr<Node>> doomed;
  auto detach_children = [&doomed](Node& node) {
    if (node.plus) doomed.push_back(std::move(node.plus));
    node.children.TakeAll(doomed);
  };
  detach_children(root);
  while (!doomed.empty()) {
    std::unique_ptr<Node> node = std::move(doomed.back());
    doomed.pop_back();
    detach_children(*node);
  }
}

template <typename V>
FilterTrie<V>& FilterTrie<V>::operator=(FilterTrie&& other) noexcept {
  if (this != &other) {
    Dismantle(root_);
    root_ = std::exchange(other.root_, Node());
    size_ = std::exchange(other.size_, 0);
    node_count_ = std::exchange(other.node_count_, 1);
  }
  return *this;
}

template <typename V>
bool FilterTrie<V>::IsStorable(std::string_view filter) {
  return !filter.empty() && HasValidWildcards(filter);
}

template <typename V>
auto FilterTrie<V>::StepOrCreate(Node& node, std::string_view level) -> Node& {
  if (level == "+") {
    if (!node.plus) {
      node.plus = std::make_unique<Node>();
      ++node_count_;
    }
    return *node.plus;
  }
  auto [child, created] = node.children.FindOrCreate(level);
  if (created) ++node_count_;
  return *child;
}

template <typename V>
bool FilterTrie<V>::Insert(std::string_view filter, V value) {
  if (!IsStorable(filter)) return false;
  Node* node = &root_;
  TopicLevels levels(filter);
  bool inserted = false;
  while (true) {
    const std::string_view level = levels.Next();
    if (level == "#") {
      inserted = node->hash_values.Insert(std::move(value));
      break;
    }
    node = &StepOrCreate(*node, level);
    if (levels.done()) {
      inserted = node->values.Insert(std::move(value));
      break;
    }
  }
  if (inserted) ++size_;
  return inserted;
}

template <typename V>
bool FilterTrie<V>::Erase(std::string_view filter, const V& value) {
  if (!IsStorable(filter)) return false;
  // (parent, level) for every step taken, to prune bottom-up afterwards.
  filter_trie_internal::SmallStack<std::pair<Node*, std::string_view>, kInlineBranches> path;
  Node* node = &root_;
  TopicLevels levels(filter);
  bool erased = false;
  while (true) {
    const std::string_view level = levels.Next();
    if (level == "#") {
      erased = node->hash_values.Erase(value);
      break;
    }
    Node* child = node->Step(level);
    if (child == nullptr) return false;
    path.Push({node, level});
    node = child;
    if (levels.done()) {
      erased = node->values.Erase(value);
      break;
    }
  }
  if (!erased) return false;
  --size_;
  Prune(*node, path);
  return true;
}

template <typename V>
template <typename Path>
void FilterTrie<V>::Prune(Node& last, Path& path) {
  const Node* node = &last;
  while (!path.empty() && node->IsEmpty()) {
    auto [parent, level] = path.Pop();
    if (level == "+") {
      parent->plus.reset();
    } else {
      parent->children.Erase(level);
    }
    --node_count_;
    node = parent;
  }
}

template <typename V>
bool FilterTrie<V>::Contains(std::string_view filter, const V& value) const {
  if (!IsStorable(filter)) return false;
  const Node* node = &root_;
  TopicLevels levels(filter);
  while (true) {
    const std::string_view level = levels.Next();
    if (level == "#") return node->hash_values.Contains(value);
    node = node->Step(level);
    if (node == nullptr) return false;
    if (levels.done()) return node->values.Contains(value);
  }
}

// Depth-first: follows the literal child in place and keeps '+' branches on
// a small stack, so the walk touches only nodes on matching paths.
template <typename V>
template <typename Visit>
void FilterTrie<V>::Match(std::string_view topic, Visit&& visit) const {
  const bool system_topic = topic.starts_with('$');
  filter_trie_internal::SmallStack<Branch, kInlineBranches> pending;
  pending.Push({&root_, 0});
  while (!pending.empty()) {
    const Branch branch = pending.Pop();
    const Node* node = branch.node;
    TopicLevels levels(topic, branch.position);
    while (node != nullptr) {
      // Wildcards in the first level never match '$' topics [MQTT-4.7.2-1].
      const bool shielded = system_topic && levels.position() == 0;
      if (!shielded) node->hash_values.ForEach(visit);
      if (levels.done()) {
        node->values.ForEach(visit);
        break;
      }
      const std::string_view level = levels.Next();
      if (node->plus && !shielded) pending.Push({node->plus.get(), levels.position()});
      node = node->Literal(level);
    }
  }
}

}  // namespace estuary
