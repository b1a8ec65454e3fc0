// libFuzzer target for the topic rules and the filter trie. The input is
// "<filter>\0<topic>" (U+0000 is invalid in both, so the split is free).
// Checks: the validators agree with each other; for a valid filter and
// name, FilterTrie::Match agrees with TopicMatches, and Erase leaves an
// empty trie behind. Any breach aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "model/filter_trie.h"
#include "model/topic.h"

namespace estuary {
namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "topic_fuzz: %s\n", what);
  std::abort();
}

void CheckValidators(std::string_view text) {
  const bool utf8 = IsValidMqttUtf8(text);
  const auto name = ValidateTopicName(text);
  const auto filter = ValidateTopicFilter(text);
  if ((name || filter) && !utf8) Fail("accepted ill-formed UTF-8");
  if (name && !filter) Fail("a valid name is not a valid filter");
  if (filter && !HasValidWildcards(text)) Fail("filter accepted with bad wildcards");
  if (auto shared = ParseSharedFilter(text)) {
    if (!IsSharedFilter(text)) Fail("parsed a non-$share filter");
    if (shared->group.empty() || !ValidateTopicFilter(shared->filter)) {
      Fail("shared filter with empty group or bad filter");
    }
  }
}

void CheckTrie(std::string_view filter, std::string_view topic) {
  FilterTrie<int> trie;
  if (!trie.Insert(filter, 1)) Fail("Insert refused a valid filter");
  if (trie.Insert(filter, 1)) Fail("duplicate Insert accepted");
  int visits = 0;
  trie.Match(topic, [&](int) { ++visits; });
  if ((visits == 1) != TopicMatches(filter, topic) || visits > 1) {
    Fail("Match disagrees with TopicMatches");
  }
  if (!trie.Erase(filter, 1) || trie.node_count() != 1) Fail("Erase did not prune");
}

}  // namespace
}  // namespace estuary

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view filter = input.substr(0, split);
  const std::string_view topic =
      split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  estuary::CheckValidators(filter);
  estuary::CheckValidators(topic);
  if (estuary::ValidateTopicFilter(filter) && estuary::ValidateTopicName(topic)) {
    estuary::CheckTrie(filter, topic);
  }
  return 0;
}
