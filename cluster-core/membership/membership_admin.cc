#include "cluster-core/membership/membership_admin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "io/http_query.h"

namespace estuary::cluster {
namespace {

constexpr std::string_view kMembers = "/api/cluster/members";
constexpr std::string_view kJoin = "/api/cluster/join";
constexpr std::string_view kLeave = "/api/cluster/leave";

io::HttpResponse Json(int status, const nlohmann::json& body) {
  // Replace, not throw, on bytes that are not UTF-8: a member's address
  // may come from another node's gossip.
  return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

io::HttpResponse Error(int status, const std::string& message) {
  return Json(status, {{"error", message}});
}

io::HttpResponse MethodNotAllowed(std::string_view allowed) {
  return Error(405, fmt::format("method not allowed; use {}", allowed));
}

// The value of the first pair named `name` in a query (the name decoded
// leniently, as server/admin_query does), strictly decoded with "+" as a
// space; nullopt if absent, an error naming a malformed escape.
std::optional<Expected<std::string, std::string>> QueryValue(std::string_view query, std::string_view name) {
  std::optional<Expected<std::string, std::string>> value;
  io::ForEachQueryPair(query, [&](const io::QueryPair& pair) {
    if (io::PercentDecode(pair.name, io::PlusIs::kSpace) != name) return true;
    value = io::PercentDecodeStrict(pair.value, io::PlusIs::kSpace);
    return false;
  });
  return value;
}

// HOST:PORT in the characters a host name, an IPv4 or a bracketed IPv6
// address uses (anything else, e.g. a percent-decoded non-ASCII byte, is
// refused before it reaches the member table or a JSON answer).
bool LooksLikeHostPort(const std::string& address) {
  const bool plain = std::all_of(address.begin(), address.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_' || c == ':' ||
           c == '[' || c == ']';
  });
  if (!plain) return false;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  unsigned port = 0;
  auto [end, error] = std::from_chars(address.data() + colon + 1, address.data() + address.size(), port);
  return error == std::errc() && end == address.data() + address.size() && port > 0 && port <= 65535;
}

Expected<MembershipRequest, io::HttpResponse> ParseJoin(std::string_view query) {
  auto address = QueryValue(query, "address");
  if (address && !*address) return MakeError(Error(400, fmt::format("join: address: {}", address->error())));
  if (!address || !LooksLikeHostPort(**address)) {
    std::string message = "join needs ?address=HOST:PORT (a node's cluster address)";
    if (address) message += fmt::format(", not '{}'", io::Printable(**address));
    return MakeError(Error(400, message));
  }
  return MembershipRequest{.kind = MembershipRequest::Kind::kJoin, .address = std::move(**address), .node = 0};
}

Expected<MembershipRequest, io::HttpResponse> ParseRemove(std::string_view id_text) {
  unsigned id = 0;
  auto [end, error] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (error != std::errc() || end != id_text.data() + id_text.size() || id == 0 || id > 0xFFFF) {
    return MakeError(Error(400, fmt::format("bad node id '{}'", io::Printable(id_text))));
  }
  return MembershipRequest{.kind = MembershipRequest::Kind::kRemove, .address = {}, .node = static_cast<NodeId>(id)};
}

io::HttpResponse ServeRemove(Membership& membership, NodeId id) {
  auto removed = membership.Remove(id);
  if (!removed) {
    const bool unknown = removed.error().starts_with("unknown");
    return Error(unknown ? 404 : 409, removed.error());
  }
  return Json(200, {{"removed", id}});
}

}  // namespace

std::string MembersJson(const Membership& membership) {
  const int64_t now = membership.NowMs();
  nlohmann::json members = nlohmann::json::array();
  for (const Member& member : membership.members()) {
    members.push_back({{"node", member.node},
                       {"state", std::string(ToString(member.state))},
                       {"cluster_address", member.cluster_address},
                       {"admin_address", member.admin_address},
                       {"incarnation", member.incarnation},
                       {"epoch", member.epoch},
                       {"removed", member.removed},
                       {"since_ms", member.since_ms},
                       {"for_ms", now - member.since_ms}});
  }
  nlohmann::json body = {{"self", membership.self()}, {"members", members}};
  // Kept through the retried joins until a member admits this node.
  if (!membership.last_refusal().empty()) body["refused"] = membership.last_refusal();
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::optional<io::HttpResponse> MembershipHealth(const Membership& membership) {
  const Member* self = membership.Find(membership.self());
  if (!membership.last_refusal().empty() && self->state != MemberState::kUp) {
    return Json(503, {{"status", "refused"}, {"reason", membership.last_refusal()}});
  }
  if (self->state == MemberState::kLeft && self->removed) {
    return Json(503, {{"status", "removed"},
                      {"reason", fmt::format("node {} was removed from the cluster by an operator; "
                                             "`estuaryctl join ADDRESS` readmits it",
                                             membership.self())}});
  }
  if (self->state == MemberState::kLeft) {
    return Json(503, {{"status", "left"},
                      {"reason", fmt::format("node {} left the cluster; restart it or `estuaryctl join "
                                             "ADDRESS` to rejoin",
                                             membership.self())}});
  }
  return std::nullopt;
}

Expected<MembershipRequest, io::HttpResponse> ParseMembershipRequest(std::string_view method,
                                                                     std::string_view target) {
  using Kind = MembershipRequest::Kind;
  const std::string_view path = io::PathOf(target);
  if (path == kMembers) {
    if (method != "GET" && method != "HEAD") return MakeError(MethodNotAllowed("GET"));
    return MembershipRequest{.kind = Kind::kMembers, .address = {}, .node = 0};
  }
  if (path.starts_with(kMembers) && path.size() > kMembers.size() && path[kMembers.size()] == '/') {
    if (method != "DELETE") return MakeError(MethodNotAllowed("DELETE"));
    return ParseRemove(path.substr(kMembers.size() + 1));
  }
  if (path == kJoin) {
    if (method != "POST") return MakeError(MethodNotAllowed("POST"));
    return ParseJoin(io::QueryOf(target));
  }
  if (path == kLeave) {
    if (method != "POST") return MakeError(MethodNotAllowed("POST"));
    return MembershipRequest{.kind = Kind::kLeave, .address = {}, .node = 0};
  }
  return MembershipRequest{};
}

std::optional<io::HttpResponse> ServeMembershipAdmin(Membership& membership, const std::string& method,
                                                     const std::string& path) {
  auto request = ParseMembershipRequest(method, path);
  if (!request) return std::move(request.error());
  switch (request->kind) {
    case MembershipRequest::Kind::kNotServed:
      return std::nullopt;
    case MembershipRequest::Kind::kMembers:
      return io::HttpResponse{200, "application/json", MembersJson(membership)};
    case MembershipRequest::Kind::kJoin:
      membership.Join(request->address);
      return Json(202, {{"joining", request->address}});
    case MembershipRequest::Kind::kRemove:
      return ServeRemove(membership, request->node);
    case MembershipRequest::Kind::kLeave: {
      const NodeId self = membership.self();
      membership.Leave([self] { spdlog::info("membership: node {} finished leaving", self); });
      return Json(202, {{"leaving", self}});
    }
  }
  return std::nullopt;
}

}  // namespace estuary::cluster
