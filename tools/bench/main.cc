// estuary-bench: the MQTT load generator. See tools/bench/README.md.
#include <csignal>
#include <cstdio>

#include "io/uv/tcp.h"
#include "tools/bench/options.h"
#include "tools/bench/run.h"

int main(int argc, char** argv) {
  auto options = estuary::bench::ParseOptions(argc, argv);
  if (!options) {
    std::fprintf(options.error().exit_code == 0 ? stdout : stderr, "%s\n", options.error().text.c_str());
    return options.error().exit_code;
  }
  auto broker = estuary::io::ParseEndpoint(options->broker);
  if (!broker) {
    std::fprintf(stderr, "estuary-bench: --broker: %s\n", broker.error().c_str());
    return 2;
  }
  // A broker closing a socket mid-write must surface as an error, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  estuary::bench::StopEarlyOnSignal();
  return options->idle ? estuary::bench::RunIdle(*options, *broker)
                       : estuary::bench::RunTraffic(*options, *broker);
}
