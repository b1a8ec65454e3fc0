#pragma once
// estuary-lb's dashboard page (balancer/dashboard/index.html), compiled in
// by cmake/EmbedAssets.cmake and served at "/" by the admin listener.
#include <string_view>

#include "base/embedded_asset.h"

namespace estuary::balancer::dashboard {

const EmbeddedAsset* FindAsset(std::string_view path);

// A GET or HEAD of one of these files: let through without the admin token
// (they hold no data; the API calls the page makes are checked), so that a
// browser can load the page that then asks for the token.
inline bool IsStaticRequest(std::string_view method, std::string_view target) {
  return (method == "GET" || method == "HEAD") && FindAsset(target.substr(0, target.find('?'))) != nullptr;
}

}  // namespace estuary::balancer::dashboard
