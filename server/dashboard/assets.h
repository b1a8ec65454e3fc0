#pragma once
// The node dashboard's files (server/dashboard/*.html|js|css and Debian's
// Chart.js), compiled into estuaryd by cmake/EmbedAssets.cmake and served
// by the admin listener (server/admin_api.cc; docs/admin-api.md "Dashboard").
#include <string_view>

#include "base/embedded_asset.h"

namespace estuary::server::dashboard {

// The file served at `path` ("/", "/app.js", ...), or null.
const EmbeddedAsset* FindAsset(std::string_view path);

// A GET or HEAD of one of these files: let through without the admin token
// (they hold no data; the API calls the page makes are checked), so that a
// browser can load the page that then asks for the token.
inline bool IsStaticRequest(std::string_view method, std::string_view target) {
  return (method == "GET" || method == "HEAD") && FindAsset(target.substr(0, target.find('?'))) != nullptr;
}

}  // namespace estuary::server::dashboard
