// estuary-bench: the MQTT and AMQP 1.0 load generator. See tools/bench/README.md.
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
  auto publish = estuary::io::ParseEndpoint(options->publish_broker);
  auto subscribe = estuary::io::ParseEndpoint(options->subscribe_broker);
  if (!publish || !subscribe) {
    std::fprintf(stderr, "estuary-bench: --broker: %s\n", (publish ? subscribe : publish).error().c_str());
    return 2;
  }
  // A broker closing a socket mid-write must surface as an error, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  estuary::bench::StopEarlyOnSignal();
  return options->idle ? estuary::bench::RunIdle(*options, *publish)
                       : estuary::bench::RunTraffic(*options, {*publish, *subscribe});
}
