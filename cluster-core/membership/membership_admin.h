#pragma once
// The admin API for membership, served by the node's admin listener and
// used by estuaryctl (docs/membership.md lists the JSON):
//   GET    /api/cluster/members            the member table
//   POST   /api/cluster/join?address=H:P   Membership::Join
//   DELETE /api/cluster/members/<id>       Membership::Remove
//   POST   /api/cluster/leave              Membership::Leave
// Call on the Membership's loop. Returns nullopt for paths it does not serve.
#include <optional>
#include <string>

#include "cluster-core/membership/membership.h"
#include "io/uv/http_server.h"

namespace estuary::cluster {

std::optional<io::HttpResponse> ServeMembershipAdmin(Membership& membership, const std::string& method,
                                                     const std::string& path);

// The JSON of GET /api/cluster/members.
std::string MembersJson(const Membership& membership);

// /healthz's verdict from membership: nullopt while this node is a member
// or joining; otherwise 503 {"status":"refused"|"removed"|"left","reason"}.
// A refused (node-id conflict) or removed node keeps serving its own
// clients as an island; this is how balancers and operators see it.
std::optional<io::HttpResponse> MembershipHealth(const Membership& membership);

}  // namespace estuary::cluster
