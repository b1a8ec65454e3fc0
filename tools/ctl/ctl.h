#pragma once
// estuaryctl: administration of a node through its admin HTTP API.
//   estuaryctl [--admin HOST:PORT] [--json] members|join ADDR|remove ID|leave|routes|meta|partitions|load
//   estuaryctl transfer-leader --partition P [--to N] [--clear]; drain [--no-wait]; undrain
//   estuaryctl passwd [--iterations N] FILE USER   (a local file: ctl_passwd.h)
//   estuaryctl status|clients [kick ID]|sessions|subscriptions|retained|shared|top   (ctl_observe.h)
// Exit status: 0 done, 1 the node is unreachable or refused the request,
// 2 bad usage. `--help` prints and exits 0.
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

namespace estuary::ctl {

int RunCtl(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// The readable forms (exposed for tests).
std::string FormatMembers(const nlohmann::json& body);
std::string FormatPartitions(const nlohmann::json& body);  // GET /api/cluster/partitions
std::string FormatGeneric(const nlohmann::json& body);
std::string FormatDuration(int64_t ms);  // "850ms", "42s", "3m07s", "2h05m", "3d04h"

}  // namespace estuary::ctl
