#include "cluster-core/partition/partition_admin.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <string_view>

namespace estuary::partition {
namespace {

constexpr std::string_view kTransfer = "/api/cluster/partitions/transfer";

io::HttpResponse Json(int status, const nlohmann::json& body) {
  return {status, "application/json", body.dump() + "\n"};
}

// The unsigned value of `name` in the query: nullopt if absent, -1 if not
// a number below `limit`.
std::optional<int64_t> Number(std::string_view query, std::string_view name, uint64_t limit) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      if (eq == std::string_view::npos) return -1;
      const std::string_view text = pair.substr(eq + 1);
      uint64_t value = 0;
      auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || value >= limit) return -1;
      return static_cast<int64_t>(value);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

int StatusOf(const TransferRefusal& refusal) {
  switch (refusal.error) {
    case TransferError::kUnknownPartition:
    case TransferError::kNotOpen:
      return 404;
    case TransferError::kNoReplica:
      return 421;
    case TransferError::kNotLeader:
      return refusal.leader == 0 ? 503 : 421;
    case TransferError::kNotVoter:
    case TransferError::kNotCaughtUp:
    case TransferError::kDraining:
    case TransferError::kNoTarget:
      return 409;
  }
  return 409;
}

io::HttpResponse Refused(const TransferRefusal& refusal) {
  nlohmann::json body{{"error", refusal.message}};
  if (refusal.error == TransferError::kNotLeader) body["leader"] = refusal.leader;
  if (refusal.error == TransferError::kNoReplica) body["replicas"] = refusal.replicas;
  return Json(StatusOf(refusal), body);
}

}  // namespace

std::optional<io::HttpResponse> ServePartitionAdmin(PartitionHost& host, const std::string& method,
                                                    const std::string& path) {
  const std::string_view target(path);
  const std::string_view route = target.substr(0, target.find('?'));
  if (route != kTransfer) return std::nullopt;
  const std::string_view query = route.size() < target.size() ? target.substr(route.size() + 1) : "";
  if (method != "POST" && method != "DELETE") {
    return Json(405, {{"error", "method not allowed; use POST (transfer) or DELETE (clear the pin)"}});
  }
  const auto partition = Number(query, "partition", uint64_t{1} << 32);
  const auto to = Number(query, "to", 0x10000);
  if (!partition || *partition < 0) return Json(400, {{"error", "needs ?partition=P (a partition number)"}});
  if (to && *to < 0) return Json(400, {{"error", "to= must be a node id (1-65535)"}});
  const auto id = static_cast<PartitionId>(*partition);
  if (method == "DELETE") {
    auto cleared = host.ClearLeaderPin(id);
    if (!cleared) return Refused(cleared.error());
    return Json(202, {{"partition", id}, {"pin", 0}});
  }
  auto accepted = host.RequestLeader(id, to ? static_cast<NodeId>(*to) : NodeId{0});
  if (!accepted) return Refused(accepted.error());
  return Json(202, {{"partition", id}, {"from", accepted->from}, {"to", accepted->to}});
}

}  // namespace estuary::partition
