#pragma once
// FakeAmqpBroker: a small AMQP 1.0 broker for estuary-bench's tests, on its
// own thread and libuv loop, listening on 127.0.0.1 port 0, driving Proton's
// connection driver as a server.
//
// Accepts connections (SASL ANONYMOUS, or no SASL layer), sessions and
// links; a message sent to target address A is delivered to every receiver
// attached with source address A (exact match), pre-settled or not as the
// receiver asked, each receiver's backlog held until it grants credit.
// Knobs: the credit granted to senders, refusing attaches to one address
// (amqp:not-found), rejecting every unsettled message. Test-only: no
// wildcards, no durability, unbounded backlogs.
#include <atomic>
#include <cstdint>
#include <future>
#include <string>
#include <thread>

#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"

namespace estuary::bench::testing {

struct FakeAmqpBrokerConfig {
  bool sasl = true;                // offer SASL ANONYMOUS; false: plain AMQP
  uint32_t sender_credit = 500;    // credit granted to each client sender, topped up at half
  std::string refuse_address;      // attaches to this address get amqp:not-found
  bool reject_unsettled = false;   // answer unsettled transfers with rejected (and drop them)
};

class FakeAmqpBroker {
 public:
  explicit FakeAmqpBroker(FakeAmqpBrokerConfig config = {});
  ~FakeAmqpBroker();  // stops the loop and joins
  io::Endpoint endpoint() const { return {"127.0.0.1", port_}; }
  uint64_t transfers_received() const { return transfers_.load(); }

 private:
  class Hub;

  FakeAmqpBrokerConfig config_;
  std::thread thread_;
  std::promise<void> listening_;
  io::UvLoop* loop_ = nullptr;
  uint16_t port_ = 0;
  std::atomic<uint64_t> transfers_{0};
};

}  // namespace estuary::bench::testing
