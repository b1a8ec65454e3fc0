// libFuzzer target for the ACL file parser and its decisions. The input is
// "<acl file>\0<client id>\0<user name>\0<topic or filter>". Checks: the
// parser never crashes and either refuses the text or builds rules; for a
// valid topic name, Decide agrees with itself through AclClient's cache;
// MaySubscribe on a topic name (no wildcards) is Decide's read bit; a
// filter that RuleCovers must also RuleOverlaps (a valid filter matches
// some topic). Any breach aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/topic.h"
#include "security/acl_store.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "acl_fuzz: %s\n", what);
  std::abort();
}

std::string_view Next(std::string_view& input) {
  const size_t split = input.find('\0');
  const std::string_view part = input.substr(0, split);
  input = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace estuary;
  using namespace estuary::security;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view text = Next(input);
  const std::string_view client_id = Next(input);
  const std::string_view username = Next(input);
  const std::string_view subject = Next(input);
  auto acl = Acl::Parse(text, "fuzz");
  if (!acl) {
    if (acl.error().rfind("fuzz:", 0) != 0) Fail("error without the source name");
    return 0;
  }
  const AclIdentity client{client_id, username.empty() ? std::nullopt : std::optional(username)};
  if (ValidateTopicName(subject)) {
    const uint8_t bits = acl->Decide(client, subject);
    if (bits > kReadWrite) Fail("bits out of range");
    if (!IsSharedFilter(subject) && acl->MaySubscribe(client, subject) != ((bits & kRead) != 0)) {
      Fail("subscribe disagrees with read");
    }
    AclStore store(std::make_shared<const Acl>(*acl));
    AclClient cached(store, std::string(client_id),
                     username.empty() ? std::nullopt : std::optional(std::string(username)));
    for (int round = 0; round < 2; ++round) {
      if (cached.MayRead(subject) != ((bits & kRead) != 0)) Fail("cached read differs");
      if (cached.MayWrite(subject) != ((bits & kWrite) != 0)) Fail("cached write differs");
    }
  }
  if (ValidateTopicFilter(subject)) {
    (void)acl->MaySubscribe(client, subject);
    // Rule filters against each other: the subject as a rule on itself.
    if (!RuleCovers(subject, subject, nullptr)) Fail("a filter does not cover itself");
    if (!RuleOverlaps(subject, subject, nullptr)) Fail("a filter does not overlap itself");
  }
  return 0;
}
