#pragma once
// AmqpClient: one AMQP 1.0 connection of estuary-bench.
//
// Qpid Proton's connection driver (the engine under Proton C++) on the
// worker's libuv loop: TcpConnection does the IO, the driver the protocol,
// a loop timer its idle-timeout ticks. No Proton threads. The C API is used
// rather than Proton C++ because the C++ API cannot send pre-encoded bytes
// and decodes every received message into a proton::message; here a send is
// DataSectionPrefix + payload and a receive reads the body out of the raw
// delivery bytes (amqp_body.h), so per-message state is a delivery tag.
//
// Opens one session, a sender to `target` (if set) and a receiver from each
// of `sources`, and is ready once the broker has attached them all.
// Sending: pre-settled (settled on send), or unsettled with the id as the
// 2-byte delivery tag and on_publish_done(id, accepted) when the broker's
// disposition arrives. Receiving: a credit window of `credit`, topped up
// when half is used; unsettled deliveries are accepted and settled.
//
// Threading and ownership as BenchClient (bench_client.h).
#include <proton/connection_driver.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/uv/tcp.h"
#include "tools/bench/bench_client.h"

namespace estuary::bench {

class AmqpClient final : public BenchClient, public std::enable_shared_from_this<AmqpClient> {
 public:
  struct Config {
    io::Endpoint broker;
    std::string container_id;
    std::string target;                // sender target address; empty: no sender
    std::vector<std::string> sources;  // a receiver per source address
    bool presettled = true;            // settle mode of both directions
    // rcv-settle-mode second on both links (-q 2): the sender settles after
    // the broker's outcome, the receiver after the broker settles.
    bool exactly_once = false;
    uint32_t credit = 1000;
    bool sasl_anonymous = true;
    size_t max_queued_bytes = 1 << 20;  // socket high watermark; low is half
  };

  static std::shared_ptr<AmqpClient> Create(io::UvLoop& loop, Config config, Handlers handlers);
  ~AmqpClient() override;
  AmqpClient(const AmqpClient&) = delete;
  AmqpClient& operator=(const AmqpClient&) = delete;

  void Start() override;
  void Publish(const mqtt::PublishPacket& fields, std::string_view payload) override;
  void Ping() override {}
  void Disconnect() override;

  bool ready() const override { return state_ == State::kReady; }
  bool open() const override;
  bool blocked() const override;

 private:
  enum class State { kIdle, kConnecting, kAttaching, kReady, kClosed };

  AmqpClient(io::UvLoop& loop, Config config, Handlers handlers);
  void OnConnected(int status);
  void OpenEndpoints();
  void OnData(std::string_view bytes);
  void OnClose(int status);
  // Runs the driver's events, writes its output and re-arms the tick timer.
  void Process();
  void ScheduleProcess();
  void ArmTick();
  void Handle(pn_event_t* event);
  void OnLinkRemoteOpen(pn_link_t* link);
  void OnLinkFlow(pn_link_t* link);
  void OnReceived(pn_delivery_t* delivery);
  void OnOutcome(pn_delivery_t* delivery);
  void MaybeReady();
  void Fail(const std::string& error);

  io::UvLoop& loop_;
  Config config_;
  Handlers handlers_;
  std::shared_ptr<io::TcpConnection> connection_;
  State state_ = State::kIdle;
  bool socket_closed_ = false;
  pn_connection_driver_t driver_{};
  bool driver_initialised_ = false;
  bool processing_ = false;
  bool process_posted_ = false;
  pn_link_t* sender_ = nullptr;
  std::vector<pn_link_t*> receivers_;
  uint32_t links_attached_ = 0;
  bool connection_opened_ = false;  // the broker's open arrived
  uint64_t presettled_tag_ = 0;
  std::string prefix_;       // DataSectionPrefix of prefix_size_
  size_t prefix_size_ = SIZE_MAX;
  std::string received_;     // the delivery being read
  int64_t arrival_ns_ = 0;   // when the bytes being processed arrived
  io::TimerId tick_timer_ = 0;
  int64_t tick_deadline_ms_ = 0;
};

}  // namespace estuary::bench
