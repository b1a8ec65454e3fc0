#include "cluster-core/membership/membership_admin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

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

std::string PercentDecode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int value = 0;
      auto [end, error] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (error == std::errc() && end == text.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i] == '+' ? ' ' : text[i]);
  }
  return out;
}

// The value of `name` in a query string, or nullopt.
std::optional<std::string> QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      return eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
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

io::HttpResponse ServeJoin(Membership& membership, std::string_view query) {
  auto address = QueryValue(query, "address");
  if (!address || !LooksLikeHostPort(*address)) {
    return Error(400, "join needs ?address=HOST:PORT (a node's cluster address)");
  }
  membership.Join(*address);
  return Json(202, {{"joining", *address}});
}

io::HttpResponse ServeRemove(Membership& membership, std::string_view id_text) {
  unsigned id = 0;
  auto [end, error] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
  if (error != std::errc() || end != id_text.data() + id_text.size() || id == 0 || id > 0xFFFF) {
    return Error(400, fmt::format("bad node id '{}'", id_text));
  }
  auto removed = membership.Remove(static_cast<NodeId>(id));
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

std::optional<io::HttpResponse> ServeMembershipAdmin(Membership& membership, const std::string& method,
                                                     const std::string& path) {
  std::string_view target = path;
  std::string_view query;
  if (const size_t mark = target.find('?'); mark != std::string_view::npos) {
    query = target.substr(mark + 1);
    target = target.substr(0, mark);
  }
  if (target == kMembers) {
    if (method != "GET" && method != "HEAD") return MethodNotAllowed("GET");
    return io::HttpResponse{200, "application/json", MembersJson(membership)};
  }
  if (target.starts_with(kMembers) && target.size() > kMembers.size() && target[kMembers.size()] == '/') {
    if (method != "DELETE") return MethodNotAllowed("DELETE");
    return ServeRemove(membership, target.substr(kMembers.size() + 1));
  }
  if (target == kJoin) {
    if (method != "POST") return MethodNotAllowed("POST");
    return ServeJoin(membership, query);
  }
  if (target == kLeave) {
    if (method != "POST") return MethodNotAllowed("POST");
    const NodeId self = membership.self();
    membership.Leave([self] { spdlog::info("membership: node {} finished leaving", self); });
    return Json(202, {{"leaving", self}});
  }
  return std::nullopt;
}

}  // namespace estuary::cluster
