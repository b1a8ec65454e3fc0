#include "tools/ctl/ctl_reload.h"

#include <fmt/format.h>

#include <ostream>

#include "tools/ctl/http_client.h"

namespace estuary::ctl {

std::string FormatReload(const nlohmann::json& body) {
  std::string out;
  for (const auto& change : body.value("changes", nlohmann::json::array())) {
    const std::string key = change.value("key", "");
    const std::string before = change.value("before", "");
    const std::string after = change.value("after", "");
    if (change.value("live", false)) {
      out += fmt::format("{}: {} -> {} (applied)\n", key, before, after);
    } else {
      out += fmt::format("{}: {} -> {} (needs a restart: {})\n", key, before, after, change.value("why", ""));
    }
  }
  for (const auto& error : body.value("errors", nlohmann::json::array())) {
    out += fmt::format("error: {}\n", error.is_string() ? error.get<std::string>() : error.dump());
  }
  if (out.empty()) out = "reloaded: no key changed\n";
  return out;
}

int RunReload(const io::Endpoint& admin, bool json, int timeout_ms, std::ostream& out, std::ostream& err) {
  auto reply = HttpRequest(admin.host, admin.port, "POST", "/api/reload", timeout_ms);
  if (!reply) {
    err << "estuaryctl: cannot reach the admin API at " << admin.ToString() << ": " << reply.error() << "\n";
    return 1;
  }
  auto body = nlohmann::json::parse(reply->body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    // An older node, or another error: its status and text as they came.
    err << "estuaryctl: reload: HTTP " << reply->status << ": " << reply->body
        << (reply->body.ends_with('\n') ? "" : "\n");
    if (reply->status == 404) err << "estuaryctl: this node has no /api/reload (an older estuaryd?): send it SIGHUP\n";
    return 1;
  }
  const bool ok = reply->status < 300 && body.value("ok", false);
  if (json) {
    out << reply->body << (reply->body.ends_with('\n') ? "" : "\n");
  } else {
    (ok ? out : err) << FormatReload(body);
    if (!ok) err << "estuaryctl: the node kept its running value for what failed; fix it and reload again\n";
  }
  return ok ? 0 : 1;
}

}  // namespace estuary::ctl
