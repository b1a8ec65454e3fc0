#include "balancer/balancer.h"

#include "balancer/http_probe.h"

#include <fmt/format.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

extern char** environ;

namespace estuary::balancer {
namespace {

constexpr int64_t kPairTickMs = 20;  // listener retry while active (TickPair)
constexpr size_t kMaxDatagram = 64 * 1024;
constexpr size_t kMaxNodes = 1024;  // nodes a partner's heartbeats may add
constexpr int64_t kRejectWarnEveryMs = 1000;

// The wall clock that heartbeat timestamps use (heartbeat_auth.h).
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Expected<sockaddr_storage, std::string> NumericSockaddr(const io::Endpoint& at) {
  sockaddr_storage out{};
  const std::string host = at.host == "localhost" ? "127.0.0.1" : at.host;
  if (uv_ip4_addr(host.c_str(), at.port, reinterpret_cast<sockaddr_in*>(&out)) == 0) return out;
  if (uv_ip6_addr(host.c_str(), at.port, reinterpret_cast<sockaddr_in6*>(&out)) == 0) return out;
  return MakeError(at.ToString() + ": not a numeric address");
}

std::string FormatSockaddr(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    uv_ip4_name(in, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
  uv_ip6_name(in6, host, sizeof(host));
  return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
}

uint16_t BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

// Runs a short command (ip addr ...) to completion; start-up and takeover
// paths only. Returns its exit status, or -1 if it could not run.
int RunCommand(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Starts a command and forgets it; libuv reaps it and the handle is freed in
// its close callback.
void SpawnDetached(io::UvLoop& loop, const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  auto* process = new uv_process_t{};
  uv_stdio_container_t stdio[3] = {};
  for (auto& slot : stdio) slot.flags = UV_IGNORE;
  uv_process_options_t options{};
  options.file = args[0];
  options.args = args.data();
  options.stdio = stdio;
  options.stdio_count = 3;
  options.exit_cb = [](uv_process_t* handle, int64_t status, int) {
    spdlog::info("gratuitous ARP sender exited with status {}", status);
    uv_close(reinterpret_cast<uv_handle_t*>(handle), [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
  };
  const int rc = uv_spawn(loop.raw(), process, &options);
  if (rc != 0) {
    spdlog::warn("cannot run {}: {}", argv[0], uv_strerror(rc));
    uv_close(reinterpret_cast<uv_handle_t*>(process), [](uv_handle_t* h) { delete reinterpret_cast<uv_process_t*>(h); });
  }
}

}  // namespace

Balancer::Balancer(io::UvLoop& loop, BalancerConfig config, std::function<void(const std::string&)> announce)
    : loop_(loop),
      config_(std::move(config)),
      announce_(std::move(announce)),
      table_(config_.selection),
      alive_(std::make_shared<Alive>(Alive{this})) {
  for (const auto& node : config_.nodes) table_.AddNode(node.ToString());
  for (const auto& admin : config_.drain) table_.SetDrained(admin, true);
  peer_ = config_.peer;
}

Balancer::~Balancer() {
  alive_->balancer = nullptr;
  // Joins every worker; connections still open (Stop() not called or not
  // finished) are closed by their loops without calling back.
  workers_.clear();
  CloseListeners();
  if (mqtt_reserved_ >= 0) ::close(mqtt_reserved_);
  if (amqp_reserved_ >= 0) ::close(amqp_reserved_);
  CloseReservedPorts();
  for (io::TimerId timer : {poll_timer_, heartbeat_timer_, tick_timer_}) {
    if (timer != 0) loop_.CancelTimer(timer);
  }
  if (udp_ != nullptr) {
    uv_close(reinterpret_cast<uv_handle_t*>(udp_), [](uv_handle_t* handle) { delete reinterpret_cast<uv_udp_t*>(handle); });
  }
}

Expected<void, std::string> Balancer::Start() {
  if (auto bound = BindHeartbeat(); !bound) return bound;
  pair_.emplace(config_.role, config_.heartbeat.ToString(), config_.pair, loop_.NowMs());
  if (!config_.pair_secret.empty()) {
    auth_.emplace(config_.pair_secret, NewBootId(), HeartbeatAuthOptions{config_.heartbeat_max_age_ms});
    spdlog::info("heartbeats authenticated (HMAC-SHA256, boot {})", auth_->boot_id());
  } else {
    spdlog::warn("heartbeats are NOT authenticated: anyone who can send UDP to {} can make this balancer step "
                 "down (use --pair-secret-file)",
                 config_.heartbeat.ToString());
  }
  if (config_.vip.empty()) {
    if (auto reserved = Reserve(config_.mqtt, mqtt_reserved_); !reserved) return reserved;
    if (auto reserved = Reserve(config_.amqp, amqp_reserved_); !reserved) return reserved;
    if (config_.mqtt_ws) {
      if (auto reserved = Reserve(*config_.mqtt_ws, mqtt_ws_reserved_); !reserved) return reserved;
    }
    if (config_.amqp_ws) {
      if (auto reserved = Reserve(*config_.amqp_ws, amqp_ws_reserved_); !reserved) return reserved;
    }
  }
  if (auto admin = StartAdmin(); !admin) return admin;
  StartWorkers();
  PollNodes();
  SendHeartbeat();
  TickPair();  // schedules the next tick itself (one chain, whose id Stop() and ~Balancer cancel)
  return {};
}

// ---- service ports ---------------------------------------------------------

// Binds without listening: the port is ours (port 0 resolves now, for the
// ready line) but connections to it are refused until the balancer is active.
Expected<void, std::string> Balancer::Reserve(io::Endpoint& at, int& fd) {
  auto address = NumericSockaddr(at);
  if (!address) return MakeError(address.error());
  fd = ::socket(address->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  const socklen_t length = address->ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*address), length) != 0) {
    const int error = errno;
    ::close(fd);
    fd = -1;
    return MakeError(fmt::format("bind {}: {}", at.ToString(), std::strerror(error)));
  }
  at.port = BoundPort(fd);
  return {};
}

bool Balancer::AllListening() const {
  return mqtt_listener_ && amqp_listener_ && (!config_.mqtt_ws || mqtt_ws_listener_) &&
         (!config_.amqp_ws || amqp_ws_listener_);
}

// The WebSocket ports: reserved while standby, as the two others.
void Balancer::ReserveServicePorts() {
  if (config_.mqtt_ws) Reserve(*config_.mqtt_ws, mqtt_ws_reserved_);
  if (config_.amqp_ws) Reserve(*config_.amqp_ws, amqp_ws_reserved_);
}

void Balancer::CloseReservedPorts() {
  for (int* fd : {&mqtt_ws_reserved_, &amqp_ws_reserved_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

bool Balancer::OpenListeners() {
  if (AllListening()) return true;
  if (!config_.vip.empty()) RunVipCommand(true);
  auto listen = [this](const io::Endpoint& at, Service service, std::unique_ptr<io::TcpListener>& out) {
    if (out) return true;
    auto listener = io::TcpListener::Listen(loop_, at, [this, service](int fd) { Accept(fd, service); });
    if (!listener) {
      spdlog::error("cannot accept on {}: {}", at.ToString(), listener.error());
      return false;
    }
    out = std::move(*listener);
    return true;
  };
  return listen(config_.mqtt, Service::kMqtt, mqtt_listener_) && listen(config_.amqp, Service::kAmqp, amqp_listener_) &&
         (!config_.mqtt_ws || listen(*config_.mqtt_ws, Service::kMqttWs, mqtt_ws_listener_)) &&
         (!config_.amqp_ws || listen(*config_.amqp_ws, Service::kAmqpWs, amqp_ws_listener_));
}

void Balancer::CloseListeners() {
  mqtt_listener_.reset();
  amqp_listener_.reset();
  mqtt_ws_listener_.reset();
  amqp_ws_listener_.reset();
}

void Balancer::RunVipCommand(bool add) {
  const std::string address = config_.vip;
  const int status = RunCommand({"ip", "addr", add ? "add" : "del", address, "dev", config_.vip_interface});
  spdlog::info("virtual IP {} {} {}: ip exit status {}", address, add ? "added to" : "removed from",
               config_.vip_interface, status);
  if (!add || status != 0) return;
  // Gratuitous ARP, as keepalived sends, so neighbours update their caches.
  const std::string ip = address.substr(0, address.find('/'));
  // arping waits for its own deadline: run it beside the loop, not in it.
  SpawnDetached(loop_, {"arping", "-q", "-U", "-c", "1", "-w", "1", "-I", config_.vip_interface, ip});
}

void Balancer::Accept(int fd, Service service) {
  if (stopping_ || pair_->role() != Role::kActive || workers_.empty()) {
    ::close(fd);
    ++refused_total_;
    return;
  }
  ++accepted_total_;
  ProxyOptions options = config_.proxy;
  const std::string name = ServiceName(service);
  options.send_proxy_header =
      std::find(config_.proxy_header.begin(), config_.proxy_header.end(), name) != config_.proxy_header.end();
  LeastBusyWorker().Adopt(fd, service, options);
}

// ---- the data plane ----------------------------------------------------------

// Fewest live connections wins (the count includes sockets handed over and
// not yet adopted); ties rotate, so connections opened one after another
// land on different workers.
ProxyWorker& Balancer::LeastBusyWorker() {
  const size_t count = workers_.size();
  ProxyWorker* best = nullptr;
  for (size_t i = 0; i < count; ++i) {
    ProxyWorker& worker = *workers_[(next_worker_ + i) % count];
    if (best == nullptr || worker.connections() < best->connections()) best = &worker;
  }
  next_worker_ = (best->index() + 1) % count;
  return *best;
}

void Balancer::StartWorkers() {
  unsigned threads = config_.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  WorkerEvents events;
  // Called on a worker's thread: the table belongs to this one.
  events.dial_failed = [alive = alive_, &loop = loop_](const std::string& admin, int status) {
    loop.mailbox().Send([alive, admin, status] {
      if (alive->balancer != nullptr) alive->balancer->OnDialFailed(admin, status);
    });
  };
  for (unsigned i = 0; i < threads; ++i) {
    workers_.push_back(std::make_unique<ProxyWorker>(i, events));
    workers_.back()->Start();
  }
  spdlog::info("data plane: {} worker thread{}", threads, threads == 1 ? "" : "s");
  PublishNodes();
}

// One immutable copy for all workers; it shares the per-node counters with
// table_, so smoothing holds across threads (node_table.h).
void Balancer::PublishNodes() {
  if (workers_.empty()) return;
  std::shared_ptr<const NodeTable> snapshot = table_.Snapshot();
  for (auto& worker : workers_) worker->Publish(snapshot);
}

void Balancer::OnDialFailed(const std::string& admin, int status) {
  spdlog::warn("node {}: connect failed ({}); no new connections until it answers a probe", admin,
               uv_err_name(status));
  table_.OnFailure(admin, std::string("connect: ") + uv_err_name(status));
  PublishNodes();
}

size_t Balancer::connection_count() const {
  size_t total = 0;
  for (const auto& worker : workers_) total += worker->connections();
  return total;
}

uint64_t Balancer::RefusedTotal() const {
  uint64_t total = refused_total_;
  for (const auto& worker : workers_) total += worker->refused_total();
  return total;
}

void Balancer::OnWorkerIdle() {
  if (workers_pending_ == 0 || --workers_pending_ > 0 || !on_stopped_) return;
  auto done = std::move(on_stopped_);
  on_stopped_ = nullptr;
  loop_.Post(std::move(done));
}

// ---- node probes -----------------------------------------------------------

void Balancer::PollNodes() {
  poll_timer_ = loop_.AddTimer(config_.poll_interval_ms, [this] { PollNodes(); });
  for (const NodeState& node : table_.nodes()) Probe(node.admin);
}

void Balancer::Probe(const std::string& admin) {
  if (probing_.count(admin) != 0) return;
  auto endpoint = io::ParseEndpoint(admin);
  if (!endpoint) return;
  probing_.insert(admin);
  auto fail = [this, admin](const std::string& why) {
    probing_.erase(admin);
    if (!table_.Has(admin)) return;  // removed from --nodes (SIGHUP) meanwhile
    for (const NodeState& node : table_.nodes()) {
      if (node.admin == admin && node.probe_ok) spdlog::warn("node {} unhealthy: {}", admin, why);
    }
    table_.OnFailure(admin, why);
    PublishNodes();
  };
  // A probe may answer after the balancer is gone (a test destroying it on
  // a loop that goes on): `alive` says so, on this thread.
  HttpGet(loop_, *endpoint, "GET", "/healthz", config_.probe_timeout_ms,
          [this, alive = alive_, admin, endpoint = *endpoint, fail](const HttpAnswer& health) {
            if (alive->balancer == nullptr || stopping_) return;
            if (health.status != 200 || health.body.rfind("ok", 0) != 0) {
              return fail(health.status == 0 ? health.error : fmt::format("/healthz answered {}", health.status));
            }
            HttpGet(loop_, endpoint, "GET", "/api/load", config_.probe_timeout_ms,
                    [this, alive, admin, fail](const HttpAnswer& load) {
                      if (alive->balancer == nullptr || stopping_) return;
                      if (load.status != 200) {
                        return fail(load.status == 0 ? load.error : fmt::format("/api/load answered {}", load.status));
                      }
                      auto report = ParseLoadReport(load.body);
                      if (!report) return fail(report.error());
                      probing_.erase(admin);
                      if (!table_.Has(admin)) return;  // removed from --nodes (SIGHUP) meanwhile
                      bool was_ok = false;
                      for (const NodeState& node : table_.nodes()) {
                        if (node.admin == admin) was_ok = node.probe_ok;
                      }
                      if (!was_ok) spdlog::info("node {} (id {}) healthy", admin, report->node_id);
                      table_.OnReport(admin, std::move(*report), loop_.NowMs());
                      PublishNodes();
                    },
                    config_.admin_token, config_.admin_tls);
          },
          /*bearer=*/{}, config_.admin_tls);
}

// ---- the pair --------------------------------------------------------------

Expected<void, std::string> Balancer::BindHeartbeat() {
  auto address = NumericSockaddr(config_.heartbeat);
  if (!address) return MakeError("heartbeat: " + address.error());
  udp_ = new uv_udp_t;
  uv_udp_init(loop_.raw(), udp_);
  udp_->data = this;
  int rc = uv_udp_bind(udp_, reinterpret_cast<const sockaddr*>(&*address), UV_UDP_REUSEADDR);
  if (rc != 0) return MakeError(fmt::format("heartbeat {}: {}", config_.heartbeat.ToString(), uv_strerror(rc)));
  sockaddr_storage bound{};
  int length = sizeof(bound);
  uv_udp_getsockname(udp_, reinterpret_cast<sockaddr*>(&bound), &length);
  config_.heartbeat.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  rc = uv_udp_recv_start(
      udp_,
      [](uv_handle_t*, size_t, uv_buf_t* buf) {
        static char buffer[kMaxDatagram];
        *buf = uv_buf_init(buffer, sizeof(buffer));
      },
      [](uv_udp_t* handle, ssize_t nread, const uv_buf_t* buf, const sockaddr* from, unsigned) {
        if (nread <= 0 || from == nullptr) return;
        static_cast<Balancer*>(handle->data)->OnDatagram(std::string_view(buf->base, size_t(nread)), from);
      });
  if (rc != 0) return MakeError(fmt::format("heartbeat: {}", uv_strerror(rc)));
  return {};
}

void Balancer::SendHeartbeat() {
  heartbeat_timer_ = loop_.AddTimer(config_.heartbeat_interval_ms, [this] { SendHeartbeat(); });
  if (peer_.empty() || stopping_) return;
  Heartbeat heartbeat{pair_->epoch(), pair_->role(), pair_->priority(), pair_->id(), {}};
  for (const NodeState& node : table_.nodes()) {
    heartbeat.nodes.push_back({node.admin, table_.Eligible(node, Service::kMqtt, loop_.NowMs()),
                               node.drained_here || (node.report && node.report->draining), table_.ScoreOf(node)});
  }
  auto endpoint = io::ParseEndpoint(peer_);
  if (!endpoint) return;
  auto address = NumericSockaddr(*endpoint);
  if (!address) return;
  const std::string bytes = auth_ ? auth_->Seal(std::move(heartbeat), WallMs()) : EncodeHeartbeat(heartbeat);
  uv_buf_t buf = uv_buf_init(const_cast<char*>(bytes.data()), static_cast<unsigned>(bytes.size()));
  uv_udp_try_send(udp_, &buf, 1, reinterpret_cast<const sockaddr*>(&*address));
}

void Balancer::OnDatagram(std::string_view bytes, const sockaddr* from) {
  Expected<Heartbeat, Rejected> heartbeat = [&]() -> Expected<Heartbeat, Rejected> {
    if (auth_) return auth_->Open(bytes, WallMs());
    auto plain = DecodeHeartbeat(bytes);
    if (!plain) return MakeError(Rejected{HeartbeatReject::kMalformed, plain.error()});
    return std::move(*plain);
  }();
  if (!heartbeat) return RejectHeartbeat(heartbeat.error(), from);
  ++heartbeats_accepted_;
  if (config_.peer.empty()) peer_ = FormatSockaddr(from);
  const size_t known = table_.nodes().size();
  for (const SharedNode& node : heartbeat->nodes) {
    // Share the node list, within a bound (without a secret the datagram is
    // not authenticated).
    if (table_.nodes().size() < kMaxNodes && io::ParseEndpoint(node.admin)) table_.AddNode(node.admin);
  }
  if (table_.nodes().size() != known) PublishNodes();
  if (pair_->OnHeartbeat(*heartbeat, loop_.NowMs())) OnRoleChange();
  if (!ready_announced_ && !pair_->deciding()) OnRoleChange();
}

// Dropped, counted per reason, and logged at warn at most once a second
// (a flood of forged datagrams must not flood the log).
void Balancer::RejectHeartbeat(const Rejected& rejected, const sockaddr* from) {
  ++heartbeats_rejected_[static_cast<int>(rejected.reason)];
  const int64_t now = loop_.NowMs();
  if (!auth_ && rejected.reason == HeartbeatReject::kMalformed) {
    // As before the secret existed: a stray datagram, not an attack sign.
    spdlog::debug("ignored a datagram from {}: {}", FormatSockaddr(from), rejected.detail);
    return;
  }
  if (reject_warned_ms_ >= 0 && now - reject_warned_ms_ < kRejectWarnEveryMs) {
    ++rejects_unwarned_;
    return;
  }
  spdlog::warn("dropped a heartbeat from {}: {} ({}){}", FormatSockaddr(from), ToString(rejected.reason),
               rejected.detail,
               rejects_unwarned_ == 0 ? "" : fmt::format("; {} more dropped without a warning", rejects_unwarned_));
  reject_warned_ms_ = now;
  rejects_unwarned_ = 0;
}

// The pair's next decision is due at a known time (PairState::NextDeadline:
// the end of the start-up wait, or the takeover timeout after the last
// heartbeat heard from an active), so the tick is a timer set for then rather
// than a fixed 20 ms period: an idle balancer wakes about once a second for
// it instead of 50 times. Heartbeats only move the deadline later, so a tick
// that comes early changes nothing and sets the next one. While active with a
// listener not open (its address busy) it retries every kPairTickMs.
void Balancer::TickPair() {
  tick_timer_ = 0;
  if (stopping_) return;
  const bool changed = pair_->Tick(loop_.NowMs());
  if (changed || (!ready_announced_ && !pair_->deciding())) OnRoleChange();
  if (pair_->role() == Role::kActive && !AllListening()) OpenListeners();
  int64_t delay = std::max<int64_t>(1, pair_->NextDeadline(loop_.NowMs()));
  if (pair_->role() == Role::kActive && !AllListening()) delay = std::min(delay, kPairTickMs);
  tick_timer_ = loop_.AddTimer(delay, [this] { TickPair(); });
}

void Balancer::OnRoleChange() {
  if (pair_->role() == Role::kActive) {
    OpenListeners();
    if (mqtt_reserved_ >= 0) ::close(mqtt_reserved_);
    if (amqp_reserved_ >= 0) ::close(amqp_reserved_);
    mqtt_reserved_ = amqp_reserved_ = -1;
    CloseReservedPorts();
  } else if (listening()) {
    CloseListeners();
    if (!config_.vip.empty()) RunVipCommand(false);
    if (config_.vip.empty()) {
      Reserve(config_.mqtt, mqtt_reserved_);
      Reserve(config_.amqp, amqp_reserved_);
      ReserveServicePorts();
    }
  }
  spdlog::info("role {} at epoch {}", ToString(pair_->role()), pair_->epoch());
  if (!ready_announced_) {
    ready_announced_ = true;
    announce_(ReadyLine());
  } else {
    // silent_ms: how long this node had heard nothing from an active peer
    // when the role changed (a takeover waits takeover_timeout_ms of it).
    announce_(fmt::format("estuary-lb role={} epoch={} silent_ms={}", ToString(pair_->role()), pair_->epoch(),
                          loop_.NowMs() - pair_->last_active_heard_ms()));
  }
}

std::string Balancer::ReadyLine() const {
  std::string line = fmt::format("estuary-lb ready role={} mqtt={} amqp={} heartbeat={}", ToString(pair_->role()),
                                 config_.mqtt.ToString(), config_.amqp.ToString(), config_.heartbeat.ToString());
  if (config_.mqtt_ws) line += " mqtt_ws=" + config_.mqtt_ws->ToString();
  if (config_.amqp_ws) line += " amqp_ws=" + config_.amqp_ws->ToString();
  if (admin_) line += fmt::format(" admin={}", io::ParseEndpoint(config_.admin)->host + ":" + std::to_string(admin_port_));
  return line;
}

void Balancer::Stop(std::function<void()> done) {
  if (stopping_) return;
  stopping_ = true;
  const bool was_active = listening();
  CloseListeners();
  if (admin_) admin_->Close();
  if (was_active && !config_.vip.empty()) RunVipCommand(false);
  for (io::TimerId* timer : {&poll_timer_, &heartbeat_timer_, &tick_timer_}) {
    if (*timer != 0) loop_.CancelTimer(*timer);
    *timer = 0;
  }
  if (udp_ != nullptr) {
    uv_close(reinterpret_cast<uv_handle_t*>(udp_), [](uv_handle_t* handle) { delete reinterpret_cast<uv_udp_t*>(handle); });
    udp_ = nullptr;
  }
  on_stopped_ = std::move(done);
  workers_pending_ = workers_.size();
  if (workers_pending_ == 0) {
    auto callback = std::move(on_stopped_);
    on_stopped_ = nullptr;
    loop_.Post(std::move(callback));
    return;
  }
  // Each worker resets its connections and says so through the main loop.
  for (auto& worker : workers_) {
    worker->AbortAll([alive = alive_, &loop = loop_] {
      loop.mailbox().Send([alive] {
        if (alive->balancer != nullptr) alive->balancer->OnWorkerIdle();
      });
    });
  }
}

}  // namespace estuary::balancer
