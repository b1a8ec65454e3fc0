#pragma once
// estuaryctl reload (docs/configuration.md "Reload"): POST /api/reload, as
// SIGHUP: the node reads its configuration and its password, ACL, token
// and certificate files again and applies what may change live.
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "io/uv/tcp.h"

namespace estuary::ctl {

// Exit status: 0 reloaded, 1 unreachable, or the node kept (part of) its
// running configuration because something could not be read (each error
// printed).
int RunReload(const io::Endpoint& admin, bool json, int timeout_ms, std::ostream& out, std::ostream& err);

// The readable form of the endpoint's answer (for tests):
//   log-level: info -> debug (applied)
//   mqtt: 127.0.0.1:1883 -> 127.0.0.1:1884 (needs a restart: read once at start)
//   error: configuration: ...
std::string FormatReload(const nlohmann::json& body);

}  // namespace estuary::ctl
