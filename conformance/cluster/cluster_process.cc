#include "conformance/cluster/cluster_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "conformance/support/raw_client.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::testing {
namespace {

using nlohmann::json;

int MillisecondsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

std::string Word(const std::string& line, const std::string& key) {
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  }
  return {};
}

uint16_t PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? 0 : uint16_t(std::strtoul(address.c_str() + colon + 1, nullptr, 10));
}

// Reads stdout until the ready line, EOF or the deadline.
std::string ReadReadyLine(int fd, Clock::time_point deadline) {
  std::string buffered;
  for (;;) {
    size_t newline;
    while ((newline = buffered.find('\n')) != std::string::npos) {
      std::string line = buffered.substr(0, newline);
      buffered.erase(0, newline + 1);
      if (line.rfind("estuaryd ready ", 0) == 0) return line;
    }
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return {};
    char chunk[512];
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    buffered.append(chunk, size_t(n));
  }
}

}  // namespace

// --- NodeProcess ---

std::unique_ptr<NodeProcess> NodeProcess::Start(const Options& options, std::string* error,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::string> args = {options.binary,  "--node-id", std::to_string(options.id),
                                   "--mqtt",        options.mqtt, "--amqp", options.amqp,
                                   "--admin",       options.admin, "--cluster", options.cluster};
  if (!options.data_dir.empty()) {
    args.insert(args.end(), {"--data-dir", options.data_dir, "--storage", "bitcask", "--sync", "always"});
  }
  if (!options.secret_file.empty()) args.insert(args.end(), {"--cluster-secret-file", options.secret_file});
  if (!options.seeds.empty()) {
    std::string seeds;
    for (const auto& seed : options.seeds) seeds += (seeds.empty() ? "" : ",") + seed;
    args.insert(args.end(), {"--seeds", seeds});
  }
  args.insert(args.end(), options.extra_flags.begin(), options.extra_flags.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int pipe_fds[2];
  if (log_fd < 0 || ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    if (error) *error = "cannot open " + options.log_path + " or a pipe";
    return nullptr;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    // Client sockets the test holds must not stay open in the node.
    ::close_range(3, ~0U, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ::close(log_fd);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    if (error) *error = "fork failed";
    return nullptr;
  }
  std::unique_ptr<NodeProcess> node(new NodeProcess());
  node->options_ = options;
  node->pid_ = pid;
  node->stdout_fd_ = pipe_fds[0];
  const std::string line = ReadReadyLine(node->stdout_fd_, Clock::now() + timeout);
  node->ready_line_ = line;
  node->mqtt_port_ = PortOf(Word(line, "mqtt"));
  node->amqp_port_ = PortOf(Word(line, "amqp"));
  node->admin_port_ = PortOf(Word(line, "admin"));
  node->cluster_address_ = Word(line, "cluster");
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

NodeProcess::~NodeProcess() {
  Kill();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::string NodeProcess::Log() const {
  std::ifstream in(options_.log_path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int NodeProcess::Stop(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  return Reap(timeout);
}

void NodeProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int NodeProcess::Reap(std::chrono::milliseconds timeout) {
  // The child holds the only write end of its stdout pipe: EOF = it exited.
  const auto deadline = Clock::now() + timeout;
  bool exited = false;
  while (!exited && stdout_fd_ >= 0) {
    pollfd poll_fd{stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char chunk[512];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    exited = n <= 0;
  }
  int status = 0;
  int result = -1;
  if (exited && ::waitpid(pid_, &status, 0) == pid_) {
    result = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    pid_ = -1;
  } else {
    Kill();
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdout_fd_ = -1;
  return result;
}

// --- HTTP and the admin documents ---

std::optional<AdminReply> AdminGet(uint16_t port, const std::string& path, std::chrono::milliseconds timeout) {
  const int fd = ConnectTcp("127.0.0.1", port);
  if (fd < 0) return std::nullopt;
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const auto deadline = Clock::now() + timeout;
  std::string received;
  bool closed = false;
  while (!closed) {
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char chunk[8192];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      closed = true;
      break;
    }
    received.append(chunk, size_t(n));
    // Stop as soon as Content-Length bytes of body are in.
    const size_t end = received.find("\r\n\r\n");
    const size_t field = received.find("ontent-Length:");
    if (end != std::string::npos && field != std::string::npos && field < end) {
      const size_t length = std::strtoul(received.c_str() + field + 14, nullptr, 10);
      closed = received.size() - end - 4 >= length;
    }
  }
  ::close(fd);
  const size_t end = received.find("\r\n\r\n");
  if (!closed || received.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return std::nullopt;
  return AdminReply{std::atoi(received.c_str() + received.find(' ') + 1), received.substr(end + 4)};
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
  for (int id = 1; id <= options.nodes; ++id) {
    if (!cluster->AddNode(error, id)) return nullptr;
  }
  return cluster;
}

ClusterProcess::~ClusterProcess() {
  nodes_.clear();
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
  const auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    bool all = true;
    for (int observer : running_ids()) {
      auto members = Members(observer);
      std::set<int> seen_up;
      if (members) {
        for (const auto& [id, state] : *members) {
          if (state == "up") seen_up.insert(id);
        }
      }
      if (!members || seen_up != up) {
        all = false;
        last = "node " + std::to_string(observer) + " sees up:";
        for (int id : seen_up) last += " " + std::to_string(id);
        if (!members) last += " (no members document)";
        break;
      }
    }
    if (all) return true;
    if (Clock::now() >= deadline) {
      if (why) *why = last;
      return false;
    }
    // Members change on gossip ticks; ask again after a short poll wait.
    ::poll(nullptr, 0, 50);
  }
}

bool ClusterProcess::WaitMembersUp(std::chrono::milliseconds timeout, std::string* why) {
  const auto ids = running_ids();
  return WaitMembers(std::set<int>(ids.begin(), ids.end()), timeout, why);
}

bool ClusterProcess::WaitMemberState(int member, const std::string& state, std::chrono::milliseconds timeout,
                                     std::string* why) {
  const auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    bool all = true;
    for (int observer : running_ids()) {
      if (observer == member) continue;
      auto members = Members(observer);
      const std::string seen = members && members->count(member) ? members->at(member) : "(absent)";
      if (seen != state) {
        all = false;
        last = "node " + std::to_string(observer) + " lists node " + std::to_string(member) + " as " + seen;
        break;
      }
    }
    if (all) return true;
    if (Clock::now() >= deadline) {
      if (why) *why = last;
      return false;
    }
    ::poll(nullptr, 0, 50);
  }
}

bool ClusterProcess::WaitRoute(int route_node, const std::string& filter, bool present,
                               std::chrono::milliseconds timeout, std::string* why) {
  const auto deadline = Clock::now() + timeout;
  std::string last;
  for (;;) {
    bool all = true;
    for (int observer : running_ids()) {
      if (observer == route_node) continue;
      auto routes = Routes(observer);
      if (!routes || bool(routes->count({route_node, filter})) != present) {
        all = false;
        last = "node " + std::to_string(observer) + (routes ? " routes:" : " has no routes document");
        if (routes) {
          for (const auto& [id, route] : *routes) last += " " + std::to_string(id) + "=" + route;
        }
        break;
      }
    }
    if (all) return true;
    if (Clock::now() >= deadline) {
      if (why) *why = last;
      return false;
    }
    ::poll(nullptr, 0, 50);
  }
}

}  // namespace estuary::testing
