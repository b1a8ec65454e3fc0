#pragma once
// The admin API for membership, served by the node's admin listener and
// used by estuaryctl (docs/membership.md lists the JSON):
//   GET    /api/cluster/members            the member table
//   POST   /api/cluster/join?address=H:P   Membership::Join
//   DELETE /api/cluster/members/<id>       Membership::Remove
//   POST   /api/cluster/leave              Membership::Leave
// Parse, then act: ParseMembershipRequest reads the method and target
// (bytes from outside, pure, fuzzed by membership_admin_fuzz.cc) and
// ServeMembershipAdmin acts on what it parsed. Call ServeMembershipAdmin on
// the Membership's loop. Returns nullopt for paths it does not serve.
#include <optional>
#include <string>
#include <string_view>

#include "base/expected.h"
#include "cluster-core/membership/membership.h"
#include "io/uv/http_server.h"

namespace estuary::cluster {

// One admin request, parsed and checked.
struct MembershipRequest {
  enum class Kind { kNotServed, kMembers, kJoin, kRemove, kLeave };
  Kind kind = Kind::kNotServed;
  std::string address;  // kJoin: HOST:PORT, percent-decoded, ASCII only
  NodeId node = 0;      // kRemove: 1-65535
};

// The request `method` `target` asks for (kNotServed for paths of others),
// or the answer that refuses it: 405 for a method the path does not take,
// 400 for a bad address (a malformed percent escape named) or node id. A
// refusal's body is JSON {"error": ...} in printable ASCII, whatever the
// bytes were.
Expected<MembershipRequest, io::HttpResponse> ParseMembershipRequest(std::string_view method,
                                                                     std::string_view target);

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
