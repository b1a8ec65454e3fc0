#pragma once
// The coordinator: runs a whole benchmark on the calling thread, driving
// the Worker threads through its phases, and prints the report.
//
// Traffic: connect every client (CONNACK, SUBACK) or fail; publish for
// --duration or --count; wait up to --drain-timeout for acknowledgements
// and deliveries in flight; disconnect; merge and report.
// Idle: open --connections, print "estuary-bench idle ready connected=N
// failed=F" to stderr once every attempt has an answer (scripts measure the
// broker then), hold them for --duration, report.
//
// Both return the process exit status: 0, or 1 after a connection failure
// (with a one-line error on stderr).
#include <functional>
#include <optional>
#include <string>

#include "io/uv/tcp.h"
#include "tools/bench/options.h"
#include "tools/bench/stats.h"
#include "tools/bench/worker.h"

namespace estuary::bench {

// The figures of a run and, if it ended badly, why (a client could not
// connect or lost its connection).
struct TrafficOutcome {
  Summary summary;
  std::optional<std::string> error;
};
TrafficOutcome MeasureTraffic(const Options& options, const BrokerEndpoints& brokers);
// Publishers and subscribers on one broker.
TrafficOutcome MeasureTraffic(const Options& options, const io::Endpoint& broker);

// `on_connected` runs once every connection attempt has an answer, before
// the hold.
IdleSummary MeasureIdle(const Options& options, const io::Endpoint& broker,
                        const std::function<void(const IdleSummary&)>& on_connected);

// Makes the first SIGINT or SIGTERM end the run early but still report (a
// second one kills as usual).
void StopEarlyOnSignal();

// Measure, print the report (text or --json) and return the exit status.
int RunTraffic(const Options& options, const BrokerEndpoints& brokers);
int RunIdle(const Options& options, const io::Endpoint& broker);

}  // namespace estuary::bench
