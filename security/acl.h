#pragma once
// Acl: topic rights in Mosquitto's acl_file format (man mosquitto.conf,
// "acl_file"):
//   # comment                         (a '#' first on the line)
//   topic [read|write|readwrite|deny] FILTER
//   user NAME                         (the rules after it are NAME's)
//   pattern [read|write|readwrite|deny] FILTER   (%c client id, %u user name)
// With no access word the rule is readwrite; FILTER is the rest of the line
// and may hold spaces. `topic` rules before the first `user` line are the
// anonymous clients' (no user name). `pattern` rules apply to every client
// wherever they stand; one with %u never matches an anonymous client.
// %c and %u stand for a whole level ("dev/%c/x"); inside other text they
// are plain characters.
//
// Decisions, as the man page states them: only what a rule grants is
// allowed; deny rules are looked at before any grant (a client's deny and
// every pattern deny, then its grants, then the pattern grants). A client
// whose user name or client id holds '+' or '#' gets no pattern grant
// (Mosquitto's rule against CVE-2017-7650). Filters match by the MQTT
// rules, so a rule starting with a wildcard never matches a '$' topic:
// `$SYS/...` is readable only where a rule names `$SYS` (or `$`-anything).
//
// Immutable once built: any thread may ask at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/expected.h"

namespace estuary::security {

enum AccessBits : uint8_t { kNoAccess = 0, kRead = 1, kWrite = 2, kReadWrite = 3 };

struct AclIdentity {
  std::string_view client_id;
  std::optional<std::string_view> username;  // nullopt: anonymous
};

class Acl {
 public:
  // Parses a whole file's text; `source` names it in errors ("FILE:LINE: what").
  static Expected<Acl, std::string> Parse(std::string_view text, std::string_view source);
  static Expected<std::shared_ptr<const Acl>, std::string> Load(const std::string& path);

  // What the client may do with a topic name: kRead, kWrite, both or neither.
  uint8_t Decide(const AclIdentity& client, std::string_view topic) const;
  // Whether a SUBSCRIBE to `filter` is granted: for a filter without
  // wildcards, read access to that topic; with wildcards, some topic it
  // matches is readable (a read grant overlaps it) and no deny covers all
  // of it. Each delivery is still checked by Decide. "$share/G/F" is F.
  bool MaySubscribe(const AclIdentity& client, std::string_view filter) const;

  size_t rule_count() const { return rule_count_; }

 private:
  struct Rule {
    std::string filter;
    uint8_t access = kNoAccess;  // kNoAccess: deny
    bool pattern = false;        // %c and %u stand for the client's values
    bool needs_username = false; // a pattern with %u
  };
  struct RuleList {
    std::vector<Rule> denies;
    std::vector<Rule> grants;
  };
  void Add(RuleList& list, Rule rule);
  const RuleList* OwnRules(const AclIdentity& client) const;
  template <typename Matches>
  bool AnyDeny(const AclIdentity& client, Matches&& matches) const;
  template <typename Take>
  bool AnyGrant(const AclIdentity& client, Take&& take) const;

  RuleList anonymous_;
  std::unordered_map<std::string, RuleList> users_;
  RuleList patterns_;
  size_t rule_count_ = 0;
};

// Filter matching with the ACL's substitutions (exposed for tests and the
// fuzzer). `client` null: no substitution (a `topic` rule).
bool RuleMatches(std::string_view rule, std::string_view topic, const AclIdentity* client);
// Some topic matches both `rule` and `filter`.
bool RuleOverlaps(std::string_view rule, std::string_view filter, const AclIdentity* client);
// Every topic `filter` matches, `rule` matches too.
bool RuleCovers(std::string_view rule, std::string_view filter, const AclIdentity* client);

}  // namespace estuary::security
