#include "io/uv/admin_token.h"

#include <sys/stat.h>

#include <fstream>

namespace estuary::io {
namespace {

// Compares every byte of `expected` whatever `given` holds, so the time
// says nothing of where the first difference is (the length of the
// expected token is not secret: it is at least kMinTokenBytes).
bool ConstantTimeEquals(std::string_view expected, std::string_view given) {
  unsigned char difference = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char other = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<unsigned char>(expected[i]) ^ other;
  }
  return difference == 0;
}

HttpResponse Unauthorized(std::string_view why) {
  HttpResponse response{401, "application/json", std::string("{\"error\":\"unauthorized\",\"detail\":\"") +
                                                     std::string(why) + "\"}\n"};
  response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"estuary\"");
  return response;
}

}  // namespace

Expected<std::string, std::string> ReadAdminTokenFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return MakeError(path + ": cannot be read");
  if ((info.st_mode & S_IRWXO) != 0) {
    return MakeError(path + ": readable or writable by others (chmod 600 " + path + ")");
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return MakeError(path + ": holds no token on its first line");
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) return MakeError(path + ": holds no token on its first line");
  std::string token = line.substr(first, last - first + 1);
  if (token.size() < AdminToken::kMinTokenBytes) {
    return MakeError(path + ": the token is shorter than " + std::to_string(AdminToken::kMinTokenBytes) +
                     " characters");
  }
  return token;
}

bool IsLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

Expected<std::unique_ptr<AdminToken>, std::string> AdminToken::Load(const std::string& path) {
  std::unique_ptr<AdminToken> token(new AdminToken(path));
  if (auto read = token->Reload(); !read) return MakeError(read.error());
  return token;
}

Expected<void, std::string> AdminToken::Reload() {
  auto read = ReadAdminTokenFile(path_);
  if (!read) return MakeError(read.error());
  std::lock_guard lock(mutex_);
  token_ = std::move(*read);
  return {};
}

bool AdminToken::Accepts(std::string_view authorization) const {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {  // the scheme is case-insensitive (RFC 9110 11.1)
    const char c = authorization[i];
    if ((c | 0x20) != (kScheme[i] | 0x20)) return false;
  }
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  std::lock_guard lock(mutex_);
  return ConstantTimeEquals(token_, given);
}

std::optional<HttpResponse> AdminToken::Check(std::string_view method, std::string_view path,
                                              std::string_view authorization) {
  if ((method == "GET" || method == "HEAD") && (path == "/healthz" || path.rfind("/healthz?", 0) == 0)) {
    return std::nullopt;
  }
  if (Accepts(authorization)) return std::nullopt;
  refused_.fetch_add(1, std::memory_order_relaxed);
  return Unauthorized(authorization.empty() ? "this admin API needs Authorization: Bearer TOKEN"
                                            : "wrong admin token");
}

}  // namespace estuary::io
