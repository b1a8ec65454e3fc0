#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "base/check.h"
#include "io/uv/sockaddr.h"
#include "io/uv/tcp.h"

namespace estuary::io {
namespace {

constexpr size_t kDefaultLowWatermark = 64 * 1024;
constexpr size_t kDefaultHighWatermark = 1024 * 1024;
constexpr int64_t kDefaultCloseTimeoutMs = 5000;
// A write buffer that grew past this is freed after its write completes,
// so one burst does not pin memory on an idle connection.
constexpr size_t kKeepBufferCapacity = 256 * 1024;

enum class Phase {
  kIdle,        // no handle yet
  kConnecting,  // handle initialised, resolving or connecting
  kOpen,
  kDraining,    // Close() or peer EOF: writing the queue, then FIN, then peer FIN
  kClosing,     // uv_close called
  kClosed,      // close callback ran
};

}  // namespace

class TcpConnection::State final : public UvLoop::HandleOwner {
 public:
  State(UvLoop& loop_in, TcpConnection& owner_in) : loop(loop_in), owner(owner_in) {}
  ~State() { ESTUARY_CHECK(phase == Phase::kIdle || phase == Phase::kClosed); }

  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&tcp); }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
  size_t queued() const { return pending.size() + in_flight.size(); }
  bool accepting_writes() const { return phase == Phase::kOpen || phase == Phase::kConnecting; }

  void InitHandle(std::shared_ptr<TcpConnection> self);
  void StartConnect(const sockaddr_storage& address);
  void StartResolve(const Endpoint& to);
  void FailConnectLater(int status);
  void CompleteConnect(int status);

  void SetHandlers(Handlers replacement);
  template <typename Fn>
  void Dispatch(Fn&& call);
  void UpdateReading();
  void OnReadResult(ssize_t nread, const uv_buf_t* buf);
  void OnPeerEof();

  void MarkDirty();
  void ScheduleFlush();
  void RunScheduledFlush();
  void IssueWrite();
  void OnWriteDone(int status);

  void BeginDrain(int status);
  void ContinueDrain();
  void OnShutdownDone(int status);
  void OnCloseTimeout();
  void CancelCloseTimer();

  void Fail(int status);
  void CloseHandle(int status);
  void ResetHandle(int status);
  void CloseForShutdown() override;
  static void OnClosed(uv_handle_t* handle);

  UvLoop& loop;
  TcpConnection& owner;
  uv_tcp_t tcp{};
  uv_connect_t connect_req{};
  uv_write_t write_req{};
  uv_shutdown_t shutdown_req{};
  Phase phase = Phase::kIdle;
  std::shared_ptr<TcpConnection> keep_alive;  // handle initialised .. close callback
  std::shared_ptr<TcpConnection> flush_ref;   // while a flush is posted
  Handlers handlers;
  std::optional<Handlers> next_handlers;  // SetHandlers from inside a handler
  int dispatch_depth = 0;
  bool handlers_set = false;
  std::function<void(int)> on_connected;
  std::string pending;    // accumulating
  std::string in_flight;  // owned by the uv_write in flight
  size_t low_watermark = kDefaultLowWatermark;
  size_t high_watermark = kDefaultHighWatermark;
  bool above_high = false;
  bool write_in_flight = false;
  bool flush_scheduled = false;
  bool want_reading = true;
  bool reading = false;
  bool peer_eof = false;
  bool shutdown_sent = false;
  bool shutdown_done = false;
  bool notify_close = true;
  int close_status = 0;
  int64_t close_timeout_ms = kDefaultCloseTimeoutMs;
  TimerId close_timer = 0;
  uint64_t writes_issued = 0;
  mutable std::string peer;  // cached by peer_address()
};

// ---- set-up ----------------------------------------------------------------

void TcpConnection::State::InitHandle(std::shared_ptr<TcpConnection> self) {
  ESTUARY_CHECK(uv_tcp_init(loop.raw(), &tcp) == 0);
  tcp.data = this;
  connect_req.data = this;
  write_req.data = this;
  shutdown_req.data = this;
  keep_alive = std::move(self);
  phase = Phase::kConnecting;
  loop.RegisterOwner(this);
}

void TcpConnection::State::StartConnect(const sockaddr_storage& address) {
  uv_tcp_nodelay(&tcp, 1);
  int rc = uv_tcp_connect(&connect_req, &tcp, reinterpret_cast<const sockaddr*>(&address),
                          [](uv_connect_t* req, int status) {
                            static_cast<State*>(req->data)->CompleteConnect(status);
                          });
  if (rc != 0) FailConnectLater(rc);
}

namespace {

struct ResolveRequest {
  uv_getaddrinfo_t req;
  std::shared_ptr<TcpConnection> connection;  // alive until the resolver answers
  std::function<void(int, const addrinfo*)> done;
};

}  // namespace

void TcpConnection::State::StartResolve(const Endpoint& to) {
  auto* request = new ResolveRequest;
  request->req.data = request;
  request->connection = keep_alive;
  request->done = [this](int status, const addrinfo* found) {
    if (phase != Phase::kConnecting) return;  // closed meanwhile; OnClosed told on_connected
    if (status != 0 || found == nullptr) return CompleteConnect(status != 0 ? status : UV_EAI_NONAME);
    sockaddr_storage address{};
    std::memcpy(&address, found->ai_addr, found->ai_addrlen);
    StartConnect(address);
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
  std::string port = std::to_string(to.port);
  int rc = uv_getaddrinfo(
      loop.raw(), &request->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* found) {
        std::unique_ptr<ResolveRequest> owned(static_cast<ResolveRequest*>(req->data));
        owned->done(status, found);
        uv_freeaddrinfo(found);
      },
      to.host.c_str(), port.c_str(), &hints);
  if (rc != 0) {
    delete request;
    FailConnectLater(rc);
  }
}

// on_connected never runs inside Connect(): the caller has no pointer yet.
void TcpConnection::State::FailConnectLater(int status) {
  loop.Post([self = keep_alive, status] {
    State& state = *self->state_;
    if (state.phase == Phase::kConnecting) state.CompleteConnect(status);
  });
}

void TcpConnection::State::CompleteConnect(int status) {
  std::function<void(int)> callback = std::move(on_connected);
  on_connected = nullptr;
  if (status == 0 && phase == Phase::kConnecting) {
    phase = Phase::kOpen;
    uv_tcp_nodelay(&tcp, 1);  // again, now that the socket surely exists
    if (callback) callback(0);
    UpdateReading();
    if (!pending.empty()) MarkDirty();
    return;
  }
  if (status == 0) status = UV_ECANCELED;
  if (callback) callback(status);
  CloseHandle(status);
}

// ---- handlers and reading --------------------------------------------------

void TcpConnection::State::SetHandlers(Handlers replacement) {
  handlers_set = true;
  if (dispatch_depth > 0) {
    next_handlers = std::move(replacement);
  } else {
    handlers = std::move(replacement);
  }
  UpdateReading();
}

// Calls a handler; a SetHandlers from inside it must not destroy the
// std::function that is running, so the replacement waits until it returns.
template <typename Fn>
void TcpConnection::State::Dispatch(Fn&& call) {
  ++dispatch_depth;
  call(handlers);
  --dispatch_depth;
  if (dispatch_depth == 0 && next_handlers) {
    handlers = std::move(*next_handlers);
    next_handlers.reset();
  }
}

void TcpConnection::State::UpdateReading() {
  bool should = (phase == Phase::kOpen && want_reading && handlers_set) ||
                (phase == Phase::kDraining && !peer_eof);
  if (should == reading) return;
  if (!should) {
    uv_read_stop(stream());
    reading = false;
    return;
  }
  int rc = uv_read_start(
      stream(),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        *buf = static_cast<State*>(handle->data)->loop.read_buffer();
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
        static_cast<State*>(stream->data)->OnReadResult(nread, buf);
      });
  if (rc != 0) return Fail(rc);
  reading = true;
}

void TcpConnection::State::OnReadResult(ssize_t nread, const uv_buf_t* buf) {
  if (nread > 0) {
    // While draining, bytes are read only to see the peer's FIN.
    if (phase != Phase::kOpen) return;
    std::string_view bytes(buf->base, static_cast<size_t>(nread));
    Dispatch([bytes](Handlers& h) {
      if (h.on_data) h.on_data(bytes);
    });
    return;
  }
  if (nread == 0) return;  // EAGAIN
  if (nread == UV_EOF) return OnPeerEof();
  Fail(static_cast<int>(nread));
}

void TcpConnection::State::OnPeerEof() {
  peer_eof = true;
  if (phase == Phase::kOpen) return BeginDrain(UV_EOF);
  UpdateReading();
  ContinueDrain();
}

// ---- writing ---------------------------------------------------------------

void TcpConnection::State::MarkDirty() {
  if (!accepting_writes()) {
    pending.clear();
    return;
  }
  if (!above_high && queued() > high_watermark) above_high = true;
  if (phase == Phase::kOpen && !flush_scheduled && !write_in_flight && !pending.empty()) {
    ScheduleFlush();
  }
}

// The posted function captures only `this` (no allocation); flush_ref keeps
// the object alive until it runs, even if the handle closes first.
void TcpConnection::State::ScheduleFlush() {
  flush_scheduled = true;
  flush_ref = keep_alive;
  loop.Post([this] { RunScheduledFlush(); });
}

void TcpConnection::State::RunScheduledFlush() {
  std::shared_ptr<TcpConnection> ref = std::move(flush_ref);
  flush_scheduled = false;
  if (phase == Phase::kOpen && !write_in_flight && !pending.empty()) IssueWrite();
}  // `ref` may be the last reference: nothing touches *this after it

void TcpConnection::State::IssueWrite() {
  in_flight.swap(pending);  // pending takes the old, empty in-flight buffer
  uv_buf_t buf = uv_buf_init(in_flight.data(), static_cast<unsigned>(in_flight.size()));
  int rc = uv_write(&write_req, stream(), &buf, 1, [](uv_write_t* req, int status) {
    static_cast<State*>(req->data)->OnWriteDone(status);
  });
  if (rc != 0) {
    in_flight.clear();
    return Fail(rc);
  }
  write_in_flight = true;
  ++writes_issued;
}

void TcpConnection::State::OnWriteDone(int status) {
  write_in_flight = false;
  if (in_flight.capacity() > kKeepBufferCapacity) {
    std::string().swap(in_flight);
  } else {
    in_flight.clear();
  }
  if (status == UV_ECANCELED) return;  // the handle is closing
  if (status < 0) return Fail(status);
  if (above_high && queued() < low_watermark) {
    above_high = false;
    if (phase == Phase::kOpen) {
      Dispatch([](Handlers& h) {
        if (h.on_drain) h.on_drain();
      });
    }
  }
  if (phase == Phase::kDraining) return ContinueDrain();
  MarkDirty();  // bytes that queued up behind this write
}

// ---- closing ---------------------------------------------------------------

void TcpConnection::State::BeginDrain(int status) {
  phase = Phase::kDraining;
  close_status = status;
  if (close_timeout_ms >= 0) {
    close_timer = loop.AddTimer(close_timeout_ms, [this] {
      close_timer = 0;
      OnCloseTimeout();
    });
  }
  UpdateReading();
  ContinueDrain();
}

void TcpConnection::State::ContinueDrain() {
  if (phase != Phase::kDraining || write_in_flight) return;
  if (!pending.empty()) return IssueWrite();
  if (!shutdown_sent) {
    shutdown_sent = true;
    int rc = uv_shutdown(&shutdown_req, stream(), [](uv_shutdown_t* req, int status) {
      static_cast<State*>(req->data)->OnShutdownDone(status);
    });
    if (rc != 0) CloseHandle(close_status);
    return;
  }
  if (shutdown_done && peer_eof) CloseHandle(close_status);
}

void TcpConnection::State::OnShutdownDone(int status) {
  if (status == UV_ECANCELED || phase != Phase::kDraining) return;
  shutdown_done = true;
  if (status < 0) return CloseHandle(close_status);  // peer already gone
  ContinueDrain();
}

void TcpConnection::State::OnCloseTimeout() {
  if (phase != Phase::kDraining) return;
  if (shutdown_done) return CloseHandle(close_status);  // flushed; the peer kept its side open
  ResetHandle(UV_ETIMEDOUT);
}

void TcpConnection::State::CancelCloseTimer() {
  if (close_timer != 0) loop.CancelTimer(close_timer);
  close_timer = 0;
}

void TcpConnection::State::Fail(int status) {
  // An error after the queue was written (or after the peer's FIN started
  // the drain) does not hide how the connection really ended.
  if (phase == Phase::kDraining && (shutdown_done || close_status == UV_EOF)) status = close_status;
  CloseHandle(status);
}

void TcpConnection::State::CloseHandle(int status) {
  if (phase == Phase::kIdle || phase == Phase::kClosing || phase == Phase::kClosed) return;
  CancelCloseTimer();
  phase = Phase::kClosing;
  close_status = status;
  reading = false;
  uv_close(handle(), OnClosed);
}

// RST instead of FIN: SO_LINGER 0. uv_tcp_close_reset refuses a handle with
// a shutdown in progress, which on Linux is safe to reset by hand.
void TcpConnection::State::ResetHandle(int status) {
  if (phase == Phase::kIdle || phase == Phase::kClosing || phase == Phase::kClosed) return;
  CancelCloseTimer();
  bool connected = phase != Phase::kConnecting;
  phase = Phase::kClosing;
  close_status = status;
  reading = false;
  if (connected && uv_tcp_close_reset(&tcp, OnClosed) == 0) return;
  int fd = -1;
  if (connected && uv_fileno(handle(), &fd) == 0) {
    linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  }
  uv_close(handle(), OnClosed);
}

void TcpConnection::State::CloseForShutdown() {
  notify_close = false;
  handlers = {};
  next_handlers.reset();
  on_connected = nullptr;
  CloseHandle(UV_ECANCELED);
}

void TcpConnection::State::OnClosed(uv_handle_t* handle) {
  auto* state = static_cast<State*>(handle->data);
  state->phase = Phase::kClosed;
  state->loop.UnregisterOwner(state);
  std::shared_ptr<TcpConnection> self = std::move(state->keep_alive);
  std::string().swap(state->pending);
  std::string().swap(state->in_flight);
  std::function<void(int)> on_connected = std::move(state->on_connected);
  state->on_connected = nullptr;
  Handlers handlers = std::move(state->handlers);
  state->handlers = {};
  state->next_handlers.reset();
  if (on_connected) on_connected(UV_ECANCELED);  // closed while resolving
  if (state->notify_close && handlers.on_close) handlers.on_close(state->close_status);
  state->handlers = {};  // whatever on_close installed would only leak
}  // `self` may be the last reference

// ---- TcpConnection ---------------------------------------------------------

TcpConnection::TcpConnection(UvLoop& loop) : state_(std::make_unique<State>(loop, *this)) {}

TcpConnection::~TcpConnection() = default;

std::shared_ptr<TcpConnection> TcpConnection::Adopt(UvLoop& loop, int fd) {
  std::shared_ptr<TcpConnection> connection(new TcpConnection(loop));
  State& state = *connection->state_;
  state.InitHandle(connection);
  int rc = uv_tcp_open(&state.tcp, fd);
  if (rc != 0) {
    ::close(fd);
    state.notify_close = false;
    state.CloseHandle(rc);
    return nullptr;
  }
  uv_tcp_nodelay(&state.tcp, 1);
  state.phase = Phase::kOpen;
  return connection;
}

std::shared_ptr<TcpConnection> TcpConnection::Connect(UvLoop& loop, const Endpoint& to,
                                                      std::function<void(int status)> on_connected) {
  std::shared_ptr<TcpConnection> connection(new TcpConnection(loop));
  State& state = *connection->state_;
  state.on_connected = std::move(on_connected);
  state.InitHandle(connection);
  if (auto address = detail::NumericAddress(to)) {
    state.StartConnect(*address);
  } else {
    state.StartResolve(to);
  }
  return connection;
}

void TcpConnection::SetHandlers(Handlers handlers) { state_->SetHandlers(std::move(handlers)); }

void TcpConnection::StartReading() {
  state_->want_reading = true;
  state_->UpdateReading();
}

void TcpConnection::StopReading() {
  state_->want_reading = false;
  state_->UpdateReading();
}

void TcpConnection::Write(std::string_view bytes) {
  if (!state_->accepting_writes()) return;
  state_->pending.append(bytes);
  state_->MarkDirty();
}

std::string& TcpConnection::output_buffer() { return state_->pending; }

void TcpConnection::MarkDirty() { state_->MarkDirty(); }

size_t TcpConnection::queued_bytes() const { return state_->queued(); }

bool TcpConnection::above_high_watermark() const { return state_->above_high; }

void TcpConnection::set_watermarks(size_t low, size_t high) {
  state_->low_watermark = low;
  state_->high_watermark = high;
}

void TcpConnection::Close() {
  if (state_->phase == Phase::kOpen) return state_->BeginDrain(0);
  if (state_->phase == Phase::kConnecting) state_->CloseHandle(0);
}

void TcpConnection::set_close_timeout(int64_t ms) { state_->close_timeout_ms = ms; }

void TcpConnection::Abort() { state_->ResetHandle(0); }

bool TcpConnection::is_open() const { return state_->accepting_writes(); }

int TcpConnection::Detach() {
  State& state = *state_;
  if (state.phase != Phase::kOpen || state.write_in_flight) return -1;
  if (!state.pending.empty()) {
    uv_buf_t buf = uv_buf_init(state.pending.data(), static_cast<unsigned>(state.pending.size()));
    int written = uv_try_write(state.stream(), &buf, 1);
    if (written > 0) state.pending.erase(0, static_cast<size_t>(written));
    if (!state.pending.empty()) return -1;
  }
  int fd = -1;
  if (uv_fileno(state.handle(), &fd) != 0) return -1;
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return -1;
  peer_address();  // cache it while the socket is still ours
  state.want_reading = false;
  state.UpdateReading();
  state.notify_close = false;
  state.SetHandlers({});
  state.CloseHandle(0);
  return copy;
}

std::string TcpConnection::peer_address() const {
  State& state = *state_;
  if (state.peer.empty() && (state.phase == Phase::kOpen || state.phase == Phase::kDraining)) {
    sockaddr_storage address{};
    int length = sizeof(address);
    if (uv_tcp_getpeername(&state.tcp, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      state.peer = detail::FormatAddress(reinterpret_cast<sockaddr*>(&address));
    }
  }
  return state.peer;
}

uint64_t TcpConnection::writes_issued() const { return state_->writes_issued; }

}  // namespace estuary::io
