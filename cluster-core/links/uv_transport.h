#pragma once
// UvTransport: the Transport over TCP on a libuv loop (docs/internode.md).
//
// One authenticated TCP link per peer node: dialled to every address given
// to AddPeerAddress (redialled with backoff while unreachable) or accepted
// on the listener. Peers prove the cluster secret by HMAC challenge-response
// before any cluster frame passes. Frames Sent to one peer within one loop
// iteration leave in one write. Each peer's send queue is bounded: above
// queue_high_bytes Send returns kFull, and OnWritable follows once it fell
// below queue_low_bytes.
//
// With config.tls, every link is TLS first (the dialler is the TLS
// client, both sides present certificates of the cluster CA), then the
// same hello and HMAC handshake inside it; a peer whose certificate does
// not verify is refused with a log line saying why (refused() counts it).
//
// Threading: belongs to the loop's thread; every method and every handler
// call happens there. The handler may call any method from inside a
// callback (including Close), but must not destroy the UvTransport there.
// Close() and the destructor call no handler; RemovePeer(node) calls
// OnPeerDown(node) at once if the node was up. Send refuses (kNoLink, and
// logs an error) a link-layer type (< 0x10) or a body over max_frame_bytes:
// both are caller bugs. stats() keeps every node ever linked (up or not).
// Every failed dial goes to the dial observer (Transport::set_dial_observer):
// kRefused for ECONNREFUSED, kOther for the rest (timeouts included). The
// first redial after a link loss comes within backoff_min_ms.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/expected.h"
#include "cluster-core/links/frame.h"
#include "cluster-core/links/transport.h"
#include "io/tls/tls_context.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"

namespace estuary::cluster {

struct UvTransportConfig {
  NodeId self = 1;
  std::string advertised_address;  // this node's cluster "HOST:PORT", sent in the hello
  std::string secret;              // cluster secret; empty = refuse to start links (Listen returns an error)
  // Mutual TLS under the handshake (--cluster-tls-*, docs/internode.md
  // "TLS"): a TlsContext::CreatePeer context; null = clear text. Both ends
  // must agree: a TLS node and a clear-text one never link.
  std::shared_ptr<io::TlsContext> tls;
  // With tls (--cluster-tls-node-names): a peer's certificate must name the
  // node id of its hello as its subject CN, "estuary-node-<id>" (what
  // estuary-cluster issues), or the link is refused: a node's certificate
  // then proves which node it is, beside the secret's HMAC.
  bool tls_node_names = false;
  uint32_t heartbeat_ms = 200;     // a heartbeat is sent when nothing else was sent for this long (to a tick, heartbeat_ms / 4)
  uint32_t dead_after_ms = 1500;   // nothing received for this long: the link is down
  uint32_t backoff_min_ms = 50, backoff_max_ms = 2000;  // redial backoff, doubling, with seeded jitter
  uint32_t handshake_timeout_ms = 2000;
  size_t queue_low_bytes = 1 << 20, queue_high_bytes = 8 << 20;  // per peer; Send -> kFull above high
  uint32_t max_frame_bytes = 64 << 20;
  uint64_t seed = 1;  // jitter and nonces' non-secret parts are seeded; nonces use RAND_bytes
};

class UvTransport final : public Transport {
 public:
  UvTransport(io::UvLoop& loop, UvTransportConfig config);
  ~UvTransport() override;
  UvTransport(const UvTransport&) = delete;
  UvTransport& operator=(const UvTransport&) = delete;

  // Binds the cluster listener (port 0 picks one) and returns the bound
  // port. Fails if the secret is empty or the address cannot be bound.
  // An empty advertised_address, or one with port 0, takes the bound port.
  Expected<uint16_t, std::string> Listen(const io::Endpoint& at);
  void Close();  // closes every link and the listener; idempotent

  struct PeerStats {
    NodeId node;
    std::string address;
    bool up;
    uint64_t frames_in, frames_out, bytes_in, bytes_out, writes, reconnects;
    size_t queued_bytes;
  };
  std::vector<PeerStats> stats() const;

  NodeId self() const override { return config_.self; }
  void AddPeerAddress(const std::string& address) override;
  void RemovePeer(NodeId node) override;
  SendResult Send(NodeId to, uint8_t type, std::string_view body) override;
  bool connected(NodeId node) const override;
  std::vector<PeerInfo> peers() const override;

  // Links refused or dropped for a protocol reason since start (wrong
  // secret, bad version, garbage, oversize, timeout...): for tests and
  // metrics.
  uint64_t refused() const { return refused_; }
  size_t open_links() const { return links_.size(); }  // in handshake or up

  // Fault injection (estuaryd --fault-injection, docs/reliability.md): while
  // isolated, every link is dropped at once (RST, queued frames lost, as a
  // cut cable loses them), accepted connections are reset, and nothing is
  // dialled, so the node is cut off from every peer in both directions while
  // its clients still connect. Un-isolating redials every known address at
  // once. Idempotent. A peer's dial to an isolated node connects and is then
  // reset, never refused: to membership it looks like a silent cut, not a
  // dead process.
  void SetIsolated(bool isolated);
  bool isolated() const { return isolated_; }
  const std::string& advertised_address() const { return config_.advertised_address; }

 private:
  struct Link;
  struct Dialer;
  struct Peer;
  using LinkPtr = std::shared_ptr<Link>;

  void Accept(int fd);
  void Dial(Dialer& dialer);
  void ScheduleRedial(Dialer& dialer);
  void ReportDialFailed(const Link& link, DialError error, const std::string& detail);
  void StartLink(const LinkPtr& link);
  void OnData(const LinkPtr& link, std::string_view bytes);
  void ReadFrames(const LinkPtr& link, std::string_view plaintext);
  void OnFrame(const LinkPtr& link, uint8_t type, std::string_view body);
  void OnLinkFrame(const LinkPtr& link, uint8_t type, std::string_view body);
  void OnHello(const LinkPtr& link, std::string_view body);
  void OnAuth(const LinkPtr& link, std::string_view body);
  bool Arbitrate(const LinkPtr& link);
  void MarkUp(const LinkPtr& link);
  void Refuse(const LinkPtr& link, const std::string& reason);
  void DropLink(const LinkPtr& link, bool abort);
  void Forget(const LinkPtr& link);
  void PeerDown(const LinkPtr& link);
  void WriteFrame(Link& link, uint8_t type, std::string_view body);
  void OnTlsData(const LinkPtr& link, std::string_view ciphertext);
  void TlsEstablished(const LinkPtr& link);
  void EncryptPending(Link& link);  // the link's plaintext frames -> records -> the socket
  void RefuseTls(const LinkPtr& link, const std::string& reason);
  void Tick();

  io::UvLoop& loop_;
  UvTransportConfig config_;
  std::unique_ptr<io::TcpListener> listener_;
  std::unordered_map<uint64_t, LinkPtr> links_;  // every open link, by id
  std::map<std::string, std::unique_ptr<Dialer>> dialers_;  // by address
  std::map<NodeId, Peer> peers_;  // every node ever linked, with its stats
  std::mt19937_64 random_;
  io::TimerId tick_timer_ = 0;
  int64_t last_tick_ms_ = 0;
  uint64_t next_link_id_ = 1;
  uint64_t refused_ = 0;
  bool closed_ = false;
  bool isolated_ = false;  // SetIsolated
};

}  // namespace estuary::cluster
