#pragma once
// Worker: one client thread with its own libuv loop and a share of the
// connections (--threads spreads them round-robin), MQTT or AMQP 1.0 by
// side (Options::publish_protocol, subscribe_protocol).
//
// The coordinator thread creates workers, Start()s them and then drives
// them only through the commands below, which cross into the worker's loop
// by its Mailbox; Finish() is the last command. Each worker reports to the
// RunBoard and shares LiveCounters while it runs; its WorkerResult is read
// after Join().
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "io/uv/tcp.h"
#include "io/uv/uv_loop.h"
#include "tools/bench/bench_client.h"
#include "tools/bench/live_counters.h"
#include "io/tls/tls_context.h"
#include "io/tls/tls_session.h"
#include "tools/bench/options.h"
#include "tools/bench/publisher.h"
#include "tools/bench/run_board.h"
#include "tools/bench/stats.h"
#include "tools/bench/subscriber_tally.h"
#include "tools/bench/topic_plan.h"

namespace estuary::bench {

// Where publishers and subscribers connect (the same broker, or two
// protocols of one broker in a mixed run). Idle connections use `publish`.
struct BrokerEndpoints {
  io::Endpoint publish;
  io::Endpoint subscribe;
};

struct Assignment {
  std::vector<uint32_t> publishers;   // global publisher indexes
  std::vector<uint32_t> subscribers;  // global subscriber indexes
  std::vector<uint32_t> idle;         // idle mode: global connection numbers
};

class Worker {
 public:
  Worker(const Options& options, const TopicPlan& plan, BrokerEndpoints brokers, Assignment assignment,
         RunBoard& board);
  ~Worker();  // joins the thread
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts the thread and its connections; returns once its loop exists.
  void Start();
  void StartPublishing(int64_t start_ns);
  void StopPublishing();
  // Disconnects every client and ends the thread.
  void Finish();
  void Join();

  const LiveCounters& live() const { return live_; }
  uint32_t connected() const { return connected_.load(); }  // ready now
  uint32_t tls_resumed() const { return tls_resumed_.load(); }  // --tls-resume: handshakes that resumed
  uint32_t failed() const { return failed_.load(); }        // never got ready
  uint32_t dropped() const { return dropped_.load(); }      // lost after being ready
  const WorkerResult& result() const { return result_; }   // after Join()

 private:
  struct Slot {
    std::shared_ptr<BenchClient> client;
    bool ready = false;
    bool failed = false;
  };

  void ThreadMain();
  void CreateClients();
  // A client of `protocol`: publishing to `topic` if set, subscribed to `filters`.
  void AddClient(Protocol protocol, const io::Endpoint& broker, uint64_t ordinal, std::string client_id,
                 std::string topic, std::vector<std::string> filters, BenchClient::Handlers handlers);
  std::shared_ptr<BenchClient> MakeMqttClient(const io::Endpoint& broker, uint64_t ordinal,
                                              std::string client_id, std::vector<std::string> filters,
                                              BenchClient::Handlers handlers);
  std::shared_ptr<BenchClient> MakeAmqpClient(const io::Endpoint& broker, std::string client_id,
                                              std::string topic, std::vector<std::string> filters,
                                              BenchClient::Handlers handlers);
  void StartMoreConnections();
  void OnClientReady(size_t slot);
  void OnClientFailed(size_t slot, const std::string& error);
  void OnPublisherStopped();
  void ArmPing();
  void CloseAll();
  void StopWhenClosed(int attempts_left);
  void CollectResult();

  const Options& options_;
  // --tls-ca: one client context for this thread's connections, or why it
  // could not be built (every MQTT client then fails with it).
  std::shared_ptr<ssl_ctx_st> tls_context_;
  std::string tls_error_;
  const TopicPlan& plan_;
  BrokerEndpoints brokers_;
  Assignment assignment_;
  RunBoard& board_;
  std::thread thread_;
  std::promise<void> loop_created_;
  io::UvLoop* loop_ = nullptr;  // lives in ThreadMain's frame

  // Loop thread only.
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  std::vector<std::unique_ptr<SubscriberTally>> tallies_;
  size_t next_to_start_ = 0;
  uint32_t connecting_ = 0;
  uint32_t resolved_ = 0;  // slots ready or failed
  bool reported_ready_ = false;
  io::TimerId ping_timer_ = 0;
  WorkerResult result_;

  LiveCounters live_;
  std::atomic<uint32_t> connected_{0};
  std::shared_ptr<ssl_session_st> tls_ticket_;  // --tls-resume: the last ticket a connection got
  std::atomic<uint32_t> tls_resumed_{0};
  std::atomic<uint32_t> failed_{0};
  std::atomic<uint32_t> dropped_{0};
};

}  // namespace estuary::bench
