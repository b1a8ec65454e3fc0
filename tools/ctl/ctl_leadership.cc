#include "tools/ctl/ctl_leadership.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>
#include <vector>

#include "tools/ctl/http_client.h"

namespace estuary::ctl {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// How often the watch asks the node (not a wait for correctness).
constexpr auto kPollInterval = std::chrono::milliseconds(20);

nlohmann::json Parse(const std::string& body) {
  auto json = nlohmann::json::parse(body, nullptr, false);
  return json.is_discarded() ? nlohmann::json() : json;
}

std::string ErrorOf(const HttpReply& reply) {
  const nlohmann::json body = Parse(reply.body);
  if (body.is_object() && body.contains("error") && body["error"].is_string()) {
    return fmt::format("{} (HTTP {})", body["error"].get<std::string>(), reply.status);
  }
  return fmt::format("HTTP {}: {}", reply.status, reply.body.substr(0, reply.body.find('\n')));
}

// The admin address of `node` from the member table `admin` serves.
std::optional<io::Endpoint> AdminOf(const io::Endpoint& admin, unsigned node, int timeout_ms) {
  auto reply = HttpRequest(admin.host, admin.port, "GET", "/api/cluster/members", timeout_ms);
  if (!reply || reply->status != 200) return std::nullopt;
  const nlohmann::json body = Parse(reply->body);
  if (!body.is_object() || !body.contains("members") || !body["members"].is_array()) return std::nullopt;
  for (const auto& member : body["members"]) {
    if (member.value("node", 0u) != node) continue;
    auto endpoint = io::ParseEndpoint(member.value("admin_address", ""));
    if (endpoint) return *endpoint;
  }
  return std::nullopt;
}

// The partition's row in GET /api/cluster/partitions, or null.
nlohmann::json PartitionRow(const io::Endpoint& admin, uint32_t partition, int timeout_ms) {
  auto reply = HttpRequest(admin.host, admin.port, "GET", "/api/cluster/partitions", timeout_ms);
  if (!reply || reply->status != 200) return nullptr;
  const nlohmann::json body = Parse(reply->body);
  if (!body.is_object() || !body.contains("open") || !body["open"].is_array()) return nullptr;
  for (const auto& row : body["open"]) {
    if (row.value("partition", ~0u) == partition) return row;
  }
  return nullptr;
}

}  // namespace

std::string FormatTransfer(uint32_t partition, unsigned from, unsigned to, int64_t took_ms) {
  if (from == to) return fmt::format("partition {}: node {} leads and is now pinned there\n", partition, to);
  return fmt::format("partition {}: leader {} -> {} (pinned there; took {}ms)\n", partition, from, to, took_ms);
}

std::string FormatDrain(unsigned node, size_t moved, int64_t took_ms) {
  return fmt::format("node {} is draining: leads no partition now ({} moved away in {}ms)\n", node, moved, took_ms);
}

int RunTransfer(const io::Endpoint& admin, const TransferOptions& options, bool json, int timeout_ms,
                std::ostream& out, std::ostream& err) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  std::string target = fmt::format("/api/cluster/partitions/transfer?partition={}", options.partition);
  if (options.to != 0 && !options.clear) target += fmt::format("&to={}", options.to);
  // Ask, following "ask there" answers (421) to the leader or a replica.
  io::Endpoint at = admin;
  std::vector<std::string> asked;
  nlohmann::json accepted;
  for (;;) {
    asked.push_back(at.ToString());
    auto reply = HttpRequest(at.host, at.port, options.clear ? "DELETE" : "POST", target, timeout_ms);
    if (!reply) {
      err << "estuaryctl: cannot reach the admin API at " << at.ToString() << ": " << reply.error() << "\n";
      return 1;
    }
    const nlohmann::json body = Parse(reply->body);
    if (reply->status == 202) {
      accepted = body;
      break;
    }
    std::optional<io::Endpoint> next;
    if (reply->status == 421 && body.is_object()) {
      std::vector<unsigned> nodes;
      if (body.value("leader", 0u) != 0) nodes.push_back(body.value("leader", 0u));
      if (body.contains("replicas") && body["replicas"].is_array()) {
        for (const auto& node : body["replicas"]) nodes.push_back(node.get<unsigned>());
      }
      for (unsigned node : nodes) {
        auto endpoint = AdminOf(admin, node, timeout_ms);
        if (endpoint && std::find(asked.begin(), asked.end(), endpoint->ToString()) == asked.end()) {
          next = endpoint;
          break;
        }
      }
    }
    const bool retry = reply->status == 503 || (reply->status == 421 && !next);  // an election is under way
    if (next && asked.size() < 6) {
      at = *next;
      continue;
    }
    if (retry && Clock::now() + kPollInterval * 5 < deadline) {
      std::this_thread::sleep_for(kPollInterval * 5);
      at = admin;
      asked.clear();
      continue;
    }
    err << "estuaryctl: " << ErrorOf(*reply) << "\n";
    return 1;
  }
  if (options.clear) {
    if (json) {
      out << accepted.dump() << "\n";
    } else {
      out << fmt::format("partition {}: pin cleared; the placement's first replica leads again\n", options.partition);
    }
    return 0;
  }
  const unsigned from = accepted.value("from", 0u);
  const unsigned to = accepted.value("to", 0u);
  // Watch the old leader's view (it holds a replica) until `to` leads.
  for (;;) {
    const nlohmann::json row = PartitionRow(at, options.partition, timeout_ms);
    if (row.is_object() && row.value("leader", 0u) == to) break;
    if (Clock::now() >= deadline) {
      err << fmt::format("estuaryctl: timeout: partition {} is still led by node {} after {}ms (node {} was asked)\n",
                         options.partition, row.is_object() ? row.value("leader", 0u) : 0u, MsSince(start), to);
      return 1;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  const int64_t took = MsSince(start);
  if (json) {
    out << nlohmann::json{{"partition", options.partition}, {"from", from}, {"to", to}, {"took_ms", took}}.dump()
        << "\n";
  } else {
    out << FormatTransfer(options.partition, from, to, took);
  }
  return 0;
}

int RunDrain(const io::Endpoint& admin, bool undrain, bool wait, bool json, int timeout_ms, std::ostream& out,
             std::ostream& err) {
  const auto start = Clock::now();
  auto status = [&]() -> nlohmann::json {
    auto reply = HttpRequest(admin.host, admin.port, "GET", "/api/cluster/partitions", timeout_ms);
    return reply && reply->status == 200 ? Parse(reply->body) : nlohmann::json();
  };
  const nlohmann::json before = status();
  auto reply = HttpRequest(admin.host, admin.port, undrain ? "DELETE" : "POST", "/api/drain", timeout_ms);
  if (!reply) {
    err << "estuaryctl: cannot reach the admin API at " << admin.ToString() << ": " << reply.error() << "\n";
    return 1;
  }
  if (reply->status != 200) {
    err << "estuaryctl: " << ErrorOf(*reply) << "\n";
    return 1;
  }
  if (undrain || !wait || !before.is_object()) {
    out << (json ? nlohmann::json{{"draining", !undrain}}.dump() + "\n" : reply->body);
    return 0;
  }
  const unsigned node = before.value("node", 0u);
  const size_t led = before.value("leading", size_t{0});
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const nlohmann::json now = status();
    if (now.is_object() && now.value("leading", size_t{1}) == 0) break;
    if (Clock::now() >= deadline) {
      err << fmt::format("estuaryctl: timeout: node {} still leads {} partitions after {}ms\n", node,
                         now.is_object() ? now.value("leading", size_t{0}) : size_t{0}, MsSince(start));
      return 1;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  const int64_t took = MsSince(start);
  if (json) {
    out << nlohmann::json{{"node", node}, {"draining", true}, {"moved", led}, {"took_ms", took}}.dump() << "\n";
  } else {
    out << FormatDrain(node, led, took);
  }
  return 0;
}

}  // namespace estuary::ctl
