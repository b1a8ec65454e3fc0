#include "conformance/support/tcp_relay.h"

#include "conformance/support/raw_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace estuary::testing {
namespace {

// Writes all of `data` to a blocking socket.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

constexpr char kCut = 'c';
constexpr char kStop = 's';

}  // namespace

std::unique_ptr<TcpRelay> TcpRelay::Start(const std::string& target_host, uint16_t target_port) {
  std::unique_ptr<TcpRelay> relay(new TcpRelay());
  relay->target_host_ = target_host;
  relay->target_port_ = target_port;
  relay->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (relay->listen_fd_ < 0) return nullptr;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(relay->listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(relay->listen_fd_, 16) != 0 ||
      ::getsockname(relay->listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return nullptr;
  }
  relay->port_ = ntohs(address.sin_port);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) return nullptr;
  relay->wake_read_ = wake[0];
  relay->wake_write_ = wake[1];
  relay->thread_ = std::thread([raw = relay.get()] { raw->Run(); });
  return relay;
}

TcpRelay::~TcpRelay() {
  if (thread_.joinable()) {
    Wake(kStop);
    thread_.join();
  }
  for (size_t i = pairs_.size(); i > 0; --i) ClosePair(i - 1);
  for (int fd : {listen_fd_, wake_read_, wake_write_}) {
    if (fd >= 0) ::close(fd);
  }
}

void TcpRelay::Cut() {
  std::unique_lock<std::mutex> lock(cut_mutex_);
  const uint64_t wanted = ++cuts_requested_;
  lock.unlock();
  Wake(kCut);
  lock.lock();
  cut_done_.wait(lock, [&] { return cuts_done_ >= wanted; });
}

void TcpRelay::Wake(char command) {
  while (::write(wake_write_, &command, 1) < 0 && errno == EINTR) {
  }
}

void TcpRelay::Run() {
  for (;;) {
    std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Pair& pair : pairs_) {
      fds.push_back({pair.client, POLLIN, 0});
      fds.push_back({pair.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) {
      char command = 0;
      if (::read(wake_read_, &command, 1) == 1) {
        if (command == kStop) return;
        for (size_t i = pairs_.size(); i > 0; --i) ClosePair(i - 1);
        std::lock_guard<std::mutex> lock(cut_mutex_);
        cuts_done_ = cuts_requested_;
        cut_done_.notify_all();
        continue;
      }
    }
    if (fds[1].revents & POLLIN) AcceptOne();
    // Walk backwards so that closing a pair does not shift the ones to come.
    for (size_t i = pairs_.size(); i > 0; --i) {
      const size_t index = i - 1;
      const pollfd& from_client = fds[2 + 2 * index];
      const pollfd& from_server = fds[3 + 2 * index];
      bool alive = true;
      if (from_client.revents != 0) alive = Forward(pairs_[index].client, pairs_[index].server);
      if (alive && from_server.revents != 0) alive = Forward(pairs_[index].server, pairs_[index].client);
      if (!alive) ClosePair(index);
    }
  }
}

void TcpRelay::AcceptOne() {
  const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  const int server = ConnectTcp(target_host_, target_port_);
  if (server < 0) {
    ::close(client);
    return;
  }
  int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pairs_.push_back({client, server});
}

bool TcpRelay::Forward(int from, int to) {
  char buffer[65536];
  const ssize_t n = ::recv(from, buffer, sizeof(buffer), 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  return WriteAll(to, buffer, static_cast<size_t>(n));
}

void TcpRelay::ClosePair(size_t index) {
  ::close(pairs_[index].client);
  ::close(pairs_[index].server);
  pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace estuary::testing
