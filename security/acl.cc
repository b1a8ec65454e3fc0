#include "security/acl.h"

#include "model/topic.h"
#include "security/text_file.h"

namespace estuary::security {
namespace {

// A rule's level as the client's value: %c and %u when substituting, the
// level itself otherwise; nullopt when %u meets an anonymous client.
std::optional<std::string_view> Resolve(std::string_view level, const AclIdentity* client) {
  if (client == nullptr) return level;
  if (level == "%c") return client->client_id;
  if (level == "%u") return client->username;
  return level;
}

bool IsWildcard(std::string_view level) { return level == "+" || level == "#"; }
bool IsDollar(std::string_view level) { return !level.empty() && level[0] == '$'; }

// The first word of `text` and what follows it (both trimmed).
std::pair<std::string_view, std::string_view> SplitWord(std::string_view text) {
  text = TrimBlanks(text);
  const size_t end = text.find_first_of(" \t");
  if (end == std::string_view::npos) return {text, {}};
  return {text.substr(0, end), TrimBlanks(text.substr(end))};
}

std::optional<uint8_t> ParseAccess(std::string_view word) {
  if (word == "read") return kRead;
  if (word == "write") return kWrite;
  if (word == "readwrite") return kReadWrite;
  if (word == "deny") return kNoAccess;
  return std::nullopt;
}

bool Dangerous(const AclIdentity& client) {
  auto bad = [](std::string_view text) { return text.find_first_of("+#") != std::string_view::npos; };
  return bad(client.client_id) || (client.username && bad(*client.username));
}

}  // namespace

bool RuleMatches(std::string_view rule, std::string_view topic, const AclIdentity* client) {
  TopicLevels rule_levels(rule);
  TopicLevels topic_levels(topic);
  bool first = true;
  while (!rule_levels.done()) {
    const std::string_view level = rule_levels.Next();
    if (first && IsWildcard(level) && IsDollar(topic)) return false;  // [MQTT-4.7.2-1]
    first = false;
    if (level == "#") return true;  // "a/#" matches "a" too
    if (topic_levels.done()) return false;
    const std::string_view topic_level = topic_levels.Next();
    if (level == "+") continue;
    const auto value = Resolve(level, client);
    if (!value || *value != topic_level) return false;
  }
  return topic_levels.done();
}

bool RuleCovers(std::string_view rule, std::string_view filter, const AclIdentity* client) {
  TopicLevels rule_levels(rule);
  TopicLevels filter_levels(filter);
  bool first = true;
  for (;;) {
    if (rule_levels.done()) return filter_levels.done();
    const std::string_view level = rule_levels.Next();
    if (level == "#") {
      // A '#' first matches no '$' topic; a filter starting with a wildcard has none.
      if (!first || filter_levels.done()) return true;
      return !IsDollar(TopicLevels(filter, filter_levels.position()).Next());
    }
    if (filter_levels.done()) return false;
    const std::string_view filter_level = filter_levels.Next();
    if (filter_level == "#") return false;
    if (level == "+") {
      if (first && IsDollar(filter_level)) return false;
    } else {
      const auto value = Resolve(level, client);
      if (filter_level == "+" || !value || *value != filter_level) return false;
    }
    first = false;
  }
}

bool RuleOverlaps(std::string_view rule, std::string_view filter, const AclIdentity* client) {
  TopicLevels rule_levels(rule);
  TopicLevels filter_levels(filter);
  bool first = true;
  for (;;) {
    if (rule_levels.done() && filter_levels.done()) return true;
    // One ran out: the other matches that topic only through a final '#'.
    if (rule_levels.done()) return filter_levels.Next() == "#";
    if (filter_levels.done()) return rule_levels.Next() == "#";
    const std::string_view level = rule_levels.Next();
    const std::string_view filter_level = filter_levels.Next();
    const bool rule_wild = IsWildcard(level);
    const bool filter_wild = IsWildcard(filter_level);
    std::optional<std::string_view> value;
    if (!rule_wild) {
      value = Resolve(level, client);
      if (!value) return false;
    }
    if (first && rule_wild != filter_wild && IsDollar(rule_wild ? filter_level : *value)) return false;
    first = false;
    if (level == "#" || filter_level == "#") return true;
    if (!rule_wild && !filter_wild && *value != filter_level) return false;
  }
}

void Acl::Add(RuleList& list, Rule rule) {
  ++rule_count_;
  (rule.access == kNoAccess ? list.denies : list.grants).push_back(std::move(rule));
}

Expected<Acl, std::string> Acl::Parse(std::string_view text, std::string_view source) {
  Acl acl;
  RuleList* current = &acl.anonymous_;
  auto parsed = ForEachEntry(text, source, [&](std::string_view line) -> std::string {
    const auto [keyword, rest] = SplitWord(line);
    if (keyword == "user") {
      if (rest.empty()) return "missing user name";
      current = &acl.users_[std::string(rest)];
      return {};
    }
    if (keyword != "topic" && keyword != "pattern") {
      return "unknown keyword '" + std::string(keyword) + "' (expected topic, pattern or user)";
    }
    if (rest.empty()) return "empty topic";
    auto [access_word, filter] = SplitWord(rest);
    uint8_t access = kReadWrite;
    if (filter.empty()) {
      filter = access_word;
    } else if (auto word = ParseAccess(access_word)) {
      access = *word;
    } else {
      return "invalid access '" + std::string(access_word) + "' (expected read, write, readwrite or deny)";
    }
    if (auto valid = ValidateTopicFilter(filter); !valid) {
      return "invalid topic filter '" + std::string(filter) + "': " + ToString(valid.error());
    }
    Rule rule{std::string(filter), access, keyword == "pattern", false};
    if (rule.pattern) {
      for (TopicLevels levels(filter); !levels.done();) rule.needs_username |= levels.Next() == "%u";
    }
    acl.Add(rule.pattern ? acl.patterns_ : *current, std::move(rule));
    return {};
  });
  if (!parsed) return MakeError(parsed.error());
  return acl;
}

Expected<std::shared_ptr<const Acl>, std::string> Acl::Load(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return MakeError("cannot read ACL file " + path + ": " + text.error());
  auto acl = Parse(*text, path);
  if (!acl) return MakeError(acl.error());
  return std::make_shared<const Acl>(std::move(*acl));
}

const Acl::RuleList* Acl::OwnRules(const AclIdentity& client) const {
  if (!client.username) return &anonymous_;
  auto it = users_.find(std::string(*client.username));
  return it == users_.end() ? nullptr : &it->second;
}

// Deny rules first (the client's own, then every pattern's), as the man
// page states: true if one matches.
template <typename Matches>
bool Acl::AnyDeny(const AclIdentity& client, Matches&& matches) const {
  if (const RuleList* own = OwnRules(client)) {
    for (const Rule& rule : own->denies) {
      if (matches(rule, nullptr)) return true;
    }
  }
  for (const Rule& rule : patterns_.denies) {
    if (!(rule.needs_username && !client.username) && matches(rule, &client)) return true;
  }
  return false;
}

// Then the grants: the client's own, then the patterns' (none for an
// identity holding a wildcard). `take` returns true to stop.
template <typename Take>
bool Acl::AnyGrant(const AclIdentity& client, Take&& take) const {
  if (const RuleList* own = OwnRules(client)) {
    for (const Rule& rule : own->grants) {
      if (take(rule, nullptr)) return true;
    }
  }
  if (Dangerous(client)) return false;
  for (const Rule& rule : patterns_.grants) {
    if (!(rule.needs_username && !client.username) && take(rule, &client)) return true;
  }
  return false;
}

uint8_t Acl::Decide(const AclIdentity& client, std::string_view topic) const {
  const auto matches = [topic](const Rule& rule, const AclIdentity* substitute) {
    return RuleMatches(rule.filter, topic, substitute);
  };
  if (AnyDeny(client, matches)) return kNoAccess;
  uint8_t bits = kNoAccess;
  AnyGrant(client, [&](const Rule& rule, const AclIdentity* substitute) {
    if ((rule.access & ~bits) != 0 && matches(rule, substitute)) bits |= rule.access;
    return bits == kReadWrite;
  });
  return bits;
}

bool Acl::MaySubscribe(const AclIdentity& client, std::string_view filter) const {
  std::string inner;
  if (IsSharedFilter(filter)) {
    auto shared = ParseSharedFilter(filter);
    if (!shared) return false;
    inner = std::move(shared->filter);
    filter = inner;
  }
  if (filter.find_first_of("+#") == std::string_view::npos) return (Decide(client, filter) & kRead) != 0;
  const bool all_denied = AnyDeny(client, [filter](const Rule& rule, const AclIdentity* substitute) {
    return RuleCovers(rule.filter, filter, substitute);
  });
  if (all_denied) return false;
  return AnyGrant(client, [filter](const Rule& rule, const AclIdentity* substitute) {
    return (rule.access & kRead) != 0 && RuleOverlaps(rule.filter, filter, substitute);
  });
}

}  // namespace estuary::security
