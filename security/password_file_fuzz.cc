// libFuzzer target for the password file parser. The input is a whole
// file. Checks: it never crashes; every hash it accepts formats back to a
// field that parses to the same values. (Verification is not run: the
// fuzzer would spend its time in PBKDF2 with the file's iteration counts.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "security/password_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace estuary::security;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto table = ParsePasswordFile(text, "fuzz");
  if (!table) {
    if (table.error().rfind("fuzz:", 0) != 0) std::abort();
    return 0;
  }
  for (const auto& [user, hash] : *table) {
    if (user.empty()) std::abort();
    auto again = ParsePasswordHash(FormatPasswordHash(hash));
    if (!again || again->kind != hash.kind || again->iterations != hash.iterations || again->salt != hash.salt ||
        again->hash != hash.hash || again->server_key != hash.server_key) {
      std::fprintf(stderr, "password_file_fuzz: %s does not round-trip\n", user.c_str());
      std::abort();
    }
  }
  return 0;
}
