#pragma once
// FakeBroker: a small MQTT broker for estuary-bench's tests, on its own
// thread and libuv loop, listening on 127.0.0.1 port 0.
//
// CONNECT, SUBSCRIBE (plain filters, '+' and '#'), PUBLISH with QoS 0/1/2
// in both directions, PINGREQ, DISCONNECT. Routing delivers each PUBLISH to
// every matching subscription at the lower of the two QoS. Knobs make it
// misbehave on purpose: refuse connections or subscriptions, drop or
// duplicate deliveries, or stop acknowledging. Test-only: no sessions, no
// retained messages, no flow control.
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>

#include "frontends/mqtt/codec/reason_code.h"
#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"

namespace estuary::bench::testing {

struct FakeBrokerConfig {
  mqtt::ReasonCode connack_reason = mqtt::ReasonCode::kSuccess;
  bool refuse_subscriptions = false;
  uint32_t drop_every = 0;       // drop every Nth delivery (0: never)
  uint32_t duplicate_every = 0;  // send every Nth delivery twice (0: never)
  bool acknowledge = true;       // PUBACK/PUBREC/PUBCOMP to publishers
  uint32_t close_after = 0;      // close the connection of the Nth PUBLISH received (0: never)
};

class FakeBroker {
 public:
  explicit FakeBroker(FakeBrokerConfig config = {});
  ~FakeBroker();  // stops the loop and joins
  io::Endpoint endpoint() const { return {"127.0.0.1", port_}; }
  uint64_t connections_accepted() const { return accepted_.load(); }

 private:
  class Hub;
  void Run();

  FakeBrokerConfig config_;
  std::thread thread_;
  std::promise<void> listening_;
  io::UvLoop* loop_ = nullptr;
  uint16_t port_ = 0;
  std::atomic<uint64_t> accepted_{0};
};

}  // namespace estuary::bench::testing
