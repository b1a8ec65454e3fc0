#pragma once
// Topic names and topic filters by the MQTT rules (MQTT 3.1.1 §4.7,
// MQTT 5.0 §4.7 and §4.8.2 for shared subscriptions). Pure functions.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/result.h"

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

// "$share/<group>/<filter>": group non-empty without '/', '+', '#'; filter
// valid. Returns nullopt-free result only for shared filters.
struct SharedFilter {
  std::string group;
  std::string filter;
};
bool IsSharedFilter(std::string_view filter);  // starts with "$share/"
Expected<SharedFilter, TopicError> ParseSharedFilter(std::string_view filter);

// Matching by the MQTT rules, including: a filter starting with a wildcard
// does not match a topic starting with '$' [MQTT-4.7.2-1]; "a/#" matches
// "a"; "+" matches an empty level.
bool TopicMatches(std::string_view filter, std::string_view topic);

}  // namespace estuary
