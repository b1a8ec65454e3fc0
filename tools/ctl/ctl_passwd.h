#pragma once
// estuaryctl passwd FILE USER: adds USER to a password file, or replaces
// USER's line, with a $7$ (PBKDF2-SHA512) hash in the format mosquitto_passwd
// writes, so the file serves estuaryd's --password-file and Mosquitto alike;
// with --scram, a SCRAM-SHA-256 line instead (security/password_file.h),
// which estuaryd reads and Mosquitto does not.
// The password is asked twice on the terminal (no echo) or, when stdin is
// not a terminal, read as the first line of stdin. The file is created
// (mode 0600) if missing and replaced atomically (a temporary file renamed
// over it); other lines and comments stay. Exit status 0 done, 1 an error.
#include <cstdint>
#include <iosfwd>
#include <string>

namespace estuary::ctl {

struct PasswdOptions {
  std::string file;
  std::string user;
  uint32_t iterations = 0;  // 0: 101 (mosquitto_passwd's default), 4096 with scram
  bool scram = false;       // a SCRAM-SHA-256 line instead of $7$
};

// `in` is read when it is not a terminal; `terminal` says which it is.
int RunPasswd(const PasswdOptions& options, std::istream& in, bool terminal, std::ostream& out, std::ostream& err);

}  // namespace estuary::ctl
