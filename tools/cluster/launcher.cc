#include "tools/cluster/launcher.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "tools/cluster/child.h"
#include "tools/cluster/cluster_tls.h"
#include "tools/cluster/http_get.h"
#include "tools/cluster/netns.h"
#include "tools/cluster/signals.h"

namespace estuary::launcher {
namespace {

constexpr const char* kHost = "127.0.0.1";
constexpr const char* kProgram = "estuary-cluster";

std::string Address(uint16_t base, int index) {
  return std::string(kHost) + ":" + std::to_string(base == 0 ? 0 : base + index);
}

// With --netns every host has its own address, so they share the ports:
// the base given, or the usual port.
uint16_t SharedPort(uint16_t base, uint16_t usual) { return base == 0 ? usual : base; }

constexpr int kActiveOctet = 101;   // the balancers' addresses 10.80.X.101, .102
constexpr int kStandbyOctet = 102;

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

std::string SiblingProgram(const std::string& name) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return name;
  return (std::filesystem::path(std::string(self, size_t(n))).parent_path() / name).string();
}

bool WriteSecret(const std::string& path, std::string* error) {
  unsigned char random[32];
  if (::getrandom(random, sizeof(random), 0) != sizeof(random)) {
    *error = "getrandom failed";
    return false;
  }
  std::string hex;
  for (unsigned char byte : random) hex += "0123456789abcdef"[byte >> 4], hex += "0123456789abcdef"[byte & 15];
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0 || ::write(fd, hex.data(), hex.size()) != ssize_t(hex.size())) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

// The text `binary --help` prints (to learn which flags it takes).
std::string HelpText(const std::string& binary) {
  std::string error;
  auto child = Child::Spawn("help", {binary, "--help"}, "/dev/null", &error);
  if (!child) return {};
  std::string text;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (auto line = child->WaitForLine("", deadline)) text += *line + "\n";
  return text;
}

struct Node {
  int id = 0;
  std::unique_ptr<Child> child;
  std::string ready_line;
  std::string mqtt, amqp, admin, cluster;
};

struct Balancer {
  std::string role;
  std::unique_ptr<Child> child;
  std::string ready_line;
};

class Launcher {
 public:
  explicit Launcher(LaunchOptions options) : options_(std::move(options)) {}
  int Run();

 private:
  bool Prepare();
  bool PrepareNetwork();
  // HOST:PORT a node or balancer listens on: 127.0.0.1 and base + index,
  // or with --netns its own address and the shared port.
  std::string ListenAddress(int octet, uint16_t base, uint16_t usual, int index) const;
  std::string NetnsPath(const std::string& host) const { return network_ ? network_->NamespacePath(host) : ""; }
  void RemoveNetwork();
  bool StartNode(int id);
  bool StartBalancer(const std::string& role, uint16_t mqtt, uint16_t amqp, int heartbeat_index,
                     const std::string& peer);
  bool WaitHealthy();
  bool NodeSeesAll(const Node& node);
  void PrintEndpoints() const;
  int Foreground();
  void StopAll();
  // Reaps children that exited; reports each on stderr unless stopping.
  void ReapAll(bool stopping);
  std::vector<Child*> Children() const;

  LaunchOptions options_;
  std::string dir_;
  std::string secret_path_;
  bool secret_flag_ = false;      // estuaryd takes --cluster-secret-file
  bool PrepareClusterTls();
  bool PrepareAdminToken();
  std::string tls_dir_;           // DIR/tls with the nodes' certificates; "" = links in clear text
  std::string token_path_;        // the nodes' --admin-token-file; "" = none
  bool lb_token_flag_ = false;    // estuary-lb takes --admin-token-file
  bool membership_api_ = true;    // /api/cluster/members answered (not 404)
  bool cluster_api_ = true;       // /api/cluster/routes answered
  // Declared before the children so that it outlives them (its destructor
  // removes the namespaces, whose processes must be gone by then).
  std::unique_ptr<HostNetwork> network_;
  std::vector<Node> nodes_;
  std::vector<Balancer> balancers_;
};

bool Launcher::Prepare() {
  std::error_code error_code;
  std::filesystem::create_directories(options_.dir, error_code);
  if (error_code) {
    std::fprintf(stderr, "%s: cannot create %s: %s\n", kProgram, options_.dir.c_str(), error_code.message().c_str());
    return false;
  }
  dir_ = std::filesystem::absolute(options_.dir).lexically_normal().string();
  if (options_.estuaryd.empty()) options_.estuaryd = SiblingProgram("estuaryd");
  if (options_.estuary_lb.empty()) options_.estuary_lb = SiblingProgram("estuary-lb");
  for (const auto& binary : {options_.estuaryd, options_.balancers ? options_.estuary_lb : std::string()}) {
    if (!binary.empty() && ::access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "%s: %s is not an executable (build it, or pass its path)\n", kProgram, binary.c_str());
      return false;
    }
  }
  const int running = ReadPidFile(dir_ + "/cluster.pid");
  if (running > 0 && IsLauncher(running)) {
    std::fprintf(stderr, "%s: a cluster already runs in %s (launcher pid %d); `%s stop --dir %s`\n", kProgram,
                 dir_.c_str(), running, kProgram, options_.dir.c_str());
    return false;
  }
  // estuaryd refuses an admin listener off loopback without a token, and
  // here the admin ports are on the hosts' own addresses.
  if (options_.netns) options_.admin_token = true;
  if (options_.netns && !PrepareNetwork()) return false;
  secret_flag_ = HelpText(options_.estuaryd).find("--cluster-secret-file") != std::string::npos;
  secret_path_ = dir_ + "/cluster.secret";
  std::string error;
  if (!WriteSecret(secret_path_, &error)) {
    std::fprintf(stderr, "%s: %s\n", kProgram, error.c_str());
    return false;
  }
  // The balancer pair authenticates its heartbeats with a secret of its own.
  if (options_.balancers && !WriteSecret(dir_ + "/lb-pair.secret", &error)) {
    std::fprintf(stderr, "%s: %s\n", kProgram, error.c_str());
    return false;
  }
  if (!secret_flag_) {
    std::fprintf(stderr, "%s: warning: %s takes no --cluster-secret-file; nodes start without the secret\n",
                 kProgram, options_.estuaryd.c_str());
  }
  return PrepareClusterTls() && PrepareAdminToken();
}

// The namespaces: first what a crashed run in DIR left (listed in
// DIR/netns.list), then this run's, one per node and per balancer.
bool Launcher::PrepareNetwork() {
  const std::string record = dir_ + "/netns.list";
  std::string report;
  if (!HostNetwork::RemoveRecorded(record, &report)) {
    std::fprintf(stderr, "%s: cannot remove what %s lists:%s\n", kProgram, record.c_str(), report.c_str());
    return false;
  }
  if (!report.empty()) std::fprintf(stderr, "%s: removed a crashed run's leftovers:%s\n", kProgram, report.c_str());
  std::vector<NetnsHost> hosts;
  for (int id = 1; id <= options_.nodes; ++id) hosts.push_back({"n" + std::to_string(id), id});
  if (options_.balancers) hosts.insert(hosts.end(), {{"lb1", kActiveOctet}, {"lb2", kStandbyOctet}});
  std::string error;
  network_ = HostNetwork::Create(record, hosts, &error);
  if (!network_) {
    std::fprintf(stderr, "%s: --netns: %s\n", kProgram, error.c_str());
    return false;
  }
  return true;
}

void Launcher::RemoveNetwork() {
  if (!network_) return;
  std::string report;
  if (!network_->Remove(&report)) {
    std::fprintf(stderr, "%s: could not remove all of the network (see %s/netns.list):%s\n", kProgram,
                 dir_.c_str(), report.c_str());
  } else {
    std::fprintf(stderr, "%s: removed%s\n", kProgram, report.c_str());
  }
  network_.reset();
}

std::string Launcher::ListenAddress(int octet, uint16_t base, uint16_t usual, int index) const {
  if (!network_) return Address(base, index);
  return network_->Address(octet) + ":" + std::to_string(SharedPort(base, usual));
}

bool Launcher::PrepareClusterTls() {
  if (!options_.cluster_tls || !secret_flag_) return true;
  if (HelpText(options_.estuaryd).find("--cluster-tls-cert") == std::string::npos) {
    std::fprintf(stderr, "%s: warning: %s takes no --cluster-tls-cert; the links run in clear text\n", kProgram,
                 options_.estuaryd.c_str());
    return true;
  }
  const std::string openssl = FindOpenssl();
  if (openssl.empty()) {
    std::fprintf(stderr, "%s: warning: no openssl command found; the links run in clear text\n", kProgram);
    return true;
  }
  std::string error;
  std::vector<std::string> addresses;
  for (int id = 1; network_ && id <= options_.nodes; ++id) addresses.push_back(network_->Address(id));
  if (!MakeClusterCertificates(openssl, dir_ + "/tls", options_.nodes, &error, addresses)) {
    std::fprintf(stderr, "%s: cluster TLS certificates: %s\n", kProgram, error.c_str());
    return false;
  }
  tls_dir_ = dir_ + "/tls";
  return true;
}

// The token the nodes require: ours (--admin-token), or one the caller gave
// the nodes after `--`; either way our health checks send it.
bool Launcher::PrepareAdminToken() {
  const auto& flags = options_.estuaryd_flags;
  for (size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == "--admin-token-file") token_path_ = flags[i + 1];
  }
  std::string error;
  if (options_.admin_token && token_path_.empty()) {
    token_path_ = dir_ + "/admin.token";
    if (!WriteSecret(token_path_, &error)) {
      std::fprintf(stderr, "%s: %s\n", kProgram, error.c_str());
      return false;
    }
  }
  if (token_path_.empty()) return true;
  std::ifstream in(token_path_);
  std::string token;
  std::getline(in, token);
  const auto first = token.find_first_not_of(" \t\r");
  const auto last = token.find_last_not_of(" \t\r");
  token = first == std::string::npos ? "" : token.substr(first, last - first + 1);
  if (token.empty()) {
    std::fprintf(stderr, "%s: %s holds no admin token\n", kProgram, token_path_.c_str());
    return false;
  }
  SetBearerToken(token);
  if (options_.balancers) {
    lb_token_flag_ = HelpText(options_.estuary_lb).find("--admin-token-file") != std::string::npos;
  }
  return true;
}

bool Launcher::StartNode(int id) {
  const int index = id - 1;
  const std::string data_dir = dir_ + "/node-" + std::to_string(id);
  std::vector<std::string> argv = {options_.estuaryd, "--node-id", std::to_string(id),
                                   "--mqtt", ListenAddress(id, options_.mqtt_base, 1883, index),
                                   "--amqp", ListenAddress(id, options_.amqp_base, 5672, index),
                                   "--admin", ListenAddress(id, options_.admin_base, 8080, index),
                                   "--cluster", ListenAddress(id, options_.cluster_base, 7000, index),
                                   "--storage", options_.storage};
  if (options_.storage != "memory") argv.insert(argv.end(), {"--data-dir", data_dir});
  if (!options_.sync.empty()) argv.insert(argv.end(), {"--sync", options_.sync});
  if (secret_flag_) argv.insert(argv.end(), {"--cluster-secret-file", secret_path_});
  if (!tls_dir_.empty()) {
    const NodeCertificate files = NodeCertificateIn(tls_dir_, id);
    argv.insert(argv.end(), {"--cluster-tls-cert", files.cert, "--cluster-tls-key", files.key, "--cluster-tls-ca",
                             tls_dir_ + "/ca.pem"});
    // Its certificates name the node (CN=estuary-node-N): each link checks
    // that the peer's is the one of the node its hello names.
    static const bool node_names = HelpText(options_.estuaryd).find("--cluster-tls-node-names") != std::string::npos;
    if (node_names) argv.push_back("--cluster-tls-node-names");
  }
  if (options_.admin_token && token_path_ == dir_ + "/admin.token") {
    argv.insert(argv.end(), {"--admin-token-file", token_path_});
  }
  std::vector<std::string> seeds;
  for (const auto& node : nodes_) seeds.push_back(node.cluster);
  if (!seeds.empty()) argv.insert(argv.end(), {"--seeds", Join(seeds, ",")});
  if (options_.balancers) {
    const std::string from = network_ ? network_->Address(kActiveOctet) + "," + network_->Address(kStandbyOctet) : kHost;
    argv.insert(argv.end(), {"--proxy-from", from});
  }
  argv.insert(argv.end(), options_.estuaryd_flags.begin(), options_.estuaryd_flags.end());

  Node node;
  node.id = id;
  std::string error;
  const std::string log = dir_ + "/node-" + std::to_string(id) + ".log";
  ::truncate(log.c_str(), 0);
  node.child = Child::Spawn("node " + std::to_string(id), argv, log, &error, NetnsPath("n" + std::to_string(id)));
  if (!node.child) {
    std::fprintf(stderr, "%s: node %d: %s\n", kProgram, id, error.c_str());
    return false;
  }
  auto line = node.child->WaitForLine("estuaryd ready ", Clock::now() + std::chrono::milliseconds(options_.ready_timeout_ms));
  if (!line) {
    node.child->Signal(SIGTERM);
    std::fprintf(stderr, "%s: node %d (pid %d) did not print its ready line; see %s\n  %s\n", kProgram, id,
                 node.child->pid(), log.c_str(), Join(argv, " ").c_str());
    return false;
  }
  node.ready_line = *line;
  node.mqtt = WordValue(*line, "mqtt");
  node.amqp = WordValue(*line, "amqp");
  node.admin = WordValue(*line, "admin");
  node.cluster = WordValue(*line, "cluster");
  nodes_.push_back(std::move(node));
  return true;
}

bool Launcher::StartBalancer(const std::string& role, uint16_t mqtt, uint16_t amqp, int heartbeat_index,
                             const std::string& peer) {
  std::vector<std::string> admins;
  for (const auto& node : nodes_) admins.push_back(node.admin);
  const int octet = heartbeat_index == 0 ? kActiveOctet : kStandbyOctet;
  std::vector<std::string> argv = {options_.estuary_lb, "--role", role,
                                   "--mqtt", ListenAddress(octet, mqtt, 1883, 0),
                                   "--amqp", ListenAddress(octet, amqp, 5672, 0),
                                   "--nodes", Join(admins, ","),
                                   "--heartbeat", ListenAddress(octet, options_.lb_heartbeat, 7946, heartbeat_index),
                                   "--pair-secret-file", dir_ + "/lb-pair.secret"};
  if (!peer.empty()) argv.insert(argv.end(), {"--peer", peer});
  if (lb_token_flag_) argv.insert(argv.end(), {"--admin-token-file", token_path_});
  Balancer balancer;
  balancer.role = role;
  std::string error;
  const std::string log = dir_ + "/lb-" + role + ".log";
  ::truncate(log.c_str(), 0);
  balancer.child = Child::Spawn("balancer " + role, argv, log, &error, NetnsPath(heartbeat_index == 0 ? "lb1" : "lb2"));
  if (!balancer.child) {
    std::fprintf(stderr, "%s: balancer %s: %s\n", kProgram, role.c_str(), error.c_str());
    return false;
  }
  auto line = balancer.child->WaitForLine("estuary-lb ready ", Clock::now() + std::chrono::milliseconds(options_.ready_timeout_ms));
  if (!line) {
    std::fprintf(stderr, "%s: balancer %s did not print its ready line; see %s\n", kProgram, role.c_str(), log.c_str());
    return false;
  }
  balancer.ready_line = *line;
  balancers_.push_back(std::move(balancer));
  return true;
}

// The nodes `node` sees up: from /api/cluster/members, or, on a node that
// does not serve it (404), from the links in /api/cluster/routes (itself
// plus every peer whose link is up). nullopt when neither answered.
std::optional<std::set<int>> NodesSeenUp(const Node& node, bool& membership_api, bool& cluster_api) {
  const auto [host, port] = SplitAddress(node.admin);
  std::set<int> up;
  if (membership_api) {
    auto reply = HttpGet(host, port, "/api/cluster/members", std::chrono::seconds(2));
    if (!reply) return std::nullopt;
    if (reply->status == 200) {
      auto json = nlohmann::json::parse(reply->body, nullptr, false);
      const auto& members = json.is_object() && json.contains("members") ? json["members"] : json;
      if (!members.is_array()) return std::nullopt;
      for (const auto& member : members) {
        if (!member.is_object() || !member.contains("node") || !member["node"].is_number_integer()) continue;
        if (member.value("state", "") == "up") up.insert(member["node"].get<int>());
      }
      return up;
    }
    if (reply->status != 404) return std::nullopt;
    membership_api = false;
    std::fprintf(stderr, "%s: warning: no /api/cluster/members on the nodes; waiting on their links instead\n",
                 kProgram);
  }
  auto reply = HttpGet(host, port, "/api/cluster/routes", std::chrono::seconds(2));
  if (reply && reply->status == 404) {
    // A node without the cluster pages (no secret, or from before clustering).
    cluster_api = false;
    std::fprintf(stderr, "%s: warning: the nodes serve no cluster pages; waiting on /healthz only\n", kProgram);
  }
  if (!reply || reply->status != 200) return std::nullopt;
  auto json = nlohmann::json::parse(reply->body, nullptr, false);
  if (!json.is_object()) return std::nullopt;
  up.insert(node.id);
  for (const auto& peer : json.value("peers", nlohmann::json::array())) {
    if (peer.is_object() && peer.value("link", "") == "up") up.insert(peer.value("node", 0));
  }
  return up;
}

bool Launcher::NodeSeesAll(const Node& node) {
  const auto [host, port] = SplitAddress(node.admin);
  auto health = HttpGet(host, port, "/healthz", std::chrono::seconds(2));
  if (!health || health->status != 200) return false;
  if (!cluster_api_) return true;
  auto up = NodesSeenUp(node, membership_api_, cluster_api_);
  if (!cluster_api_) return true;
  if (!up) return false;
  for (const auto& other : nodes_) {
    if (!up->count(other.id)) return false;
  }
  return true;
}

bool Launcher::WaitHealthy() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.ready_timeout_ms);
  std::set<int> pending;
  for (const auto& node : nodes_) pending.insert(node.id);
  while (!pending.empty()) {
    ReapAll(false);
    for (const auto& node : nodes_) {
      if (!node.child->running()) return false;
    }
    if (StopRequested()) return false;
    for (const auto& node : nodes_) {
      if (pending.count(node.id) && NodeSeesAll(node)) pending.erase(node.id);
    }
    if (pending.empty()) break;
    if (Clock::now() >= deadline) {
      std::string names;
      for (int id : pending) names += " " + std::to_string(id);
      std::fprintf(stderr, "%s: after %u ms these nodes were not healthy or did not see every node up:%s\n",
                   kProgram, options_.ready_timeout_ms, names.c_str());
      return false;
    }
    WaitForSignal(std::chrono::milliseconds(100));
  }
  return true;
}

void Launcher::PrintEndpoints() const {
  std::printf("%-5s %-8s %-21s %-21s %-21s %-21s\n", "node", "pid", "mqtt", "amqp", "admin", "cluster");
  for (const auto& node : nodes_) {
    std::printf("%-5d %-8d %-21s %-21s %-21s %-21s\n", node.id, node.child->pid(), node.mqtt.c_str(),
                node.amqp.c_str(), node.admin.c_str(), node.cluster.c_str());
  }
  if (!balancers_.empty()) {
    std::printf("\n%-8s %-8s %-21s %-21s %-21s\n", "lb", "pid", "mqtt", "amqp", "heartbeat");
    for (const auto& balancer : balancers_) {
      const auto& line = balancer.ready_line;
      std::printf("%-8s %-8d %-21s %-21s %-21s\n", balancer.role.c_str(), balancer.child->pid(),
                  WordValue(line, "mqtt").c_str(), WordValue(line, "amqp").c_str(),
                  WordValue(line, "heartbeat").c_str());
    }
  }
  std::printf("\n");
  for (const auto& node : nodes_) std::printf("%s\n", node.ready_line.c_str());
  for (const auto& balancer : balancers_) std::printf("%s\n", balancer.ready_line.c_str());
  if (!balancers_.empty()) {
    const std::string mqtt = WordValue(balancers_[0].ready_line, "mqtt");
    const auto [host, port] = SplitAddress(mqtt);
    std::printf("clients: mqtt://%s amqp://%s (active balancer; the standby accepts once it has taken over)\n",
                mqtt.c_str(), WordValue(balancers_[0].ready_line, "amqp").c_str());
    std::printf("  try: mosquitto_sub -h %s -p %u -t '#' -v\n", host.c_str(), unsigned(port));
  }
  if (!tls_dir_.empty()) {
    std::printf("cluster links: mutual TLS, certificates and CA in %s (node-N.pem, ca.pem)\n", tls_dir_.c_str());
  }
  if (!token_path_.empty()) {
    std::printf("admin API: needs the token in %s (estuaryctl --token-file %s --admin %s ...)\n",
                token_path_.c_str(), token_path_.c_str(), nodes_.empty() ? "" : nodes_[0].admin.c_str());
  }
  if (network_) {
    std::printf("network: a namespace per host (%sn1..n%zu%s), bridge %s %s/24 on this machine; removed at stop "
                "(listed in %s/netns.list)\n",
                network_->tag().c_str(), nodes_.size(), balancers_.empty() ? "" : ", lb1, lb2",
                network_->bridge().c_str(), network_->bridge_address().c_str(), dir_.c_str());
  }
  std::printf("logs and data: %s (node-N.log, node-N/); stop: Ctrl-C or `%s stop --dir %s`\n", dir_.c_str(),
              kProgram, dir_.c_str());
  std::printf("%s ready nodes=%zu dir=%s pid=%d%s\n", kProgram, nodes_.size(), dir_.c_str(), int(::getpid()),
              network_ ? (" netns=" + network_->tag()).c_str() : "");
  std::fflush(stdout);
}

std::vector<Child*> Launcher::Children() const {
  std::vector<Child*> children;
  for (const auto& balancer : balancers_) children.push_back(balancer.child.get());
  for (const auto& node : nodes_) children.push_back(node.child.get());
  return children;
}

void Launcher::ReapAll(bool stopping) {
  for (Child* child : Children()) {
    if (!child->running()) continue;
    child->Pump();
    auto status = child->TryReap();
    if (status && !stopping) {
      std::fprintf(stderr, "%s: %s (pid %d) exited with status %d; see %s\n", kProgram, child->name().c_str(),
                   child->pid(), *status, child->log_path().c_str());
    }
  }
}

int Launcher::Foreground() {
  for (;;) {
    std::vector<pollfd> fds = {{SignalFd(), POLLIN, 0}};
    for (Child* child : Children()) {
      if (child->stdout_fd() >= 0) fds.push_back({child->stdout_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 1000);
    DrainSignals();
    ReapAll(false);
    if (StopRequested()) return 0;
    bool any_node = false;
    for (const auto& node : nodes_) any_node = any_node || node.child->running();
    if (!any_node) {
      std::fprintf(stderr, "%s: every node exited; stopping\n", kProgram);
      return 1;
    }
  }
}

void Launcher::StopAll() {
  for (Child* child : Children()) child->Signal(SIGTERM);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.grace_ms);
  for (;;) {
    ReapAll(true);
    bool running = false;
    for (Child* child : Children()) running = running || child->running();
    if (!running || Clock::now() >= deadline) break;
    WaitForSignal(std::chrono::milliseconds(100));
  }
  std::string summary;
  for (Child* child : Children()) {
    if (child->running()) {
      child->Signal(SIGKILL);
      summary += " " + child->name() + "=killed";
    } else {
      summary += " " + child->name() + "=" + std::to_string(child->exit_status().value_or(-1));
    }
  }
  std::fprintf(stderr, "%s: stopped (exit statuses:%s)\n", kProgram, summary.c_str());
}

int Launcher::Run() {
  if (!InstallSignalHandlers()) {
    std::fprintf(stderr, "%s: cannot install signal handlers\n", kProgram);
    return 1;
  }
  if (options_.netns) {
    if (const std::string why = HostNetwork::Unavailable(); !why.empty()) {
      std::fprintf(stderr, "%s: %s\n", kProgram, why.c_str());
      return 2;
    }
  }
  if (!Prepare()) {
    RemoveNetwork();
    return 1;
  }
  bool started = true;
  for (int id = 1; id <= options_.nodes && started && !StopRequested(); ++id) started = StartNode(id);
  started = started && !StopRequested() && WaitHealthy();
  if (started && options_.balancers) {
    // The standby's heartbeat address, when known before it starts.
    std::string standby;
    if (network_) standby = ListenAddress(kStandbyOctet, options_.lb_heartbeat, 7946, 1);
    if (!network_ && options_.lb_heartbeat) standby = Address(options_.lb_heartbeat, 1);
    started = StartBalancer("active", options_.lb_mqtt, options_.lb_amqp, 0, standby);
    const std::string active_heartbeat = started ? WordValue(balancers_[0].ready_line, "heartbeat") : "";
    started = started && StartBalancer("standby", options_.lb_mqtt2, options_.lb_amqp2, 1, active_heartbeat);
  }
  if (!started || StopRequested()) {
    StopAll();
    RemoveNetwork();
    return StopRequested() ? 0 : 1;
  }
  const std::string pid_file = dir_ + "/cluster.pid";
  std::ofstream(pid_file) << ::getpid() << "\n";
  PrintEndpoints();
  const int status = Foreground();
  StopAll();
  RemoveNetwork();
  ::unlink(pid_file.c_str());
  return status;
}

}  // namespace

int RunStart(const LaunchOptions& options) { return Launcher(options).Run(); }

}  // namespace estuary::launcher
