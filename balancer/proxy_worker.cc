#include "balancer/proxy_worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

namespace estuary::balancer {
namespace {

// An accepted socket in flight to a worker: closed unless the worker took it
// (a mailbox dropped at shutdown destroys the function holding it).
struct PendingSocket {
  explicit PendingSocket(int fd_in) : fd(fd_in) {}
  ~PendingSocket() {
    if (fd >= 0) ::close(fd);
  }
  PendingSocket(const PendingSocket&) = delete;
  PendingSocket& operator=(const PendingSocket&) = delete;
  int Release() { return std::exchange(fd, -1); }
  int fd;
};

}  // namespace

ProxyWorker::ProxyWorker(size_t index, WorkerEvents events)
    : index_(index), events_(std::move(events)), loop_(std::make_unique<io::UvLoop>()), rotation_(index) {
  host_.choose = [this](Service service, std::string_view client_id, const std::vector<std::string>& exclude) {
    return Choose(service, client_id, exclude);
  };
  host_.dial_failed = [this](const std::string& admin, int status) {
    if (events_.dial_failed) events_.dial_failed(admin, status);
  };
  host_.finished = [this](ProxyConnection* connection, const ProxyStats& stats) { OnFinished(connection, stats); };
}

ProxyWorker::~ProxyWorker() {
  if (thread_.joinable()) {
    Stop();
    thread_.join();
  }
  // On this thread, after the join: closes the connections left (without
  // calling back) while host_ and the rest are still alive.
  loop_.reset();
}

void ProxyWorker::Start() {
  thread_ = std::thread([this] { loop_->Run(); });
}

void ProxyWorker::Publish(std::shared_ptr<const NodeTable> nodes) {
  loop_->mailbox().Send([this, nodes = std::move(nodes)]() mutable { nodes_ = std::move(nodes); });
}

void ProxyWorker::Adopt(int fd, Service service, const ProxyOptions& options) {
  connections_.fetch_add(1, std::memory_order_relaxed);
  adopted_total_.fetch_add(1, std::memory_order_relaxed);
  auto socket = std::make_shared<PendingSocket>(fd);
  loop_->mailbox().Send([this, socket, service, options] { StartConnection(socket->Release(), service, options); });
}

void ProxyWorker::AbortAll(std::function<void()> done) {
  loop_->mailbox().Send([this, done = std::move(done)]() mutable {
    if (open_.empty()) return done();
    on_idle_.push_back(std::move(done));
    std::vector<ProxyConnection*> open(open_.begin(), open_.end());
    for (ProxyConnection* connection : open) connection->Abort();
  });
}

void ProxyWorker::Stop() {
  loop_->mailbox().Send([this] { loop_->Stop(); });
}

void ProxyWorker::StartConnection(int fd, Service service, const ProxyOptions& options) {
  open_.insert(ProxyConnection::Start(*loop_, fd, service, options, host_));
}

std::optional<Choice> ProxyWorker::Choose(Service service, std::string_view client_id,
                                          const std::vector<std::string>& exclude) {
  if (!nodes_) return std::nullopt;
  auto choice = nodes_->Pick(service, client_id, loop_->NowMs(), exclude, rotation_++);
  if (!choice) spdlog::warn("no eligible node for a new {} connection", ServiceName(service));
  return choice;
}

void ProxyWorker::OnFinished(ProxyConnection* connection, const ProxyStats& stats) {
  open_.erase(connection);
  connections_.fetch_sub(1, std::memory_order_relaxed);
  if (stats.node.empty() || stats.outcome.rfind("dropped", 0) == 0 || stats.outcome.rfind("no node", 0) == 0) {
    refused_total_.fetch_add(1, std::memory_order_relaxed);
  }
  spdlog::debug("worker {}: client {} via node {}: {} ({} bytes up, {} down)", index_, stats.client, stats.node,
                stats.outcome, stats.bytes_to_node, stats.bytes_to_client);
  if (!open_.empty() || on_idle_.empty()) return;
  std::vector<std::function<void()>> callbacks;
  callbacks.swap(on_idle_);
  for (auto& callback : callbacks) callback();
}

}  // namespace estuary::balancer
