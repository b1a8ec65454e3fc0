#pragma once
// A static file compiled into a program (cmake/EmbedAssets.cmake): the
// admin dashboards of estuaryd and estuary-lb (docs/admin-api.md).
#include <string_view>

namespace estuary {

struct EmbeddedAsset {
  std::string_view path;          // the URL path it is served at, "/" for the page
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view body;
};

}  // namespace estuary
