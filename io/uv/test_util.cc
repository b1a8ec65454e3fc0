#include "io/uv/test_util.h"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace estuary::io::testing {

bool RunUntil(UvLoop& loop, const std::function<bool()>& done, int64_t timeout_ms) {
  bool timed_out = false;
  TimerId deadline = loop.AddTimer(timeout_ms, [&] { timed_out = true; });
  while (!done() && !timed_out) uv_run(loop.raw(), UV_RUN_ONCE);
  loop.CancelTimer(deadline);
  return done();
}

LoopThread::LoopThread() {
  thread_ = std::thread([this] {
    UvLoop loop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      loop_ = &loop;
    }
    ready_.notify_all();
    loop.Run();
  });
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [this] { return loop_ != nullptr; });
}

LoopThread::~LoopThread() {
  UvLoop* loop = loop_;
  loop->mailbox().Send([loop] { loop->Stop(); });
  thread_.join();
}

void LoopThread::RunSync(std::function<void(UvLoop&)> fn) {
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  UvLoop* loop = loop_;
  loop->mailbox().Send([&, loop] {
    fn(*loop);
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return finished; });
}

BlockingClient::BlockingClient(uint16_t port, int receive_timeout_ms) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  timeval timeout{receive_timeout_ms / 1000, (receive_timeout_ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

BlockingClient::~BlockingClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool BlockingClient::SendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void BlockingClient::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

std::string BlockingClient::ReadToEnd() {
  return ReadUntil([](const std::string&) { return false; });
}

std::string BlockingClient::ReadUntil(std::string_view needle) {
  return ReadUntil([needle](const std::string& got) { return got.find(needle) != std::string::npos; });
}

std::string BlockingClient::ReadUntil(const std::function<bool(const std::string&)>& done) {
  std::string out;
  char buffer[16 * 1024];
  while (!done(out)) {
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

bool BlockingClient::WaitForClose() {
  char buffer[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

}  // namespace estuary::io::testing
