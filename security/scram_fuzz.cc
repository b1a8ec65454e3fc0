// libFuzzer target for the SCRAM-SHA-256 messages a client sends: the input
// is a client-first and a client-final message separated by a NUL (no NUL:
// the whole input is a client-first). Both parsers run on both halves, then
// a ScramServer runs the exchange. Checks: nothing crashes; a parsed
// client-first's user escapes back to a name that parses to the same user;
// a client-first never ends the exchange in success; a failed client-final
// always carries an "e=" message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "security/scram.h"

namespace {

const estuary::security::ScramCredential& Credential() {
  static const auto credential = estuary::security::DeriveScramCredential("pencil", "saltsaltsaltsalt", 4096);
  return credential;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace estuary::security;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view first = input.substr(0, split);
  const std::string_view final_message = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  for (std::string_view part : {first, final_message}) {
    if (auto parsed = ParseScramClientFirst(part)) {
      auto again = UnescapeScramName(EscapeScramName(parsed->user));
      if (!again || *again != parsed->user) std::abort();
    }
    (void)ParseScramClientFinal(part);
  }
  ScramServer server([](std::string_view) { return std::optional<ScramCredential>(Credential()); }, "SERVERNONCE",
                     "key");
  const ScramStep step = server.Receive(first);
  if (step.kind == ScramStep::Kind::kSucceeded) std::abort();  // a client-first cannot finish the exchange
  if (step.kind != ScramStep::Kind::kContinue || split == std::string_view::npos) return 0;
  const ScramStep last = server.Receive(final_message);
  if (last.kind == ScramStep::Kind::kContinue) std::abort();
  if (last.kind == ScramStep::Kind::kFailed && last.message.rfind("e=", 0) != 0) std::abort();
  return 0;
}
