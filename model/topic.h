#pragma once
// Topic names and topic filters by the MQTT rules (MQTT 3.1.1 §4.7,
// MQTT 5.0 §4.7 and §4.8.2 for shared subscriptions). Pure functions.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary {

inline constexpr size_t kMaxTopicBytes = 65535;

enum class TopicError : uint8_t {
  kEmpty,             // zero-length name or filter
  kTooLong,           // more than 65535 bytes
  kInvalidUtf8,       // ill-formed UTF-8, surrogates, or U+0000
  kWildcardInName,    // '+' or '#' in a topic name
  kBadWildcard,       // '+' not alone in its level, '#' not alone and last
  kBadSharedFilter,   // $share/ without a valid group or filter
};

const char* ToString(TopicError error);

// True when `text` is a well-formed MQTT UTF-8 string: valid UTF-8, no
// surrogates (U+D800..U+DFFF) and no U+0000 [MQTT-1.5.4-1, -2].
bool IsValidMqttUtf8(std::string_view text);

// A topic name as used in PUBLISH: non-empty, valid UTF-8, no wildcards.
Expected<void, TopicError> ValidateTopicName(std::string_view name);

// A topic filter as used in SUBSCRIBE (plain, not $share).
Expected<void, TopicError> ValidateTopicFilter(std::string_view filter);

// True when every '+' and '#' in `filter` is alone in its level and '#' is
// in the last level. Only the wildcard rule: no emptiness, length or UTF-8
// checks (ValidateTopicFilter does those too).
bool HasValidWildcards(std::string_view filter);

// "$share/<group>/<filter>": group non-empty without '/', '+', '#'; filter
// valid. Returns nullopt-free result only for shared filters.
struct SharedFilter {
  std::string group;
  std::string filter;
};
bool IsSharedFilter(std::string_view filter);  // starts with "$share/"
// Errors: kTooLong or kInvalidUtf8 for the whole text; kBadSharedFilter for
// anything else, an invalid inner filter included.
Expected<SharedFilter, TopicError> ParseSharedFilter(std::string_view filter);

// Walks the '/'-separated levels of a topic name or filter without
// allocating: "a//b/" yields "a", "", "b", "". `position` is the offset of
// the level Next() returns (text.size() + 1 once done).
class TopicLevels {
 public:
  explicit TopicLevels(std::string_view text, size_t position = 0)
      : text_(text), position_(position) {}
  bool done() const { return position_ > text_.size(); }
  size_t position() const { return position_; }
  // Precondition: !done().
  std::string_view Next() {
    size_t end = text_.find('/', position_);
    if (end == std::string_view::npos) end = text_.size();
    const std::string_view level = text_.substr(position_, end - position_);
    position_ = end + 1;
    return level;
  }

 private:
  std::string_view text_;
  size_t position_;
};

// Matching by the MQTT rules (a plain filter: strip "$share/<group>/"
// first), including: a filter starting with a wildcard
// does not match a topic starting with '$' [MQTT-4.7.2-1]; "a/#" matches
// "a"; "+" matches an empty level.
bool TopicMatches(std::string_view filter, std::string_view topic);

}  // namespace estuary
