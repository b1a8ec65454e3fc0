#pragma once
// What the worker threads count, and the merged figures of a run.
//
// Each worker owns a WorkerResult on its own thread; the coordinator merges
// them after joining the threads (Summarize). Lost messages are computed
// from per-publisher sent counts and per-(subscriber, publisher) distinct
// receive counts, using the TopicPlan to know who expects what.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/bench/histogram.h"
#include "tools/bench/topic_plan.h"

namespace estuary::bench {

struct PublisherResult {
  uint32_t index = 0;
  uint64_t sent = 0;
};

struct SubscriberResult {
  uint32_t index = 0;
  std::vector<uint64_t> unique_by_publisher;  // indexed by publisher
};

struct WorkerResult {
  uint64_t sent = 0;        // PUBLISH packets queued to the socket
  uint64_t acked = 0;       // PUBACK (QoS 1) or PUBCOMP (QoS 2) with success
  uint64_t rejected = 0;    // acknowledgements with an error reason (MQTT 5)
  uint64_t received = 0;    // PUBLISH packets of this run, duplicates included
  uint64_t duplicates = 0;
  uint64_t out_of_order = 0;
  uint64_t foreign = 0;     // PUBLISH packets of another run or unreadable: ignored
  int64_t publish_end_ns = 0;   // the last publisher of this worker stopped sending
  int64_t last_receive_ns = 0;
  LatencyHistogram latency;      // publisher send -> subscriber receive
  LatencyHistogram ack_latency;  // publisher send -> PUBACK / PUBCOMP
  // --plot: end-to-end latency by the second of the run it arrived in
  // (from timeline_start_ns, the start of publishing; -1: before it).
  bool keep_timeline = false;
  int64_t timeline_start_ns = 0;
  std::map<int64_t, LatencyHistogram> latency_by_second;
  std::vector<PublisherResult> publishers;
  std::vector<SubscriberResult> subscribers;
};

struct Summary {
  uint64_t sent = 0, acked = 0, rejected = 0, received = 0, duplicates = 0, out_of_order = 0,
           foreign = 0;
  uint64_t expected = 0;  // sum over subscribers of the messages sent to them
  uint64_t lost = 0;      // expected minus distinct messages received
  double publish_seconds = 0;  // start -> last publisher stopped
  double receive_seconds = 0;  // start -> last message received
  double send_rate = 0, receive_rate = 0;   // messages/s
  double send_mb_s = 0, receive_mb_s = 0;   // payload MB/s (10^6 bytes)
  LatencyHistogram latency;
  LatencyHistogram ack_latency;
  // --plot: one point per second of the run that received messages.
  struct Second {
    double at_s = 0;  // the second's middle, from the start of publishing
    uint64_t received = 0;
    uint64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
  };
  std::vector<Second> timeline;
};

Summary Summarize(const std::vector<WorkerResult>& workers, const TopicPlan& plan,
                  uint32_t publishers, size_t payload_size, int64_t start_ns);

struct IdleSummary {
  uint32_t requested = 0;
  uint32_t connected = 0;
  uint32_t failed = 0;
  uint32_t dropped = 0;  // connected, then lost during the hold
  double connect_seconds = 0;  // until every attempt had an answer
  uint32_t tls_resumed = 0;    // --tls-resume: handshakes that resumed a session
  std::string first_error;
};

}  // namespace estuary::bench
