// UvTransport with mutual TLS under the handshake (config.tls,
// docs/internode.md "TLS"), over real sockets on 127.0.0.1 port 0.
// Certificates are made at run time with the OpenSSL API
// (io/tls/tls_test_certs.h): two independent CAs, node certificates signed
// by each. A relay on the same loop stands between two nodes to capture
// the bytes on the wire.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster-core/links/uv_transport.h"
#include "io/tls/tls_test_certs.h"
#include "io/uv/test_util.h"

namespace estuary::cluster {
namespace {

using io::testing::RunUntil;
using io::test_support::TestCertificates;

struct Recorder final : LinkHandler {
  void OnPeerUp(const PeerInfo& peer) override { ups.push_back(peer.node); }
  void OnPeerDown(NodeId node) override { downs.push_back(node); }
  void OnFrame(NodeId, uint8_t, std::string_view body) override {
    ++frame_count;
    if (keep_frames) frames.emplace_back(body);
  }
  void OnRefusedBy(const std::string&, const std::string& reason) override { refusals.push_back(reason); }
  std::vector<NodeId> ups, downs;
  std::vector<std::string> frames, refusals;
  size_t frame_count = 0;
  bool keep_frames = true;
};

struct Node {
  Recorder handler;
  std::unique_ptr<UvTransport> transport;
  std::string address() const { return transport->advertised_address(); }
};

// A node's TLS context: its own certificate from `signer`, trusting `trusted`.
std::shared_ptr<io::TlsContext> PeerTls(TestCertificates& signer, const TestCertificates& trusted, NodeId id) {
  auto pair = signer.Client("node-" + std::to_string(id));
  io::TlsSettings settings;
  settings.cert_file = pair.cert;
  settings.key_file = pair.key;
  settings.ca_file = trusted.ca_file();
  settings.min_version = "1.3";
  settings.flag_prefix = "--cluster-tls";
  auto context = io::TlsContext::CreatePeer(settings);
  EXPECT_TRUE(context.has_value()) << context.error();
  return context.value_or(nullptr);
}

std::unique_ptr<Node> StartNode(io::UvLoop& loop, NodeId id, std::shared_ptr<io::TlsContext> tls) {
  UvTransportConfig config;
  config.self = id;
  config.secret = "cluster-secret";
  config.heartbeat_ms = 40;
  config.dead_after_ms = 400;
  config.backoff_min_ms = 10;
  config.backoff_max_ms = 100;
  config.handshake_timeout_ms = 1000;
  config.seed = id;
  config.tls = std::move(tls);
  auto node = std::make_unique<Node>();
  node->transport = std::make_unique<UvTransport>(loop, std::move(config));
  node->transport->set_handler(&node->handler);
  auto bound = node->transport->Listen({"127.0.0.1", 0});
  EXPECT_TRUE(bound.has_value()) << bound.error();
  return node;
}

void RunFor(io::UvLoop& loop, int64_t ms) {
  bool over = false;
  io::TimerId timer = loop.AddTimer(ms, [&] { over = true; });
  RunUntil(loop, [&] { return over; }, ms + 1000);
  loop.CancelTimer(timer);
}

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(512)) {
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("links-tls-test", sink_);
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
  std::string All() const {
    std::string out;
    for (const std::string& line : sink_->last_formatted()) out += line;
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Copies bytes both ways between a dialler and `target`, keeping a copy of
// everything that passed (both directions, in arrival order).
class CapturingRelay {
 public:
  CapturingRelay(io::UvLoop& loop, uint16_t target_port) : loop_(loop), target_port_(target_port) {
    auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [this](int fd) { Accept(fd); });
    EXPECT_TRUE(listener.has_value());
    listener_ = std::move(*listener);
  }
  ~CapturingRelay() {
    listener_->Close();
    for (auto& pair : pairs_) {
      for (auto& side : {pair->inbound, pair->outbound}) {
        if (side) {
          side->SetHandlers({});
          side->Abort();
        }
      }
    }
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener_->port()); }
  const std::string& captured() const { return captured_; }

 private:
  struct Pair {
    std::shared_ptr<io::TcpConnection> inbound, outbound;
    bool connected = false;
    std::string early;  // from the dialler before the target answered
  };

  void Accept(int fd) {
    auto pair = std::make_shared<Pair>();
    pair->inbound = io::TcpConnection::Adopt(loop_, fd);
    Pair* raw = pair.get();
    pair->outbound = io::TcpConnection::Connect(loop_, {"127.0.0.1", target_port_}, [this, raw](int status) {
      if (status != 0) return raw->inbound->Close();
      raw->connected = true;
      if (!raw->early.empty()) raw->outbound->Write(raw->early);
      raw->early.clear();
    });
    pair->inbound->SetHandlers({.on_data =
                                    [this, raw](std::string_view bytes) {
                                      captured_.append(bytes);
                                      if (raw->connected) {
                                        raw->outbound->Write(bytes);
                                      } else {
                                        raw->early.append(bytes);
                                      }
                                    },
                                .on_close = [raw](int) { raw->outbound->Close(); }});
    pair->outbound->SetHandlers({.on_data =
                                     [this, raw](std::string_view bytes) {
                                       captured_.append(bytes);
                                       raw->inbound->Write(bytes);
                                     },
                                 .on_close = [raw](int) { raw->inbound->Close(); }});
    pairs_.push_back(std::move(pair));
  }

  io::UvLoop& loop_;
  uint16_t target_port_;
  std::unique_ptr<io::TcpListener> listener_;
  std::vector<std::shared_ptr<Pair>> pairs_;
  std::string captured_;
};

uint16_t PortOf(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

TEST(UvTransportTlsTest, NodesWithClusterCertificatesLinkAndExchangeFrames) {
  TestCertificates ca;
  io::UvLoop loop;
  auto a = StartNode(loop, 1, PeerTls(ca, ca, 1));
  auto b = StartNode(loop, 2, PeerTls(ca, ca, 2));
  b->transport->AddPeerAddress(a->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(b->transport->Send(1, 0x20, "to-a-" + std::to_string(i)), SendResult::kQueued);
    ASSERT_EQ(a->transport->Send(2, 0x20, "to-b-" + std::to_string(i)), SendResult::kQueued);
  }
  const std::string big(3 << 20, 'B');  // many TLS records
  ASSERT_EQ(a->transport->Send(2, 0x21, big), SendResult::kQueued);
  ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.frames.size() == 2000 && b->handler.frames.size() == 2001; }));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(a->handler.frames[i], "to-a-" + std::to_string(i));
    ASSERT_EQ(b->handler.frames[i], "to-b-" + std::to_string(i));
  }
  EXPECT_EQ(b->handler.frames.back(), big);
  // Heartbeats keep the link up through TLS past dead_after_ms.
  RunFor(loop, 600);
  EXPECT_TRUE(a->transport->connected(2));
  EXPECT_TRUE(b->handler.downs.empty());
  EXPECT_EQ(a->transport->refused() + b->transport->refused(), 0u);
}

TEST(UvTransportTlsTest, ACertificateFromAnotherCaIsRefusedWithTheReasonLogged) {
  LogCapture log;
  TestCertificates ca;
  TestCertificates other("Another CA");
  io::UvLoop loop;
  auto a = StartNode(loop, 1, PeerTls(ca, ca, 1));
  // Node 3 trusts the cluster's CA but its certificate is from another one.
  auto stranger = StartNode(loop, 3, PeerTls(other, ca, 3));
  stranger->transport->AddPeerAddress(a->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->refused() >= 1; }));
  EXPECT_TRUE(log.Contains("TLS handshake failed", "client certificate refused")) << log.All();
  EXPECT_TRUE(log.Contains("client certificate refused", "unknown CA")) << log.All();
  // And the other way round: node 1 dials it and refuses its server certificate.
  a->transport->AddPeerAddress(stranger->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return log.Contains("server certificate refused", "unknown CA"); })) << log.All();
  EXPECT_FALSE(a->handler.refusals.empty());  // the dialler tells membership why
  RunFor(loop, 300);
  EXPECT_FALSE(a->transport->connected(3));
  EXPECT_FALSE(stranger->transport->connected(1));
  EXPECT_TRUE(a->handler.ups.empty());
  EXPECT_TRUE(stranger->handler.ups.empty());
}

TEST(UvTransportTlsTest, ATlsNodeAndAClearTextNodeNeverLink) {
  TestCertificates ca;
  io::UvLoop loop;
  auto tls = StartNode(loop, 1, PeerTls(ca, ca, 1));
  auto clear = StartNode(loop, 2, nullptr);
  clear->transport->AddPeerAddress(tls->address());
  tls->transport->AddPeerAddress(clear->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return tls->transport->refused() >= 2 && clear->transport->refused() >= 1; }));
  RunFor(loop, 300);
  EXPECT_FALSE(tls->transport->connected(2));
  EXPECT_FALSE(clear->transport->connected(1));
  EXPECT_TRUE(tls->handler.ups.empty());
  EXPECT_TRUE(clear->handler.ups.empty());
}

// The wire between two nodes holds no frame in clear: a marker sent as a
// frame body is not among the bytes a relay saw, while the same relay
// between clear-text nodes does see it (the capture works).
TEST(UvTransportTlsTest, BytesOnTheWireAreNotClearText) {
  const std::string marker = "MARKER-3f9c1e-payload-in-a-frame";
  TestCertificates ca;
  for (const bool encrypted : {false, true}) {
    SCOPED_TRACE(encrypted ? "TLS" : "clear text");
    io::UvLoop loop;
    auto a = StartNode(loop, 1, encrypted ? PeerTls(ca, ca, 1) : nullptr);
    auto b = StartNode(loop, 2, encrypted ? PeerTls(ca, ca, 2) : nullptr);
    CapturingRelay relay(loop, PortOf(a->address()));
    b->transport->AddPeerAddress(relay.address());
    ASSERT_TRUE(RunUntil(loop, [&] { return b->transport->connected(1) && a->transport->connected(2); }));
    ASSERT_EQ(b->transport->Send(1, 0x20, marker), SendResult::kQueued);
    ASSERT_EQ(a->transport->Send(2, 0x20, marker), SendResult::kQueued);
    ASSERT_TRUE(RunUntil(loop, [&] { return a->handler.frames.size() == 1 && b->handler.frames.size() == 1; }));
    EXPECT_EQ(a->handler.frames[0], marker);
    EXPECT_EQ(b->handler.frames[0], marker);
    EXPECT_GT(relay.captured().size(), marker.size());
    const bool seen = relay.captured().find(marker) != std::string::npos;
    EXPECT_EQ(seen, !encrypted);
    // Nor the hello's advertised address (link metadata is inside TLS too).
    if (encrypted) {
      EXPECT_EQ(relay.captured().find(a->address()), std::string::npos);
    }
    a->transport->Close();
    b->transport->Close();
  }
}

TEST(UvTransportTlsTest, ReloadedCertificatesServeNewLinks) {
  TestCertificates ca;
  io::UvLoop loop;
  auto tls_a = PeerTls(ca, ca, 1);
  auto a = StartNode(loop, 1, tls_a);
  auto b = StartNode(loop, 2, PeerTls(ca, ca, 2));
  b->transport->AddPeerAddress(a->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
  ASSERT_TRUE(tls_a->Reload().has_value());
  b->transport->RemovePeer(1);
  b->transport->AddPeerAddress(a->address());
  ASSERT_TRUE(RunUntil(loop, [&] { return b->transport->connected(1) && b->handler.ups.size() == 2; }));
}

// Not a test of correctness: frames/s of 100-byte frames with and without
// TLS on one loop (both ends on one core), printed for docs/benchmarks.md.
TEST(UvTransportTlsTest, ThroughputOfSmallFramesWithAndWithoutTls) {
  TestCertificates ca;
  for (const bool encrypted : {false, true}) {
    io::UvLoop loop;
    auto a = StartNode(loop, 1, encrypted ? PeerTls(ca, ca, 1) : nullptr);
    auto b = StartNode(loop, 2, encrypted ? PeerTls(ca, ca, 2) : nullptr);
    a->transport->AddPeerAddress(b->address());
    ASSERT_TRUE(RunUntil(loop, [&] { return a->transport->connected(2) && b->transport->connected(1); }));
    constexpr uint32_t kFrames = 1'000'000;
    const std::string body(100, 'm');
    b->handler.keep_frames = false;
    const int64_t start = io::SystemClock::Instance().NowMs();
    uint32_t sent = 0;
    ASSERT_TRUE(RunUntil(loop, [&] {
      for (int i = 0; i < 1000 && sent < kFrames; ++i) {
        if (a->transport->Send(2, 0x20, body) != SendResult::kQueued) break;
        ++sent;
      }
      return b->handler.frame_count == kFrames;
    }, 120'000));
    const int64_t took = std::max<int64_t>(1, io::SystemClock::Instance().NowMs() - start);
    std::printf("links throughput (%s): %u frames of 100 B in %lld ms = %.0f frames/s\n",
                encrypted ? "TLS 1.3" : "clear text", kFrames, static_cast<long long>(took),
                kFrames * 1000.0 / took);
  }
}

}  // namespace
}  // namespace estuary::cluster

namespace estuary::cluster {
namespace {

// As UvTransportTest.SlowReaderFillsTheBoundedQueueThenWritableAgain, over
// TLS: frames waiting for encryption count in the queue, so a reader that
// stops reading makes Send return kFull near the high watermark, and
// OnWritable follows once it reads again.
TEST(UvTransportTlsTest, SlowReaderFillsTheBoundedQueueThenWritableAgain) {
  TestCertificates ca;
  io::UvLoop loop;
  io::UvLoop paused;  // b's loop: run only when the test says
  auto run_both = [&](const std::function<bool()>& done) {
    const int64_t deadline = io::SystemClock::Instance().NowMs() + 10'000;
    while (!done() && io::SystemClock::Instance().NowMs() < deadline) {
      uv_run(loop.raw(), UV_RUN_ONCE);
      uv_run(paused.raw(), UV_RUN_NOWAIT);
    }
    return done();
  };
  struct Writable final : LinkHandler {
    void OnPeerUp(const PeerInfo&) override {}
    void OnPeerDown(NodeId) override {}
    void OnFrame(NodeId, uint8_t, std::string_view) override { ++frames; }
    void OnWritable(NodeId) override { ++writable; }
    size_t frames = 0;
    int writable = 0;
  } a_handler, b_handler;
  auto make = [&](io::UvLoop& on, NodeId id, LinkHandler& handler) {
    UvTransportConfig config;
    config.self = id;
    config.secret = "cluster-secret";
    config.heartbeat_ms = 40;
    config.dead_after_ms = 20'000;  // b's silence is not the point
    config.queue_low_bytes = 256 << 10;
    config.queue_high_bytes = 1 << 20;
    config.seed = id;
    config.tls = PeerTls(ca, ca, id);
    auto transport = std::make_unique<UvTransport>(on, std::move(config));
    transport->set_handler(&handler);
    EXPECT_TRUE(transport->Listen({"127.0.0.1", 0}).has_value());
    return transport;
  };
  auto a = make(loop, 1, a_handler);
  auto b = make(paused, 2, b_handler);
  a->AddPeerAddress(b->advertised_address());
  ASSERT_TRUE(run_both([&] { return a->connected(2) && b->connected(1); }));
  const std::string chunk(64 << 10, 'q');
  uint64_t sent = 0;
  size_t max_queued = 0;
  bool full = false;
  auto queued = [&] {
    for (const auto& s : a->stats()) {
      if (s.node == 2) return s.queued_bytes;
    }
    return size_t{0};
  };
  const int64_t deadline = loop.NowMs() + 10'000;
  while (!full && loop.NowMs() < deadline) {
    SendResult result = SendResult::kQueued;
    for (int i = 0; i < 64 && result == SendResult::kQueued; ++i) {
      result = a->Send(2, 0x20, chunk);
      if (result == SendResult::kQueued) ++sent;
      max_queued = std::max(max_queued, queued());
    }
    uv_run(loop.raw(), UV_RUN_NOWAIT);  // b's loop stays paused
    uv_run(loop.raw(), UV_RUN_NOWAIT);
    full = a->Send(2, 0x20, chunk) == SendResult::kFull;
    if (!full) ++sent;
  }
  ASSERT_TRUE(full) << "sent " << sent << " chunks without filling the queue";
  // The high watermark, plus what one Send adds and the plaintext waiting
  // to be encrypted, plus TLS record overhead.
  EXPECT_LE(max_queued, (1u << 20) + (256u << 10) + 2 * chunk.size());
  const int writable_before = a_handler.writable;
  ASSERT_TRUE(run_both([&] { return a_handler.writable > writable_before; }));
  ASSERT_TRUE(run_both([&] { return b_handler.frames == sent; }));
  EXPECT_EQ(a->Send(2, 0x20, "more"), SendResult::kQueued);
  a.reset();
  b.reset();
}

}  // namespace
}  // namespace estuary::cluster
