// UvTransport over real sockets on 127.0.0.1 (port 0). Several transports
// share one UvLoop on the test thread; a second loop that the test simply
// does not run stands for a stalled or unresponsive node.
#include "cluster-core/links/uv_transport.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "io/uv/test_util.h"

namespace estuary::cluster {
namespace {

using io::testing::RunUntil;

struct Recorder final : LinkHandler {
  void OnPeerUp(const PeerInfo& peer) override { ups.push_back(peer); }
  void OnPeerDown(NodeId node) override { downs.push_back(node); }
  void OnFrame(NodeId from, uint8_t type, std::string_view body) override {
    ++frame_count;
    if (keep_frames) frames.push_back({from, type, std::string(body)});
  }
  void OnWritable(NodeId) override { ++writable; }
  struct Frame {
    NodeId from;
    uint8_t type;
    std::string body;
  };
  std::vector<PeerInfo> ups;
  std::vector<NodeId> downs;
  std::vector<Frame> frames;
  size_t frame_count = 0;
  bool keep_frames = true;
  int writable = 0;
};

struct Node {
  Recorder handler;
  std::unique_ptr<UvTransport> transport;
  uint16_t port = 0;
  std::string address() const { return transport->advertised_address(); }
};

UvTransportConfig TestConfig(NodeId id, std::string secret = "cluster-secret") {
  UvTransportConfig config;
  config.self = id;
  config.secret = std::move(secret);
  config.heartbeat_ms = 40;
  config.dead_after_ms = 400;
  config.backoff_min_ms = 10;
  config.backoff_max_ms = 100;
  config.handshake_timeout_ms = 1000;
  config.seed = id;
  return config;
}

std::unique_ptr<Node> StartNode(io::UvLoop& loop, UvTransportConfig config, uint16_t port = 0) {
  auto node = std::make_unique<Node>();
  node->transport = std::make_unique<UvTransport>(loop, std::move(config));
  node->transport->set_handler(&node->handler);
  auto bound = node->transport->Listen({"127.0.0.1", port});
  EXPECT_TRUE(bound.has_value()) << bound.error();
  node->port = bound.value_or(0);
  return node;
}

// Runs two loops in turn on this thread until `done()` or the deadline.
// Each loop's transport tick wakes it at least every few milliseconds.
bool RunBoth(io::UvLoop& a, io::UvLoop& b, const std::function<bool()>& done, int64_t timeout_ms = 10'000) {
  const int64_t deadline = io::SystemClock::Instance().NowMs() + timeout_ms;
  while (!done() && io::SystemClock::Instance().NowMs() < deadline) {
    uv_run(a.raw(), UV_RUN_ONCE);
    uv_run(b.raw(), UV_RUN_ONCE);
  }
  return done();
}

// Runs the loop for a fixed time (to check that nothing more happens).
void RunFor(io::UvLoop& loop, int64_t ms) {
  bool over = false;
  io::TimerId timer = loop.AddTimer(ms, [&] { over = true; });
  RunUntil(loop, [&] { return over; }, ms + 1000);
  loop.CancelTimer(timer);
}

std::string Sequence(uint32_t i) { return "frame-" + std::to_string(i); }

// Captures what the transports log, to check refusals name the peer.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)) {
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("links-test", sink_);
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  bool Contains(std::string_view a, std::string_view b = {}) const {
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

uint64_t FramesOut(const UvTransport& transport, NodeId to) {
  for (const auto& s : transport.stats()) {
    if (s.node == to) return s.frames_out;
  }
  return 0;
}

UvTransport::PeerStats StatsFor(const UvTransport& transport, NodeId node) {
  for (const auto& s : transport.stats()) {
    if (s.node == node) return s;
  }
  ADD_FAILURE() << "no stats for node " << node;
  return {};
}

TEST(UvTransportTest, ListenRefusesAnEmptySecret) {
  io::UvLoop loop;
  UvTransport transport(loop, TestConfig(1, ""));
  auto bound = transport.Listen({"127.0.0.1", 0});
  ASSERT_FALSE(bound.has_value());
  EXPECT_NE(bound.error().find("secret"), std::string::npos);
}

TEST(UvTransportTest, LinkComesUpBothWaysAndFramesArriveInOrder) {
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(loop, TestConfig(2));
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  ASSERT_EQ(a->handler.ups.size(), 1u);
  EXPECT_EQ(a->handler.ups[0].node, 2);
  EXPECT_EQ(a->handler.ups[0].cluster_address, b->address());
  ASSERT_EQ(b->handler.ups.size(), 1u);
  EXPECT_EQ(b->handler.ups[0].cluster_address, a->address());  // learned from the hello
  EXPECT_EQ(a->handler.ups[0].minor, kLinkVersionMinor);
  EXPECT_EQ(b->handler.ups[0].minor, kLinkVersionMinor);
  EXPECT_EQ(b->transport->peers().size(), 1u);

  constexpr uint32_t kFrames = 20'000;
  const std::string big(5 << 20, 'B');
  for (uint32_t i = 0; i < kFrames; ++i) {
    ASSERT_EQ(a->transport->Send(2, 0x20, Sequence(i)), SendResult::kQueued);
    if (i == kFrames / 2) {
      ASSERT_EQ(a->transport->Send(2, 0x21, big), SendResult::kQueued);
    }
    if (i % 1000 == 999) uv_run(loop.raw(), UV_RUN_NOWAIT);  // spread over iterations
  }
  for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(b->transport->Send(1, 0x30, Sequence(i)), SendResult::kQueued);
  ASSERT_TRUE(RunUntil(loop, [&] {
    return b->handler.frames.size() == kFrames + 1 && a->handler.frames.size() == 100;
  }));
  uint32_t next = 0;
  for (const auto& frame : b->handler.frames) {
    EXPECT_EQ(frame.from, 1);
    if (frame.type == 0x21) {
      EXPECT_EQ(next, kFrames / 2 + 1);
      EXPECT_EQ(frame.body, big);
      continue;
    }
    ASSERT_EQ(frame.body, Sequence(next)) << next;
    ++next;
  }
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(a->handler.frames[i].body, Sequence(i));
  auto stats = StatsFor(*a->transport, 2);
  EXPECT_TRUE(stats.up);
  EXPECT_EQ(stats.frames_out, kFrames + 1);
  EXPECT_EQ(StatsFor(*b->transport, 1).frames_in, kFrames + 1);
  EXPECT_EQ(a->transport->open_links(), 1u);
  EXPECT_EQ(b->transport->open_links(), 1u);
}

TEST(UvTransportTest, FramesOfOneIterationLeaveInOneWrite) {
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(loop, TestConfig(2));
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  const uint64_t writes_before = StatsFor(*a->transport, 2).writes;
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(a->transport->Send(2, 0x20, Sequence(i)), SendResult::kQueued);
  ASSERT_TRUE(RunUntil(loop, [&] { return b->handler.frames.size() == 1000; }));
  auto stats = StatsFor(*a->transport, 2);
  EXPECT_EQ(stats.frames_out, 1000u);
  // One write for the 1000 frames; a heartbeat may add one more.
  EXPECT_LE(stats.writes - writes_before, 2u);
  std::printf("batching: %llu frames in %llu writes\n", static_cast<unsigned long long>(stats.frames_out),
              static_cast<unsigned long long>(stats.writes - writes_before));
}

// A figure, not a pass/fail bound: small frames through one link on one
// loop (both ends on this thread, so it is half the machine it could be).
TEST(UvTransportTest, ThroughputOfSmallFrames) {
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(loop, TestConfig(2));
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  constexpr uint32_t kFrames = 1'000'000;
  const std::string body(100, 'm');
  b->handler.keep_frames = false;
  const int64_t start = io::SystemClock::Instance().NowMs();
  uint32_t sent = 0;
  ASSERT_TRUE(RunUntil(loop, [&] {
    // 1000 frames per loop iteration, as a busy node forwarding would.
    for (int i = 0; i < 1000 && sent < kFrames; ++i) {
      if (a->transport->Send(2, 0x20, body) != SendResult::kQueued) break;
      ++sent;
    }
    return b->handler.frame_count == kFrames;
  }, 60'000));
  const int64_t took = std::max<int64_t>(1, io::SystemClock::Instance().NowMs() - start);
  auto stats = StatsFor(*a->transport, 2);
  std::printf("throughput: %u frames of 100 B in %lld ms = %.0f frames/s, %llu writes (%.0f frames/write)\n",
              kFrames, static_cast<long long>(took), kFrames * 1000.0 / took,
              static_cast<unsigned long long>(stats.writes), double(stats.frames_out) / double(stats.writes));
}

TEST(UvTransportTest, WrongSecretIsRefusedOnBothSidesAndLogged) {
  LogCapture log;
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1, "secret-one"));
  auto b = StartNode(loop, TestConfig(2, "secret-two"));
  a->transport->AddPeerAddress(b->address());
  b->transport->AddPeerAddress(a->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->refused() >= 2 && b->transport->refused() >= 2; }));
  EXPECT_TRUE(a->handler.ups.empty());
  EXPECT_TRUE(b->handler.ups.empty());
  EXPECT_FALSE(a->transport->connected(2));
  EXPECT_EQ(a->transport->Send(2, 0x20, "x"), SendResult::kNoLink);
  EXPECT_TRUE(log.Contains("refused 127.0.0.1:", "authentication failed"));
}

// A raw client: connects, sends bytes, records what comes back and the close.
struct RawClient {
  std::shared_ptr<io::TcpConnection> connection;
  std::string received;
  bool closed = false;
  RawClient(io::UvLoop& loop, uint16_t port, std::string bytes) {
    connection = io::TcpConnection::Connect(loop, {"127.0.0.1", port}, [](int) {});
    connection->SetHandlers({.on_data = [this](std::string_view data) { received.append(data); },
                             .on_close = [this](int) { closed = true; }});
    connection->Write(bytes);
  }
};

std::string HelloFrame(const wire::Hello& hello) {
  std::string frame;
  wire::AppendFrame(frame, wire::kHello, wire::EncodeHello(hello));
  return frame;
}

TEST(UvTransportTest, GarbageBadVersionOwnIdAndSilenceAreDropped) {
  LogCapture log;
  io::UvLoop loop;
  UvTransportConfig config = TestConfig(2);
  config.handshake_timeout_ms = 200;
  auto b = StartNode(loop, config);
  RawClient garbage(loop, b->port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  RawClient version(loop, b->port, HelloFrame({.major = 9, .minor = 0, .node = 5, .address = "127.0.0.1:1"}));
  RawClient own_id(loop, b->port, HelloFrame({.node = 2, .address = "127.0.0.1:1"}));
  RawClient magic(loop, b->port, HelloFrame({.magic = 0x12345678, .node = 5, .address = ""}));
  RawClient early(loop, b->port, [] {
    std::string frame;
    wire::AppendFrame(frame, 0x20, "cluster frame first");
    return frame;
  }());
  RawClient silent(loop, b->port, "");
  ASSERT_TRUE(RunUntil(loop, [&] {
    return garbage.closed && version.closed && own_id.closed && magic.closed && early.closed && silent.closed;
  }));
  EXPECT_EQ(b->transport->refused(), 6u);
  EXPECT_NE(garbage.received.find("garbage"), std::string::npos);  // the error frame's reason
  EXPECT_NE(version.received.find("unsupported protocol version 9.0"), std::string::npos);
  EXPECT_NE(own_id.received.find("our own"), std::string::npos);
  EXPECT_NE(silent.received.find("handshake timeout"), std::string::npos);
  EXPECT_TRUE(log.Contains("refused 127.0.0.1:", "unsupported protocol version"));
  EXPECT_TRUE(b->handler.ups.empty());
  EXPECT_EQ(b->transport->open_links(), 0u);
}

TEST(UvTransportTest, ForgedAuthWithoutTheSecretIsRefused) {
  io::UvLoop loop;
  auto b = StartNode(loop, TestConfig(2));
  wire::Nonce nonce = wire::RandomNonce();
  RawClient stranger(loop, b->port, HelloFrame({.node = 7, .address = "127.0.0.1:1", .nonce = nonce}));
  // Wait for B's hello, then answer with a MAC made with another secret.
  ASSERT_TRUE(RunUntil(loop, [&] { return stranger.received.size() > wire::kHeaderBytes; }));
  wire::FrameReader reader;
  reader.Feed(stranger.received);
  wire::FrameReader::Frame frame;
  ASSERT_EQ(reader.Next(frame), wire::FrameReader::Status::kFrame);
  auto hello = wire::DecodeHello(frame.body);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->node, 2);
  wire::Mac mac = wire::ComputeMac("guess", wire::Role::kDialer, nonce, hello->nonce, 7, 2);
  std::string auth;
  wire::AppendFrame(auth, wire::kAuth, std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
  stranger.connection->Write(auth);
  ASSERT_TRUE(RunUntil(loop, [&] { return stranger.closed; }));
  EXPECT_NE(stranger.received.find("authentication failed"), std::string::npos);
  // The acceptor never proves itself to an unproven dialer: hello, then error.
  wire::FrameReader all;
  all.Feed(stranger.received);
  std::vector<uint8_t> types;
  while (all.Next(frame) == wire::FrameReader::Status::kFrame) types.push_back(frame.type);
  EXPECT_EQ(types, (std::vector<uint8_t>{wire::kHello, wire::kError}));
  EXPECT_TRUE(b->handler.ups.empty());
}

// A client written from docs/internode.md alone completes the handshake.
TEST(UvTransportTest, HandWrittenDialerFollowingTheSpecIsAccepted) {
  io::UvLoop loop;
  auto b = StartNode(loop, TestConfig(2));
  wire::Nonce nonce = wire::RandomNonce();
  // Minor 0: an older binary; the acceptor reports the minor with the peer.
  RawClient dialer(loop, b->port, HelloFrame({.minor = 0, .node = 9, .address = "127.0.0.1:9", .nonce = nonce}));
  ASSERT_TRUE(RunUntil(loop, [&] { return dialer.received.size() > wire::kHeaderBytes; }));
  wire::FrameReader reader;
  reader.Feed(dialer.received);
  wire::FrameReader::Frame frame;
  ASSERT_EQ(reader.Next(frame), wire::FrameReader::Status::kFrame);
  ASSERT_EQ(frame.type, wire::kHello);
  auto hello = wire::DecodeHello(frame.body);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->address, b->address());
  const wire::Nonce acceptor_nonce = hello->nonce;
  wire::Mac mac = wire::ComputeMac("cluster-secret", wire::Role::kDialer, nonce, acceptor_nonce, 9, 2);
  std::string out;
  wire::AppendFrame(out, wire::kAuth, std::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
  wire::AppendFrame(out, 0x10, "first cluster frame");
  dialer.connection->Write(out);
  ASSERT_TRUE(RunUntil(loop, [&] { return b->handler.frames.size() == 1; }));
  EXPECT_EQ(b->handler.ups.at(0).node, 9);
  EXPECT_EQ(b->handler.ups.at(0).cluster_address, "127.0.0.1:9");
  EXPECT_EQ(b->handler.ups.at(0).minor, 0);
  EXPECT_EQ(b->handler.frames[0].body, "first cluster frame");
  // B proved itself with the acceptor's MAC.
  ASSERT_TRUE(RunUntil(loop, [&] { return dialer.received.size() >= 2 * wire::kHeaderBytes + frame.body.size() + 32; }));
  wire::FrameReader rest;
  rest.Feed(dialer.received);
  ASSERT_EQ(rest.Next(frame), wire::FrameReader::Status::kFrame);  // the hello again
  ASSERT_EQ(rest.Next(frame), wire::FrameReader::Status::kFrame);
  ASSERT_EQ(frame.type, wire::kAuth);
  EXPECT_TRUE(wire::MacEquals(wire::ComputeMac("cluster-secret", wire::Role::kAcceptor, nonce, acceptor_nonce, 9, 2),
                              frame.body));
}

TEST(UvTransportTest, BothSidesDiallingAtOnceLeaveOneLink) {
  for (int round = 0; round < 5; ++round) {
    io::UvLoop loop;
    auto a = StartNode(loop, TestConfig(static_cast<NodeId>(10 + round)));
    auto b = StartNode(loop, TestConfig(static_cast<NodeId>(20 - round)));
    const NodeId ia = a->transport->self(), ib = b->transport->self();
    a->transport->AddPeerAddress(b->address());
    b->transport->AddPeerAddress(a->address());
    ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(ib) && b->transport->connected(ia); }));
    RunFor(loop, 200);  // let any redundant dial finish or fail
    EXPECT_EQ(a->transport->open_links(), 1u) << round;
    EXPECT_EQ(b->transport->open_links(), 1u) << round;
    EXPECT_TRUE(a->transport->connected(ib));
    EXPECT_TRUE(b->transport->connected(ia));
    // A flap (down then up) is tolerated but must be balanced.
    EXPECT_EQ(a->handler.ups.size(), a->handler.downs.size() + 1) << round;
    EXPECT_EQ(b->handler.ups.size(), b->handler.downs.size() + 1) << round;
    ASSERT_EQ(a->transport->Send(ib, 0x20, "ping"), SendResult::kQueued);
    ASSERT_EQ(b->transport->Send(ia, 0x20, "pong"), SendResult::kQueued);
    ASSERT_TRUE(RunUntil(loop, [&] { return !a->handler.frames.empty() && !b->handler.frames.empty(); }));
  }
}

TEST(UvTransportTest, ThreeNodesEachKnowingAllFormAFullMeshOfThreeLinks) {
  io::UvLoop loop;
  std::vector<std::unique_ptr<Node>> nodes;
  for (NodeId id = 1; id <= 3; ++id) nodes.push_back(StartNode(loop, TestConfig(id)));
  for (auto& from : nodes) {
    for (auto& to : nodes) from->transport->AddPeerAddress(to->address());  // itself included, as seeds often are
  }
  auto meshed = [&] {
    for (auto& node : nodes) {
      if (node->transport->peers().size() != 2) return false;
    }
    return true;
  };
  ASSERT_TRUE(RunUntil(loop, meshed));
  RunFor(loop, 200);
  for (auto& node : nodes) {
    EXPECT_EQ(node->transport->open_links(), 2u) << node->transport->self();
    for (auto& to : nodes) {
      if (to == node) continue;
      ASSERT_EQ(node->transport->Send(to->transport->self(), 0x20, "from " + std::to_string(node->transport->self())),
                SendResult::kQueued);
    }
  }
  ASSERT_TRUE(RunUntil(loop, [&] {
    for (auto& node : nodes) {
      if (node->handler.frames.size() != 2) return false;
    }
    return true;
  }));
}

TEST(UvTransportTest, PeerRestartIsRedialledAndANewIdOnTheAddressIsANewPeer) {
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(loop, TestConfig(2));
  const uint16_t port = b->port;
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2); }));

  b.reset();  // Close(): the peer sees the link go at once
  ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.downs.size() == 1; }));
  EXPECT_EQ(a->handler.downs[0], 2);
  EXPECT_FALSE(a->transport->connected(2));
  EXPECT_EQ(a->transport->Send(2, 0x20, "x"), SendResult::kNoLink);

  b = StartNode(loop, TestConfig(2), port);
  ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.ups.size() == 2 && b->transport->connected(1); }));
  EXPECT_EQ(a->handler.ups[1].node, 2);
  EXPECT_EQ(StatsFor(*a->transport, 2).reconnects, 1u);
  ASSERT_EQ(a->transport->Send(2, 0x20, "after restart"), SendResult::kQueued);
  ASSERT_TRUE(RunUntil(loop, [&] { return b->handler.frames.size() == 1; }));

  // The same address comes back as another node: a new peer, the old one stays down.
  b.reset();
  ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.downs.size() == 2; }));
  b = StartNode(loop, TestConfig(3), port);
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(3); }));
  EXPECT_FALSE(a->transport->connected(2));
  EXPECT_EQ(a->handler.ups.back().node, 3);
  EXPECT_EQ(a->transport->peers().size(), 1u);
  EXPECT_EQ(a->transport->open_links(), 1u);
}

// Counts what a transport's dial observer hears.
struct DialLog {
  explicit DialLog(Transport& transport) {
    transport.set_dial_observer([this](const DialFailure& failure) { failures.push_back(failure); });
  }
  size_t Count(DialError error) const {
    size_t n = 0;
    for (const DialFailure& failure : failures) n += failure.error == error;
    return n;
  }
  std::vector<DialFailure> failures;
};

// A dead peer process leaves nothing listening on its address: the
// redials after the loss are reported refused (membership's evidence that
// the process is gone), the first within backoff_min_ms of the loss even
// when dials before the peer first listened ran the backoff up.
TEST(UvTransportTest, RedialsToAGonePeerAreReportedRefusedSoonAfterTheLoss) {
  io::UvLoop loop;
  UvTransportConfig config = TestConfig(1);
  config.backoff_min_ms = 50;  // the production backoff
  config.backoff_max_ms = 2000;
  auto a = StartNode(loop, config);
  DialLog dials(*a->transport);
  auto b = StartNode(loop, TestConfig(2));
  const uint16_t port = b->port;
  const std::string b_address = b->address();
  b.reset();
  a->transport->AddPeerAddress(b_address);  // nothing listens there yet
  ASSERT_TRUE(RunUntil(loop, [&] { return dials.Count(DialError::kRefused) >= 5; }));
  EXPECT_EQ(dials.failures.back().address, b_address);
  EXPECT_EQ(dials.failures.back().node, 0);  // never reached: nobody known behind it
  EXPECT_EQ(dials.failures.back().detail, "connection refused");

  b = StartNode(loop, TestConfig(2), port);
  b->transport->AddPeerAddress(a->address());  // B dials first: A's link is the accepted one
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2); }));
  dials.failures.clear();
  b.reset();  // the process dies
  ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.downs.size() == 1; }));
  const int64_t lost_at = loop.NowMs();
  ASSERT_TRUE(RunUntil(loop, [&] { return dials.Count(DialError::kRefused) >= 1; }));
  const int64_t took = loop.NowMs() - lost_at;
  EXPECT_EQ(dials.failures.front().node, 2);
  EXPECT_EQ(dials.failures.front().address, b_address);
  // The first redial comes 25-50 ms after the loss; the bound leaves room
  // for a loaded machine (the 5 refusals above ran the backoff to 800 ms+).
  EXPECT_LE(took, 300);
  std::printf("first refused redial %lld ms after the loss\n", static_cast<long long>(took));
}

TEST(UvTransportTest, SilentPeerIsDownAfterDeadAfter) {
  io::UvLoop loop;
  io::UvLoop paused;  // B's loop: not run while B "hangs"
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(paused, TestConfig(2));
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunBoth(loop, paused, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  // Heartbeats keep an idle link up well past dead_after.
  ASSERT_FALSE(RunBoth(loop, paused, [&] { return !a->handler.downs.empty(); }, 1000));
  EXPECT_TRUE(a->handler.downs.empty());

  const int64_t silent_from = loop.NowMs();
  ASSERT_TRUE(RunUntil(loop, [&] { return !a->handler.downs.empty(); }));
  const int64_t took = loop.NowMs() - silent_from;
  // Measured from the test's last look, not from the last heartbeat heard
  // (up to heartbeat_ms + a tick earlier); the upper bound allows a loaded CI.
  EXPECT_GE(took, 400 - 100);
  EXPECT_LE(took, 400 + 800);
  std::printf("silent peer declared down after %lld ms (dead_after 400)\n", static_cast<long long>(took));
  // Once B runs again, A's dialer brings the link back.
  ASSERT_TRUE(RunBoth(loop, paused, [&] { return a->handler.ups.size() == 2 && b->transport->connected(1); }));
  a.reset();
  b.reset();
}

TEST(UvTransportTest, SlowReaderFillsTheBoundedQueueThenWritableAgain) {
  io::UvLoop loop;
  io::UvLoop paused;
  UvTransportConfig config = TestConfig(1);
  config.queue_low_bytes = 256 << 10;
  config.queue_high_bytes = 1 << 20;
  config.dead_after_ms = 20'000;  // B's silence here is not the point
  auto a = StartNode(loop, config);
  UvTransportConfig config_b = TestConfig(2);
  config_b.dead_after_ms = 20'000;
  auto b = StartNode(paused, config_b);
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunBoth(loop, paused, [&] { return a->transport->connected(2) && b->transport->connected(1); }));

  // Fill until Send stays kFull even after the loop flushed what the
  // kernel's socket buffers would take.
  const std::string chunk(64 << 10, 'q');
  uint64_t sent = 0;
  size_t max_queued = 0;
  bool full = false;
  const int64_t deadline = loop.NowMs() + 10'000;
  while (!full && loop.NowMs() < deadline) {
    SendResult result = SendResult::kQueued;
    for (int i = 0; i < 64 && result == SendResult::kQueued; ++i) {
      result = a->transport->Send(2, 0x20, chunk);
      if (result == SendResult::kQueued) ++sent;
    }
    max_queued = std::max(max_queued, StatsFor(*a->transport, 2).queued_bytes);
    uv_run(loop.raw(), UV_RUN_NOWAIT);  // B's loop stays paused
    uv_run(loop.raw(), UV_RUN_NOWAIT);
    full = a->transport->Send(2, 0x20, chunk) == SendResult::kFull;
    if (!full) ++sent;
  }
  ASSERT_TRUE(full) << "sent " << sent << " chunks without filling the queue";
  const int writable_before = a->handler.writable;
  EXPECT_LE(max_queued, config.queue_high_bytes + chunk.size() + 1024);
  EXPECT_LE(StatsFor(*a->transport, 2).queued_bytes, config.queue_high_bytes + chunk.size() + 1024);
  EXPECT_EQ(FramesOut(*a->transport, 2), sent);
  std::printf("bounded queue: %llu x 64 KiB accepted before a lasting kFull, max queued %zu bytes\n",
              static_cast<unsigned long long>(sent), max_queued);

  ASSERT_TRUE(RunBoth(loop, paused, [&] { return a->handler.writable > writable_before; }));
  ASSERT_TRUE(RunBoth(loop, paused, [&] { return b->handler.frames.size() == sent; }));
  EXPECT_EQ(a->transport->Send(2, 0x20, "more"), SendResult::kQueued);
  a.reset();
  b.reset();
}

TEST(UvTransportTest, RemovePeerClosesTheLinkAndStopsDialling) {
  io::UvLoop loop;
  auto a = StartNode(loop, TestConfig(1));
  auto b = StartNode(loop, TestConfig(2));
  a->transport->AddPeerAddress(b->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  a->transport->RemovePeer(2);
  EXPECT_FALSE(a->transport->connected(2));
  EXPECT_EQ(a->handler.downs, std::vector<NodeId>{2});
  ASSERT_TRUE(RunUntil(loop, [&] { return !b->handler.downs.empty(); }));
  RunFor(loop, 300);  // several backoff periods: no redial
  EXPECT_FALSE(a->transport->connected(2));
  EXPECT_EQ(a->handler.ups.size(), 1u);
}

TEST(UvTransportTest, OwnAddressAmongTheSeedsIsIgnored) {
  io::UvLoop loop;
  UvTransportConfig config = TestConfig(1);
  config.advertised_address = "localhost:0";  // Listen fills in the port
  auto a = StartNode(loop, config);
  EXPECT_EQ(a->address(), "localhost:" + std::to_string(a->port));
  a->transport->AddPeerAddress(a->address());  // skipped: it is ours
  a->transport->AddPeerAddress("127.0.0.1:" + std::to_string(a->port));  // an alias: found in the handshake
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->refused() >= 1; }));
  RunFor(loop, 300);
  EXPECT_LE(a->transport->refused(), 2u);  // no redial loop
  EXPECT_TRUE(a->handler.ups.empty());
}

// The fault switch (estuaryd --fault-injection, docs/reliability.md): an
// isolated node drops its links, refuses new ones and dials none, both
// ways, while the others keep theirs; healing brings every link back.
TEST(UvTransportTest, AnIsolatedNodeHasNoLinksUntilHealed) {
  io::UvLoop loop;
  std::vector<std::unique_ptr<Node>> nodes;
  for (NodeId id = 1; id <= 3; ++id) nodes.push_back(StartNode(loop, TestConfig(id)));
  for (auto& from : nodes) {
    for (auto& to : nodes) from->transport->AddPeerAddress(to->address());
  }
  auto meshed = [&] {
    for (auto& node : nodes) {
      if (node->transport->peers().size() != 2) return false;
    }
    return true;
  };
  ASSERT_TRUE(RunUntil(loop, meshed));
  UvTransport& isolated = *nodes[1]->transport;  // node 2
  DialLog dials(*nodes[0]->transport);
  isolated.SetIsolated(true);
  isolated.SetIsolated(true);  // idempotent
  ASSERT_TRUE(RunUntil(loop, [&] {
    return !nodes[0]->transport->connected(2) && !nodes[2]->transport->connected(2) && isolated.peers().empty();
  }));
  // Several redial backoffs later (10-100 ms here) it is still cut off,
  // and nodes 1 and 3 still reach each other.
  RunFor(loop, 400);
  EXPECT_TRUE(isolated.peers().empty());
  EXPECT_EQ(isolated.open_links(), 0u);
  EXPECT_FALSE(nodes[0]->transport->connected(2));
  EXPECT_TRUE(nodes[0]->transport->connected(3));
  EXPECT_EQ(isolated.Send(1, 0x20, "x"), SendResult::kNoLink);
  EXPECT_EQ(nodes[2]->transport->Send(2, 0x20, "x"), SendResult::kNoLink);
  EXPECT_EQ(nodes[0]->handler.downs, std::vector<NodeId>{2});
  // Its listener accepts and resets: the redials are never refused, so
  // membership takes the isolation for a cut, not a dead process.
  EXPECT_EQ(dials.Count(DialError::kRefused), 0u);

  isolated.SetIsolated(false);
  EXPECT_FALSE(isolated.isolated());
  ASSERT_TRUE(RunUntil(loop, meshed));
  ASSERT_EQ(nodes[0]->transport->Send(2, 0x20, "healed"), SendResult::kQueued);
  ASSERT_TRUE(RunUntil(loop, [&] { return !nodes[1]->handler.frames.empty(); }));
  EXPECT_EQ(nodes[1]->handler.frames.back().body, "healed");
}

}  // namespace
}  // namespace estuary::cluster
