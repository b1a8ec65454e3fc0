#include "tools/bench/run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "tools/bench/payload.h"
#include "tools/bench/plot.h"
#include "tools/bench/report.h"
#include "tools/bench/run_board.h"
#include "tools/bench/worker.h"

namespace estuary::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::atomic<bool> stop_requested{false};

void OnStopSignal(int signal_number) {
  stop_requested.store(true);
  std::signal(signal_number, SIG_DFL);
}

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Spreads clients over at most options.threads workers, round-robin in the
// order publishers, subscribers (or idle connections).
std::vector<Assignment> Assign(const Options& options) {
  const uint32_t clients = options.idle ? options.connections : options.publishers + options.subscribers;
  std::vector<Assignment> assignments(std::min(options.threads, clients));
  uint32_t next = 0;
  auto take = [&]() -> Assignment& { return assignments[next++ % assignments.size()]; };
  if (options.idle) {
    for (uint32_t n = 0; n < options.connections; ++n) take().idle.push_back(n);
    return assignments;
  }
  for (uint32_t p = 0; p < options.publishers; ++p) take().publishers.push_back(p);
  for (uint32_t s = 0; s < options.subscribers; ++s) take().subscribers.push_back(s);
  return assignments;
}

class Crew {
 public:
  Crew(const Options& options, const TopicPlan& plan, const BrokerEndpoints& brokers, RunBoard& board) {
    for (Assignment& assignment : Assign(options)) {
      workers_.push_back(std::make_unique<Worker>(options, plan, brokers, std::move(assignment), board));
    }
    for (auto& worker : workers_) worker->Start();
  }
  ~Crew() { FinishAndJoin(); }

  void FinishAndJoin() {
    if (finished_) return;
    finished_ = true;
    for (auto& worker : workers_) worker->Finish();
    for (auto& worker : workers_) worker->Join();
  }
  size_t size() const { return workers_.size(); }
  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& worker : workers_) fn(*worker);
  }
  uint64_t Sum(std::atomic<uint64_t> LiveCounters::*field) const {
    uint64_t total = 0;
    for (const auto& worker : workers_) total += (worker->live().*field).load(std::memory_order_relaxed);
    return total;
  }
  bool AllSendingDone() const {
    return std::all_of(workers_.begin(), workers_.end(),
                       [](const auto& w) { return w->live().sending_done.load(); });
  }
  std::vector<WorkerResult> Results() const {
    std::vector<WorkerResult> results;
    for (const auto& worker : workers_) results.push_back(worker->result());
    return results;
  }

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
  bool finished_ = false;
};

// Prints a progress line once per second while stdout is a terminal (to
// stderr with --json, so the JSON stays alone on stdout).
class ProgressLine {
 public:
  ProgressLine(const Options& options, Crew& crew, int64_t start_ns)
      : enabled_(isatty(STDOUT_FILENO) == 1), out_(options.json ? stderr : stdout), crew_(crew),
        start_ns_(start_ns), last_ns_(start_ns) {}

  void MaybePrint() {
    if (!enabled_) return;
    const int64_t now = MonotonicNowNs();
    if (now - last_ns_ < 1'000'000'000) return;
    last_ns_ = now;
    Progress current{static_cast<double>(now - start_ns_) / 1e9, crew_.Sum(&LiveCounters::sent),
                     crew_.Sum(&LiveCounters::received)};
    std::fprintf(out_, "%s\n", FormatProgress(current, previous_).c_str());
    std::fflush(out_);
    previous_ = current;
  }

 private:
  bool enabled_;
  std::FILE* out_;
  Crew& crew_;
  int64_t start_ns_;
  int64_t last_ns_;
  Progress previous_;
};

int Fail(const std::string& error) {
  std::fprintf(stderr, "estuary-bench: %s\n", error.c_str());
  return 1;
}

bool ConnectAll(const Options& options, Crew& crew, RunBoard& board) {
  board.WaitUntil(After(options.connect_timeout_s),
                  [&] { return board.ready() == crew.size() || board.fatal_error() || stop_requested.load(); },
                  milliseconds(100));
  return board.ready() == crew.size() && !board.fatal_error();
}

// How long a --count run may go without sending anything before it is
// given up (a broker that stopped acknowledging): the drain timeout, at
// least a second, plus two pacing intervals of a publisher.
std::chrono::duration<double> StallLimit(const Options& options) {
  double seconds = std::max(options.drain_timeout_s, 1.0);
  if (options.paced()) seconds += 2.0 * options.publishers / options.rate;
  return std::chrono::duration<double>(seconds);
}

// Publishes until every publisher is done (--count) or for --duration.
void Publish(const Options& options, Crew& crew, RunBoard& board, ProgressLine& progress) {
  const auto stop_at = options.counted() ? Clock::time_point::max() : After(options.duration_s);
  uint64_t last_sent = 0;
  auto last_change = Clock::now();
  while (!board.fatal_error() && !crew.AllSendingDone() && !stop_requested.load()) {
    progress.MaybePrint();
    const auto now = Clock::now();
    if (now >= stop_at) break;
    board.WaitUntil(std::min(stop_at, now + milliseconds(100)),
                    [&] { return crew.AllSendingDone() || board.fatal_error().has_value(); }, milliseconds(100));
    const uint64_t sent = crew.Sum(&LiveCounters::sent);
    if (sent != last_sent) {
      last_sent = sent;
      last_change = Clock::now();
    } else if (options.counted() && Clock::now() - last_change > StallLimit(options)) {
      break;
    }
  }
  crew.ForEach([](Worker& worker) { worker.StopPublishing(); });
  board.WaitUntil(After(1.0), [&] { return crew.AllSendingDone(); }, milliseconds(10));
}

// Waits for acknowledgements and deliveries still in flight.
void Drain(const Options& options, Crew& crew, RunBoard& board, ProgressLine& progress) {
  const auto deadline = After(options.drain_timeout_s);
  board.WaitUntil(deadline,
                  [&] {
                    progress.MaybePrint();
                    return board.fatal_error() || stop_requested.load() ||
                           (crew.Sum(&LiveCounters::inflight) == 0 &&
                            crew.Sum(&LiveCounters::unique_received) >= crew.Sum(&LiveCounters::expected));
                  },
                  milliseconds(10));
}

void PrintTraffic(const Options& options, const Summary& summary) {
  if (options.json) {
    std::printf("%s\n", ToJson(options, summary).dump().c_str());
  } else {
    std::printf("%s", FormatText(options, summary).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

void StopEarlyOnSignal() {
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

TrafficOutcome MeasureTraffic(const Options& options, const io::Endpoint& broker) {
  return MeasureTraffic(options, BrokerEndpoints{broker, broker});
}

TrafficOutcome MeasureTraffic(const Options& options, const BrokerEndpoints& brokers) {
  const TopicPlan plan(options.pattern, options.topic_prefix, options.publishers, options.subscribers);
  RunBoard board;
  Crew crew(options, plan, brokers, board);
  if (!ConnectAll(options, crew, board)) {
    crew.FinishAndJoin();
    TrafficOutcome outcome;
    outcome.error = board.fatal_error().value_or(
        stop_requested.load() ? std::string("interrupted while connecting")
                              : fmt::format("timed out after {} s waiting for every client to be ready "
                                            "(MQTT CONNACK/SUBACK, AMQP open/attach) from {}",
                                            options.connect_timeout_s, Describe(options)));
    return outcome;
  }
  // A little ahead, so every worker has the command before the first message is due.
  const int64_t start_ns = MonotonicNowNs() + 2'000'000;
  crew.ForEach([&](Worker& worker) { worker.StartPublishing(start_ns); });
  ProgressLine progress(options, crew, start_ns);
  Publish(options, crew, board, progress);
  Drain(options, crew, board, progress);
  crew.FinishAndJoin();
  return {Summarize(crew.Results(), plan, options.publishers, options.payload_size, start_ns),
          board.fatal_error()};
}

int RunTraffic(const Options& options, const BrokerEndpoints& brokers) {
  const TrafficOutcome outcome = MeasureTraffic(options, brokers);
  // Without a single connection there is nothing to report but the error.
  if (outcome.summary.sent > 0 || !outcome.error) PrintTraffic(options, outcome.summary);
  if (outcome.error) return Fail(*outcome.error);
  if (!options.plot.empty()) {
    const std::string title = fmt::format("estuary-bench: {}", Describe(options));
    if (auto drawn = WritePlot(options.plot, outcome.summary, title); !drawn) return Fail(drawn.error());
  }
  return 0;
}

IdleSummary MeasureIdle(const Options& options, const io::Endpoint& broker,
                        const std::function<void(const IdleSummary&)>& on_connected) {
  const TopicPlan plan(Pattern::kOneTopic, options.topic_prefix, 0, 0);
  RunBoard board;
  const int64_t start_ns = MonotonicNowNs();
  Crew crew(options, plan, BrokerEndpoints{broker, broker}, board);
  board.WaitUntil(Clock::time_point::max(), [&] { return board.ready() == crew.size() || stop_requested.load(); },
                  milliseconds(100));
  IdleSummary summary;
  summary.requested = options.connections;
  summary.connect_seconds = static_cast<double>(MonotonicNowNs() - start_ns) / 1e9;
  crew.ForEach([&](Worker& worker) {
    summary.connected += worker.connected();
    summary.tls_resumed += worker.tls_resumed();
    summary.failed += worker.failed();
  });
  if (on_connected) on_connected(summary);
  board.WaitUntil(After(options.duration_s), [] { return stop_requested.load(); }, milliseconds(100));
  uint32_t still_connected = 0;
  crew.ForEach([&](Worker& worker) { still_connected += worker.connected(); });
  crew.FinishAndJoin();
  summary.dropped = summary.connected - std::min(summary.connected, still_connected);
  summary.first_error = board.first_error();
  return summary;
}

int RunIdle(const Options& options, const io::Endpoint& broker) {
  const IdleSummary summary = MeasureIdle(options, broker, [](const IdleSummary& connected) {
    std::fprintf(stderr, "estuary-bench idle ready connected=%u failed=%u\n", connected.connected,
                 connected.failed);
    std::fflush(stderr);
  });
  if (options.json) {
    std::printf("%s\n", IdleToJson(options, summary).dump().c_str());
  } else {
    std::printf("%s", FormatIdleText(options, summary).c_str());
  }
  std::fflush(stdout);
  if (summary.connected < summary.requested) {
    return Fail(std::to_string(summary.requested - summary.connected) + " of " +
                std::to_string(summary.requested) + " connections failed: " + summary.first_error);
  }
  return 0;
}

}  // namespace estuary::bench
