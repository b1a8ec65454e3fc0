#include "model/topic.h"

namespace estuary {

const char* ToString(TopicError error) {
  switch (error) {
    case TopicError::kEmpty:
      return "empty topic";
    case TopicError::kTooLong:
      return "topic longer than 65535 bytes";
    case TopicError::kInvalidUtf8:
      return "topic is not well-formed UTF-8";
    case TopicError::kWildcardInName:
      return "wildcard in topic name";
    case TopicError::kBadWildcard:
      return "wildcard not alone in its level, or '#' not last";
    case TopicError::kBadSharedFilter:
      return "malformed $share filter";
  }
  return "unknown topic error";
}

namespace {

// Length of the UTF-8 sequence at text[pos] if it is well-formed and encodes
// neither a surrogate nor U+0000; 0 otherwise. The byte ranges are those of
// Unicode Table 3-7 (Well-Formed UTF-8 Byte Sequences), which already
// exclude overlong forms, surrogates and code points above U+10FFFF.
size_t SequenceLength(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  auto in = [&](size_t i, unsigned char low, unsigned char high) {
    return pos + i < text.size() && byte(i) >= low && byte(i) <= high;
  };
  const unsigned char lead = byte(0);
  if (lead >= 0x01 && lead <= 0x7F) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    // E0 needs A0.. (no overlong); ED stops at 9F (no surrogates).
    const unsigned char low = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned char high = lead == 0xED ? 0x9F : 0xBF;
    return in(1, low, high) && in(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    // F0 needs 90.. (no overlong); F4 stops at 8F (nothing past U+10FFFF).
    const unsigned char low = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char high = lead == 0xF4 ? 0x8F : 0xBF;
    return in(1, low, high) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;  // U+0000, a continuation byte, C0, C1 or F5..FF
}

// Common checks for names and filters, before their own rules.
Expected<void, TopicError> ValidateText(std::string_view text) {
  if (text.empty()) return MakeError(TopicError::kEmpty);
  if (text.size() > kMaxTopicBytes) return MakeError(TopicError::kTooLong);
  if (!IsValidMqttUtf8(text)) return MakeError(TopicError::kInvalidUtf8);
  return {};
}

bool StartsWithWildcard(std::string_view filter) {
  return !filter.empty() && (filter.front() == '+' || filter.front() == '#');
}

constexpr std::string_view kSharePrefix = "$share/";

}  // namespace

bool IsValidMqttUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = SequenceLength(text, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

Expected<void, TopicError> ValidateTopicName(std::string_view name) {
  if (auto valid = ValidateText(name); !valid) return valid;
  if (name.find_first_of("+#") != std::string_view::npos) {
    return MakeError(TopicError::kWildcardInName);
  }
  return {};
}

Expected<void, TopicError> ValidateTopicFilter(std::string_view filter) {
  if (auto valid = ValidateText(filter); !valid) return valid;
  if (!HasValidWildcards(filter)) return MakeError(TopicError::kBadWildcard);
  return {};
}

bool HasValidWildcards(std::string_view filter) {
  TopicLevels levels(filter);
  while (!levels.done()) {
    const std::string_view level = levels.Next();
    if (level == "+") continue;
    if (level == "#") return levels.done();  // '#' must be last
    if (level.find_first_of("+#") != std::string_view::npos) return false;
  }
  return true;
}

bool IsSharedFilter(std::string_view filter) { return filter.starts_with(kSharePrefix); }

Expected<SharedFilter, TopicError> ParseSharedFilter(std::string_view filter) {
  if (!IsSharedFilter(filter)) return MakeError(TopicError::kBadSharedFilter);
  if (auto valid = ValidateText(filter); !valid) return MakeError(valid.error());
  const std::string_view rest = filter.substr(kSharePrefix.size());
  const size_t slash = rest.find('/');
  if (slash == 0 || slash == std::string_view::npos) {
    return MakeError(TopicError::kBadSharedFilter);  // empty group or no filter
  }
  const std::string_view group = rest.substr(0, slash);
  const std::string_view inner = rest.substr(slash + 1);
  if (group.find_first_of("+#") != std::string_view::npos || !ValidateTopicFilter(inner)) {
    return MakeError(TopicError::kBadSharedFilter);
  }
  return SharedFilter{std::string(group), std::string(inner)};
}

bool TopicMatches(std::string_view filter, std::string_view topic) {
  if (StartsWithWildcard(filter) && topic.starts_with('$')) return false;
  TopicLevels filter_levels(filter);
  TopicLevels topic_levels(topic);
  while (!filter_levels.done()) {
    const std::string_view level = filter_levels.Next();
    if (level == "#") return true;  // the rest, including no level at all
    if (topic_levels.done()) return false;
    const std::string_view topic_level = topic_levels.Next();
    if (level != "+" && level != topic_level) return false;
  }
  return topic_levels.done();
}

}  // namespace estuary
