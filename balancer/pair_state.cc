#include "balancer/pair_state.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace estuary::balancer {

const char* ToString(Role role) { return role == Role::kActive ? "active" : "standby"; }

std::string EncodeHeartbeat(const Heartbeat& heartbeat) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const SharedNode& node : heartbeat.nodes) {
    // A node that never reported has an infinite score: JSON has no such number.
    nodes.push_back({{"admin", node.admin}, {"healthy", node.healthy}, {"drained", node.drained},
                     {"score", std::isfinite(node.score) ? node.score : -1.0}});
  }
  nlohmann::json out = {{"v", 1},
                        {"epoch", heartbeat.epoch},
                        {"role", ToString(heartbeat.role)},
                        {"priority", heartbeat.priority},
                        {"id", heartbeat.id},
                        {"nodes", std::move(nodes)}};
  if (!heartbeat.boot.empty()) {
    out["boot"] = heartbeat.boot;
    out["seq"] = heartbeat.seq;
    out["sent_ms"] = heartbeat.sent_ms;
  }
  return out.dump();
}

Expected<Heartbeat, std::string> DecodeHeartbeat(std::string_view bytes) {
  auto parsed = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const char* why) { return MakeError(std::string("heartbeat: ") + why); };
  if (parsed.is_discarded() || !parsed.is_object()) return bad("not a JSON object");
  // Typed reads only: nlohmann's value() throws on a wrong type, and this
  // runs in a libuv callback on bytes from the network.
  auto flag = [](const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_boolean() && it->get<bool>();
  };
  auto number = [](const nlohmann::json& object, const char* key) {
    auto it = object.find(key);
    return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  const auto version = parsed.find("v");
  if (version == parsed.end() || !version->is_number_unsigned() || version->get<uint64_t>() != 1) {
    return bad("unknown version");
  }
  for (const char* key : {"epoch", "role", "id"}) {
    if (!parsed.contains(key)) return bad("missing fields");
  }
  const auto& epoch = parsed["epoch"];
  const auto& role = parsed["role"];
  const auto& id = parsed["id"];
  if (!epoch.is_number_unsigned() || !role.is_string() || !id.is_string()) return bad("missing fields");
  Heartbeat heartbeat;
  heartbeat.epoch = epoch.get<uint64_t>();
  const std::string role_text = role.get<std::string>();
  if (role_text != "active" && role_text != "standby") return bad("unknown role");
  heartbeat.role = role_text == "active" ? Role::kActive : Role::kStandby;
  heartbeat.id = id.get<std::string>();
  if (parsed.contains("priority") && parsed["priority"].is_number_unsigned()) {
    heartbeat.priority = parsed["priority"].get<uint32_t>();
  }
  if (parsed.contains("boot")) {
    const auto& boot = parsed["boot"];
    const auto seq = parsed.find("seq");
    const auto sent = parsed.find("sent_ms");
    if (!boot.is_string() || seq == parsed.end() || !seq->is_number_unsigned() || sent == parsed.end() ||
        !sent->is_number_integer()) {
      return bad("bad boot, seq or sent_ms");
    }
    heartbeat.boot = boot.get<std::string>();
    heartbeat.seq = seq->get<uint64_t>();
    heartbeat.sent_ms = sent->get<int64_t>();
  }
  if (parsed.contains("nodes") && parsed["nodes"].is_array()) {
    for (const auto& node : parsed["nodes"]) {
      if (!node.is_object() || !node.contains("admin") || !node["admin"].is_string()) return bad("bad node entry");
      heartbeat.nodes.push_back(
          {node["admin"].get<std::string>(), flag(node, "healthy"), flag(node, "drained"), number(node, "score")});
    }
  }
  return heartbeat;
}

PairState::PairState(Role start_role, std::string id, PairOptions options, int64_t now_ms)
    : id_(std::move(id)), options_(options), started_ms_(now_ms), last_active_heard_ms_(now_ms) {
  priority_ = start_role == Role::kActive ? 1 : 0;
  deciding_ = start_role == Role::kActive;
  role_ = Role::kStandby;
}

bool PairState::Become(Role role) {
  const bool changed = role != role_;
  role_ = role;
  if (role == Role::kActive && changed) ++epoch_;
  return changed;
}

bool PairState::PeerWins(const Heartbeat& heartbeat) const {
  if (heartbeat.epoch != epoch_) return heartbeat.epoch > epoch_;
  if (heartbeat.priority != priority_) return heartbeat.priority > priority_;
  return heartbeat.id > id_;
}

bool PairState::OnHeartbeat(const Heartbeat& heartbeat, int64_t now_ms) {
  if (heartbeat.id == id_) return false;  // our own datagram looped back
  if (heartbeat.role != Role::kActive) {
    epoch_ = std::max(epoch_, heartbeat.epoch);
    return false;
  }
  last_active_heard_ms_ = now_ms;
  if (role_ == Role::kActive && !PeerWins(heartbeat)) return false;  // it will step down
  deciding_ = false;
  epoch_ = std::max(epoch_, heartbeat.epoch);
  return Become(Role::kStandby);
}

bool PairState::Tick(int64_t now_ms) {
  if (role_ == Role::kActive) return false;
  if (deciding_) {
    if (now_ms - started_ms_ < options_.startup_wait_ms) return false;
    deciding_ = false;
    return Become(Role::kActive);
  }
  if (now_ms - last_active_heard_ms_ < options_.takeover_timeout_ms) return false;
  return Become(Role::kActive);
}

int64_t PairState::NextDeadline(int64_t now_ms) const {
  if (role_ == Role::kActive) return options_.takeover_timeout_ms;
  const int64_t due = deciding_ ? started_ms_ + options_.startup_wait_ms
                                : last_active_heard_ms_ + options_.takeover_timeout_ms;
  return std::max<int64_t>(0, due - now_ms);
}

}  // namespace estuary::balancer
