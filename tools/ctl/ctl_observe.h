#pragma once
// estuaryctl's views of a running cluster over the admin API
// (docs/admin-api.md): status, clients [kick ID], sessions, subscriptions,
// retained, shared, top. Each prints a table, or with --json the API's
// JSON as it came (top: one JSON line per refresh).
#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/uv/tcp.h"

namespace estuary::ctl {

struct ObserveOptions {
  std::string client_id, username, address, filter, topic, group;
  std::string kick;             // clients kick ID
  std::string connected;        // sessions --connected true|false ("" = both)
  size_t limit = 50;
  size_t offset = 0;
  int iterations = 0;           // top: stop after N refreshes (0 = until q or Ctrl-C)
  int interval_ms = 1000;       // top
};

// Registers the commands on `app`, writing their options into `options`.
void AddObserveCommands(CLI::App& app, ObserveOptions& options);
bool IsObserveCommand(const std::string& command);
// Runs one; exit status as RunCtl's.
int RunObserve(const std::string& command, const io::Endpoint& admin, const ObserveOptions& options, bool json,
               int timeout_ms, std::ostream& out, std::ostream& err);

// The one-line message for an admin API that cannot be reached: which
// address was tried and which flag names another.
std::string UnreachableMessage(const io::Endpoint& admin, const std::string& why);

// The readable forms (exposed for tests).
std::string FormatStatus(const nlohmann::json& overview);
std::string FormatClients(const nlohmann::json& page);

}  // namespace estuary::ctl
