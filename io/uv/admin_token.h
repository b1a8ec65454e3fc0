#pragma once
// AdminToken: the bearer token an admin HTTP listener requires
// (--admin-token-file, docs/security.md "Admin API"). Shared by estuaryd
// and estuary-lb.
//
// The file holds one token on its first line (surrounding blanks and the
// line end trimmed). It is refused when it holds no token, a token shorter
// than kMinTokenBytes, or when it may be read or written by others (mode
// o+rwx: chmod 600 or 640), as ssh refuses a private key. Every request
// must carry `Authorization: Bearer TOKEN` except GET/HEAD `/healthz`
// (probes); others get 401 with `WWW-Authenticate: Bearer` and a JSON body.
// The comparison takes the same time whatever the first wrong byte.
//
// Threads: Check() and Reload() may be called from any thread (the token
// is guarded by a mutex; refused() is atomic).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "io/uv/http_server.h"

namespace estuary::io {

class AdminToken {
 public:
  static constexpr size_t kMinTokenBytes = 16;

  // Reads the file; errors name it and say what is wrong.
  static Expected<std::unique_ptr<AdminToken>, std::string> Load(const std::string& path);
  // Reads the file again (SIGHUP); on failure the old token stays.
  Expected<void, std::string> Reload();

  // The HttpServer gate: nullopt lets the request through; otherwise the
  // 401 to send (counted in refused()).
  std::optional<HttpResponse> Check(std::string_view method, std::string_view path,
                                    std::string_view authorization);
  // True if `authorization` is "Bearer TOKEN" with this token.
  bool Accepts(std::string_view authorization) const;
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

 private:
  explicit AdminToken(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable std::mutex mutex_;
  std::string token_;  // guarded by mutex_
  std::atomic<uint64_t> refused_{0};
};

// The token in `path` (the rules above), for clients that send it
// (estuaryctl --token-file, estuary-lb's probes, estuary-cluster).
Expected<std::string, std::string> ReadAdminTokenFile(const std::string& path);

// True for 127.0.0.0/8, ::1 and "localhost": an admin listener elsewhere
// needs a token (estuaryd refuses to start without one).
bool IsLoopbackHost(std::string_view host);

}  // namespace estuary::io
