// estuaryd: one Estuary broker node.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>

#include "server/config.h"
#include "server/node.h"

int main(int argc, char** argv) {
  auto outcome = estuary::server::ParseCommandLine(argc, argv);
  if (auto* exit = std::get_if<estuary::server::ExitRequest>(&outcome)) return exit->status;
  const auto& config = std::get<estuary::server::NodeConfig>(outcome);

  // Logs go to stderr; stdout carries only the ready line, for scripts.
  auto logger = spdlog::stderr_color_mt("estuaryd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  std::signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write must not kill the broker

  estuary::server::Node node(config);
  if (auto started = node.Start(); !started) {
    std::fprintf(stderr, "estuaryd: error: %s\n", started.error().c_str());
    return 1;
  }
  std::printf("%s\n", node.ReadyLine().c_str());
  std::fflush(stdout);
  spdlog::info("node {} running with {} shard(s)", config.node_id, config.shards);
  node.Run();
  spdlog::default_logger()->flush();
  return 0;
}
