#pragma once
// The fixture of the AmqpConnection tests: a Proton client driver talks to
// the server connection through a MemoryStream, on simulated time.
#include "frontends/amqp/session/connection.h"

#include <gtest/gtest.h>
#include <proton/connection_options.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>
#include <proton/source_options.hpp>
#include <proton/target_options.hpp>

#include <cstring>
#include <deque>
#include <set>
#include <string>

#include "frontends/amqp/session/c_access.h"
#include "io/sim/sim_loop.h"

namespace estuary::amqp::testing_support {


class InlineLink final : public core::ShardLink {
 public:
  void Post(uint16_t, std::function<void(core::ShardBroker&)> work) override { work(*broker); }
  core::ShardBroker* broker = nullptr;
};

struct ClientHandler : proton::messaging_handler {
  void on_connection_open(proton::connection&) override { opened = true; }
  void on_receiver_open(proton::receiver&) override { ++receivers_open; }
  void on_sender_open(proton::sender&) override { ++senders_open; }
  void on_message(proton::delivery& delivery, proton::message& message) override {
    bodies.push_back(proton::get<proton::binary>(message.body()));
    if (receiver_second) {  // rcv-settle-mode second: an outcome, not settled
      if (defer_outcomes) {
        deferred.push_back(delivery);
      } else {
        pn_delivery_update(CObject::Of(delivery), PN_ACCEPTED);
      }
      return;
    }
    if (releases_left > 0) {
      --releases_left;
      delivery.release();
    } else {
      delivery.accept();
    }
  }
  void on_tracker_accept(proton::tracker& tracker) override {
    ++accepted;
    accepted_trackers.push_back(tracker);
  }
  // A receiver's delivery the server settled (mode second: after our outcome).
  void on_delivery_settle(proton::delivery& delivery) override {
    ++settled_by_server;
    delivery.settle();
  }
  void on_sender_close(proton::sender& sender) override { link_errors.push_back(sender.error().name()); }
  void on_receiver_close(proton::receiver& receiver) override { link_errors.push_back(receiver.error().name()); }
  void on_transport_error(proton::transport& transport) override { transport_error = transport.error().name(); }
  void on_error(const proton::error_condition&) override {}
  bool opened = false;
  int receivers_open = 0;
  int senders_open = 0;
  int accepted = 0;
  int releases_left = 0;  // release this many deliveries first, then accept
  bool receiver_second = false;  // answer deliveries accepted without settling them
  bool defer_outcomes = false;   // ... and only when the test says (deferred)
  std::vector<proton::delivery> deferred;
  std::vector<proton::tracker> accepted_trackers;
  int settled_by_server = 0;
  std::vector<std::string> bodies;
  std::vector<std::string> link_errors;
  std::string transport_error;
};

class AmqpConnectionTest : public ::testing::Test {
 protected:
  explicit AmqpConnectionTest(core::BrokerLimits limits = {})
      : loop_(clock_), broker_(Config(limits), loop_, link_, metrics_) {
    link_.broker = &broker_;
  }
  static core::ShardConfig Config(core::BrokerLimits limits) {
    core::ShardConfig config;
    config.node_id = 3;
    config.limits = limits;
    return config;
  }
  void Start(AmqpSettings settings = {}, SessionClaims claims = {}) {
    server_ = std::make_shared<AmqpConnection>(broker_, stream_, std::move(settings));
    server_->BindSessionClaims(std::move(claims));
    if (ledger_) server_->BindInboundLedger(ledger_);
    server_->Start();
    client_.connect(proton::connection_options(handler_).container_id("unit-client"));
    Pump();
  }
  // Moves bytes both ways until neither side has anything to say.
  void Pump() {
    for (int round = 0; round < 100; ++round) {
      bool moved = false;
      while (client_.has_events()) client_.dispatch();
      for (auto out = client_.write_buffer(); out.size > 0; out = client_.write_buffer()) {
        server_->OnBytes(std::string_view(static_cast<const char*>(out.data), out.size));
        client_.write_done(out.size);
        moved = true;
      }
      loop_.RunUntilIdle();
      stream_.Flush();
      if (!stream_.written.empty()) {
        std::string bytes = std::move(stream_.written);
        stream_.written.clear();
        size_t offset = 0;
        while (offset < bytes.size()) {
          auto in = client_.read_buffer();
          if (in.size == 0) break;
          const size_t n = std::min(in.size, bytes.size() - offset);
          std::memcpy(in.data, bytes.data() + offset, n);
          client_.read_done(n);
          offset += n;
          while (client_.has_events()) client_.dispatch();
        }
        moved = true;
      }
      if (!moved && !client_.has_events()) return;
    }
  }

  io::ManualClock clock_;
  io::SimLoop loop_;
  InlineLink link_;
  core::ShardMetrics metrics_;
  core::ShardBroker broker_;
  io::MemoryStream stream_;
  std::shared_ptr<AmqpConnection> server_;
  std::shared_ptr<InboundLedger> ledger_;  // set before Start to bind one
  ClientHandler handler_;
  proton::io::connection_driver client_{"unit"};
};

}  // namespace estuary::amqp::testing_support
