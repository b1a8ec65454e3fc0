#include "conformance/cluster/cluster_process.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "conformance/support/wait_for.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::testing {
namespace {

using nlohmann::json;

// Members change on gossip ticks: ask a node again after this long.
constexpr std::chrono::milliseconds kPollInterval{50};

// Gives a failed wait's last observation to the caller; returns false.
bool Explain(const std::string& last, std::string* why) {
  if (why) *why = last;
  return false;
}

}  // namespace

// --- NodeProcess ---

std::unique_ptr<NodeProcess> NodeProcess::Start(const Options& options, std::string* error,
                                                std::chrono::milliseconds timeout) {
  ChildProcess::Options child;
  child.argv = {options.binary,  "--node-id", std::to_string(options.id),
                "--mqtt",        options.mqtt, "--amqp", options.amqp,
                "--admin",       options.admin, "--cluster", options.cluster};
  if (!options.data_dir.empty()) {
    child.argv.insert(child.argv.end(), {"--data-dir", options.data_dir, "--storage", "bitcask", "--sync", "always"});
  }
  if (!options.secret_file.empty()) {
    child.argv.insert(child.argv.end(), {"--cluster-secret-file", options.secret_file});
  }
  if (!options.seeds.empty()) {
    std::string seeds;
    for (const auto& seed : options.seeds) seeds += (seeds.empty() ? "" : ",") + seed;
    child.argv.insert(child.argv.end(), {"--seeds", seeds});
  }
  child.argv.insert(child.argv.end(), options.extra_flags.begin(), options.extra_flags.end());
  child.stderr_path = options.log_path;

  std::unique_ptr<NodeProcess> node(new NodeProcess());
  node->options_ = options;
  node->child_ = ChildProcess::Spawn(child, error);
  if (!node->child_) return nullptr;
  std::string line = node->child_->WaitForLine("estuaryd ready ", timeout).value_or("");
  if (line.rfind("estuaryd ready ", 0) != 0) line.clear();
  node->ready_line_ = line;
  node->mqtt_port_ = PortOf(WordValue(line, "mqtt"));
  node->amqp_port_ = PortOf(WordValue(line, "amqp"));
  node->admin_port_ = PortOf(WordValue(line, "admin"));
  node->cluster_address_ = WordValue(line, "cluster");
  if (node->mqtt_port_ == 0 || node->admin_port_ == 0 || node->cluster_address_.empty()) {
    const int status = node->Stop(std::chrono::seconds(5));
    if (error) {
      *error = "node " + std::to_string(options.id) + ": no ready line (got '" + line + "', exit status " +
               std::to_string(status) + "); stderr:\n" + node->Log();
    }
    return nullptr;
  }
  return node;
}

NodeProcess::~NodeProcess() = default;  // ChildProcess kills a node still running

std::string NodeProcess::Log() const {
  std::ifstream in(options_.log_path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// --- HTTP and the admin documents ---

std::optional<AdminReply> AdminGet(uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  AdminReply reply = HttpRequest("127.0.0.1", port, "GET", path, timeout);
  if (reply.status == 0) return std::nullopt;
  return reply;
}

std::set<std::pair<int, std::string>> ParseRoutes(const std::string& text) {
  std::set<std::pair<int, std::string>> out;
  const json document = json::parse(text, nullptr, false);
  if (!document.is_object()) return out;
  const int self = document.value("node", -1);
  for (const auto& route : document.value("local_routes", json::array())) {
    if (route.is_object() && route.contains("filter")) out.emplace(self, route["filter"].get<std::string>());
  }
  for (const auto& peer : document.value("peers", json::array())) {
    if (!peer.is_object() || !peer.contains("node")) continue;
    for (const auto& route : peer.value("routes", json::array())) {
      if (route.is_object() && route.contains("filter")) {
        out.emplace(peer["node"].get<int>(), route["filter"].get<std::string>());
      }
    }
  }
  return out;
}

std::map<int, std::string> ParseMembers(const std::string& text) {
  std::map<int, std::string> out;
  const json document = json::parse(text, nullptr, false);
  if (document.is_discarded()) return out;
  const json& members = document.is_object() && document.contains("members") ? document["members"] : document;
  if (!members.is_array()) return out;
  for (const auto& member : members) {
    if (member.is_object() && member.contains("node") && member["node"].is_number_integer()) {
      out[member["node"].get<int>()] = member.value("state", "");
    }
  }
  return out;
}

// --- ClusterProcess ---

std::string ClusterProcess::WriteSecret(const std::string& name) const {
  unsigned char random[32];
  if (::getrandom(random, sizeof(random), 0) != sizeof(random)) return {};
  std::string hex;
  for (unsigned char byte : random) {
    hex += "0123456789abcdef"[byte >> 4];
    hex += "0123456789abcdef"[byte & 15];
  }
  const std::string path = dir_ + "/" + name;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return {};
  const bool written = ::write(fd, hex.data(), hex.size()) == ssize_t(hex.size());
  ::close(fd);
  return written ? path : std::string();
}

std::unique_ptr<ClusterProcess> ClusterProcess::Start(const Options& options, std::string* error) {
  std::unique_ptr<ClusterProcess> cluster(new ClusterProcess());
  cluster->options_ = options;
  char pattern[] = "/tmp/estuary-cluster-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    if (error) *error = "mkdtemp failed";
    return nullptr;
  }
  cluster->dir_ = pattern;
  cluster->secret_file_ = cluster->WriteSecret("cluster.secret");
  if (options.admin_token) {
    cluster->token_file_ = cluster->WriteSecret("admin.token");
    std::ifstream in(cluster->token_file_);
    std::string token;
    std::getline(in, token);
    SetAdminToken(token);
  }
  for (int id = 1; id <= options.nodes; ++id) {
    if (!cluster->AddNode(error, id)) return nullptr;
  }
  return cluster;
}

ClusterProcess::~ClusterProcess() {
  nodes_.clear();
  if (!token_file_.empty()) SetAdminToken({});
  if (!dir_.empty() && !std::getenv("ESTUARY_KEEP_CLUSTER_DIR")) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

NodeProcess::Options ClusterProcess::NodeOptions(int id) const {
  NodeProcess::Options options;
  options.id = id;
  options.binary = std::string(ESTUARY_BIN_DIR) + "/estuaryd";
  options.secret_file = secret_file_;
  if (options_.durable) options.data_dir = dir_ + "/node-" + std::to_string(id);
  options.log_path = dir_ + "/node-" + std::to_string(id) + ".log";
  options.extra_flags = options_.extra_flags;
  if (!token_file_.empty()) options.extra_flags.insert(options.extra_flags.end(), {"--admin-token-file", token_file_});
  return options;
}

std::vector<int> ClusterProcess::running_ids() const {
  std::vector<int> ids;
  for (const auto& [id, node] : nodes_) {
    if (node->running()) ids.push_back(id);
  }
  return ids;
}

NodeProcess* ClusterProcess::AddNode(std::string* error, int id, const std::string& secret_file) {
  if (id == 0) id = nodes_.empty() ? 1 : nodes_.rbegin()->first + 1;
  NodeProcess::Options options = NodeOptions(id);
  if (!secret_file.empty()) options.secret_file = secret_file;
  for (int other : running_ids()) options.seeds.push_back(nodes_.at(other)->cluster_address());
  auto node = NodeProcess::Start(options, error);
  if (!node) return nullptr;
  // A restart takes back the same ports (the others know its addresses).
  options.mqtt = "127.0.0.1:" + std::to_string(node->mqtt_port());
  options.amqp = "127.0.0.1:" + std::to_string(node->amqp_port());
  options.admin = "127.0.0.1:" + std::to_string(node->admin_port());
  options.cluster = node->cluster_address();
  started_with_[id] = options;
  nodes_[id] = std::move(node);
  return nodes_[id].get();
}

NodeProcess* ClusterProcess::Restart(int id, std::string* error) {
  NodeProcess::Options options = started_with_.at(id);
  if (nodes_.count(id)) nodes_.at(id)->Kill();
  options.seeds.clear();
  for (int other : running_ids()) options.seeds.push_back(nodes_.at(other)->cluster_address());
  auto node = NodeProcess::Start(options, error);
  if (!node) return nullptr;
  nodes_[id] = std::move(node);
  return nodes_[id].get();
}

std::optional<std::map<int, std::string>> ClusterProcess::Members(int observer) {
  auto reply = AdminGet(node(observer).admin_port(), "/api/cluster/members");
  if (reply && reply->status == 200) return ParseMembers(reply->body);
  if (!reply || reply->status != 404) return std::nullopt;
  // A node without membership: itself up, and each peer as its link is.
  reply = AdminGet(node(observer).admin_port(), "/api/cluster/routes");
  if (!reply || reply->status != 200) return std::nullopt;
  const json document = json::parse(reply->body, nullptr, false);
  if (!document.is_object()) return std::nullopt;
  std::map<int, std::string> members = {{observer, "up"}};
  for (const auto& peer : document.value("peers", json::array())) {
    if (peer.is_object() && peer.contains("node")) members[peer["node"].get<int>()] = peer.value("link", "");
  }
  return members;
}

std::optional<std::set<std::pair<int, std::string>>> ClusterProcess::Routes(int observer) {
  auto reply = AdminGet(node(observer).admin_port(), "/api/cluster/routes");
  if (!reply || reply->status != 200) return std::nullopt;
  return ParseRoutes(reply->body);
}

bool ClusterProcess::WaitMembers(const std::set<int>& up, std::chrono::milliseconds timeout, std::string* why) {
  std::string last;
  auto all_see_up = [&] {
    for (int observer : running_ids()) {
      auto members = Members(observer);
      std::set<int> seen_up;
      if (members) {
        for (const auto& [id, state] : *members) {
          if (state == "up") seen_up.insert(id);
        }
      }
      if (!members || seen_up != up) {
        last = "node " + std::to_string(observer) + " sees up:";
        for (int id : seen_up) last += " " + std::to_string(id);
        if (!members) last += " (no members document)";
        return false;
      }
    }
    return true;
  };
  return WaitFor(all_see_up, timeout, kPollInterval) || Explain(last, why);
}

bool ClusterProcess::WaitMembersUp(std::chrono::milliseconds timeout, std::string* why) {
  const auto ids = running_ids();
  return WaitMembers(std::set<int>(ids.begin(), ids.end()), timeout, why);
}

bool ClusterProcess::WaitMemberState(int member, const std::string& state, std::chrono::milliseconds timeout,
                                     std::string* why) {
  std::string last;
  auto all_list_state = [&] {
    for (int observer : running_ids()) {
      if (observer == member) continue;
      auto members = Members(observer);
      const std::string seen = members && members->count(member) ? members->at(member) : "(absent)";
      if (seen != state) {
        last = "node " + std::to_string(observer) + " lists node " + std::to_string(member) + " as " + seen;
        return false;
      }
    }
    return true;
  };
  return WaitFor(all_list_state, timeout, kPollInterval) || Explain(last, why);
}

bool ClusterProcess::WaitVoters(int node_id, size_t voters, std::chrono::milliseconds timeout, std::string* why) {
  std::string last = "no partitions document";
  auto formed = [&] {
    auto reply = AdminGet(node(node_id).admin_port(), "/api/cluster/partitions");
    if (!reply) return false;
    const nlohmann::json document = nlohmann::json::parse(reply->body, nullptr, false);
    if (document.is_discarded() || !document.contains("open")) return false;
    size_t hosted = 0;
    for (const auto& entry : document.at("open")) {
      if (!entry.contains("role")) continue;
      ++hosted;
      const size_t have = entry.value("voters", nlohmann::json::array()).size();
      if (have != voters) {
        last = "partition " + std::to_string(entry.value("partition", 0u)) + " has " + std::to_string(have) + " voters";
        return false;
      }
    }
    last = "node " + std::to_string(node_id) + " hosts no partition";
    return hosted != 0;
  };
  return WaitFor(formed, timeout, kPollInterval) || Explain(last, why);
}

bool ClusterProcess::WaitRoute(int route_node, const std::string& filter, bool present,
                               std::chrono::milliseconds timeout, std::string* why) {
  std::string last;
  auto all_see_route = [&] {
    for (int observer : running_ids()) {
      if (observer == route_node) continue;
      auto routes = Routes(observer);
      if (!routes || bool(routes->count({route_node, filter})) != present) {
        last = "node " + std::to_string(observer) + (routes ? " routes:" : " has no routes document");
        if (routes) {
          for (const auto& [id, route] : *routes) last += " " + std::to_string(id) + "=" + route;
        }
        return false;
      }
    }
    return true;
  };
  return WaitFor(all_see_route, timeout, kPollInterval) || Explain(last, why);
}

}  // namespace estuary::testing
