#pragma once
// Configuration reload (SIGHUP, POST /api/reload; docs/configuration.md
// "Reload"): which keys of a freshly read NodeConfig differ from the running
// one, which of those a running node applies live, and the config that
// results. Pure: no file, no thread, no log; Node::Reload does those.
#include <string>
#include <vector>

#include "server/config.h"

namespace estuary::server {

// What the running node can change live beyond the plain keys: the abuse
// limits live in a ConnectionGuard that exists only when one was set at
// start, and counts addresses only when a per-address limit was.
struct ReloadAbilities {
  bool guard = false;              // a ConnectionGuard runs: --max-pending-connections is live
  bool guard_per_address = false;  // it counts addresses: --max-connections-per-ip, --connect-rate-per-ip are live
};

struct ConfigChange {
  std::string key;     // the flag's name without "--" (the TOML key)
  std::string before;  // the running value, as text ("(hidden)" for secrets)
  std::string after;
  bool live = false;   // false: it takes effect at the next restart
  std::string why;     // for a key that needs a restart: the reason, when not simply "read once at start"
};

// Every key whose value differs, in a fixed order.
std::vector<ConfigChange> DiffConfig(const NodeConfig& running, const NodeConfig& fresh,
                                     const ReloadAbilities& abilities);

// Copies the live keys of `fresh` into `running`, and only those: keys that
// need a restart keep their running value (the next reload reports them
// again), and their members are not written.
void ApplyLiveChanges(NodeConfig& running, const NodeConfig& fresh, const ReloadAbilities& abilities);

// What a reload did: each changed key, and each error (the config or a file
// that could not be read; the running config or file content is kept).
struct ReloadReport {
  std::vector<ConfigChange> changes;
  std::vector<std::string> errors;
  bool ok() const { return errors.empty(); }
  // {"ok":..., "changes":[{"key","before","after","live","why"}], "errors":[...]}
  std::string Json() const;
};

// One log-ready line per change: "max-connections: 100 -> 5 (applied)" or
// "mqtt: 127.0.0.1:1883 -> 127.0.0.1:1884 (needs a restart: ...)".
std::string DescribeChange(const ConfigChange& change);

}  // namespace estuary::server
