#pragma once
// Publisher: drives one publishing connection. Paces messages with loop
// timers (--rate) or sends as fast as the bounds allow: the in-flight
// window for QoS 1/2, the socket's queued bytes for QoS 0. Stamps each
// payload with the run id, its index, a sequence number and the send time.
//
// Owned by a Worker, on the worker's loop thread. The Worker forwards the
// client's acknowledgement and drain events to OnAck and OnDrain.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "frontends/mqtt/codec/packet.h"
#include "io/uv/uv_loop.h"
#include "tools/bench/bench_client.h"
#include "tools/bench/inflight_window.h"
#include "tools/bench/live_counters.h"
#include "tools/bench/options.h"
#include "tools/bench/pacer.h"
#include "tools/bench/stats.h"

namespace estuary::bench {

class Publisher {
 public:
  struct Setup {
    uint32_t index = 0;
    std::string topic;
    uint32_t coverage = 0;  // subscribers expecting each message
  };
  Publisher(io::UvLoop& loop, const Options& options, Setup setup, WorkerResult& result,
            LiveCounters& live, std::function<void()> on_stopped);
  ~Publisher();

  void set_client(std::shared_ptr<BenchClient> client) { client_ = std::move(client); }
  // Starts sending; the first message is due at start_ns.
  void Begin(int64_t start_ns);
  // No new messages from now on; the ones in flight may still be acknowledged.
  void Stop(int64_t now_ns);
  void OnAck(uint16_t packet_id, bool ok);
  void OnDrain() { Pump(); }

  bool sending() const { return sending_; }
  PublisherResult result() const { return {setup_.index, sequence_}; }

 private:
  void Pump();
  bool Blocked() const;
  void SendOne();
  void Arm(int64_t delay_ms);

  io::UvLoop& loop_;
  const Options& options_;
  Setup setup_;
  WorkerResult& result_;
  LiveCounters& live_;
  std::function<void()> on_stopped_;
  std::shared_ptr<BenchClient> client_;
  mqtt::PublishPacket fields_;  // topic and QoS, reused for every message
  std::string payload_;
  InflightWindow window_;
  std::optional<Pacer> pacer_;
  uint64_t sequence_ = 0;  // next sequence number = messages sent
  bool sending_ = false;
  io::TimerId timer_ = 0;
};

}  // namespace estuary::bench
