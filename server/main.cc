// estuaryd: one Estuary broker node.
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>

#include "io/uv/log_setup.h"
#include "server/config.h"
#include "server/node.h"

int main(int argc, char** argv) {
  auto outcome = estuary::server::ParseCommandLine(argc, argv);
  if (auto* exit = std::get_if<estuary::server::ExitRequest>(&outcome)) return exit->status;
  const auto& config = std::get<estuary::server::NodeConfig>(outcome);

  // Logs go to stderr or --log-file; stdout carries only the ready line, for scripts.
  if (auto logging = estuary::io::SetUpLogging("estuaryd", config.log_level, config.log,
                                               "%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
      !logging) {
    std::fprintf(stderr, "estuaryd: error: %s\n", logging.error().c_str());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);  // a peer gone mid-write must not kill the broker

  estuary::server::Node node(config);
  // A reload (SIGHUP, POST /api/reload) parses the same command line again,
  // so the --config file is read again and flags still win over it.
  node.set_config_source([args = std::vector<std::string>(argv, argv + argc)] {
    return estuary::server::ParseConfigForReload(args);
  });
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
