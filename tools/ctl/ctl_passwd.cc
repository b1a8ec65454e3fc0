#include "tools/ctl/ctl_passwd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <istream>
#include <optional>
#include <ostream>

#include "security/password_file.h"
#include "security/text_file.h"

namespace estuary::ctl {
namespace {

// One line from the terminal with echo off; nullopt at end of input. Echo
// goes off before the prompt appears, and at once (TCSANOW: TCSAFLUSH would
// throw away an answer typed right after the prompt).
std::optional<std::string> AskHidden(const char* prompt, std::istream& in, std::ostream& err) {
  termios saved{};
  const bool restore = tcgetattr(STDIN_FILENO, &saved) == 0;
  if (restore) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  err << prompt << std::flush;
  std::string line;
  const bool got = static_cast<bool>(std::getline(in, line));
  if (restore) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  err << "\n";
  if (!got) return std::nullopt;
  return line;
}

std::optional<std::string> ReadPassword(std::istream& in, bool terminal, std::ostream& err) {
  if (!terminal) {
    std::string line;
    if (!std::getline(in, line)) {
      err << "estuaryctl: error: no password on stdin (one line expected)\n";
      return std::nullopt;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  auto first = AskHidden("Password: ", in, err);
  auto second = first ? AskHidden("Reenter password: ", in, err) : std::nullopt;
  if (!first || !second) {
    err << "estuaryctl: error: no password given\n";
    return std::nullopt;
  }
  if (*first != *second) {
    err << "estuaryctl: error: the passwords do not match\n";
    return std::nullopt;
  }
  return first;
}

// Writes `text` to a temporary file beside `path` and renames it over `path`.
bool ReplaceFile(const std::string& path, const std::string& text, std::ostream& err) {
  struct stat existing{};
  const mode_t mode = ::stat(path.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : 0600;
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    err << "estuaryctl: error: cannot write " << temporary << ": " << std::strerror(errno) << "\n";
    return false;
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    err << "estuaryctl: error: cannot write " << path << ": " << std::strerror(errno) << "\n";
    ::unlink(temporary.c_str());
    return false;
  }
  return true;
}

}  // namespace

int RunPasswd(const PasswdOptions& options, std::istream& in, bool terminal, std::ostream& out, std::ostream& err) {
  if (options.user.empty() || options.user.find(':') != std::string::npos ||
      options.user.find_first_of("\r\n") != std::string::npos) {
    err << "estuaryctl: error: a user name must be non-empty, without ':' or line breaks\n";
    return 1;
  }
  std::string text;
  if (::access(options.file.c_str(), F_OK) == 0) {
    auto read = security::ReadTextFile(options.file);
    if (!read) {
      err << "estuaryctl: error: cannot read " << options.file << ": " << read.error() << "\n";
      return 1;
    }
    text = std::move(*read);
    // A file estuaryd would refuse is not made worse: fix it first.
    if (auto parsed = security::ParsePasswordFile(text, options.file); !parsed) {
      err << "estuaryctl: error: " << parsed.error() << "\n";
      return 1;
    }
  }
  auto password = ReadPassword(in, terminal, err);
  if (!password) return 1;
  const security::PasswordHash hash =
      options.scram ? security::HashPasswordScram(*password, options.iterations != 0 ? options.iterations : 4096)
                    : security::HashPassword(*password, options.iterations != 0 ? options.iterations
                                                                                 : security::kMosquittoIterations);
  if (!ReplaceFile(options.file, security::SetPasswordLine(text, options.user, hash), err)) return 1;
  out << "estuaryctl: " << options.user << " set in " << options.file << "\n";
  return 0;
}

}  // namespace estuary::ctl
