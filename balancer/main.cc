// estuary-lb: one balancer of the active/standby pair in front of estuaryd.
#include <spdlog/spdlog.h>
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "balancer/balancer.h"
#include "balancer/lb_config.h"
#include "io/uv/log_setup.h"

int main(int argc, char** argv) {
  auto outcome = estuary::balancer::ParseCommandLine(argc, argv);
  if (auto* exit = std::get_if<estuary::balancer::ExitRequest>(&outcome)) return exit->status;
  auto& config = std::get<estuary::balancer::BalancerConfig>(outcome);

  // Logs go to stderr or --log-file; stdout carries only the ready and role lines.
  if (auto logging =
          estuary::io::SetUpLogging("estuary-lb", config.log_level, config.log, "%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
      !logging) {
    std::fprintf(stderr, "estuary-lb: error: %s\n", logging.error().c_str());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);

  uv_signal_t signals[2];  // outlives the loop, which runs their close callbacks
  uv_signal_t hangup;      // SIGHUP: Balancer::Reload
  estuary::io::UvLoop loop;
  int exit_status = 0;
  {
    estuary::balancer::Balancer balancer(loop, std::move(config), [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
    std::function<void()> stop = [&balancer, &loop] { balancer.Stop([&loop] { loop.Stop(); }); };
    for (int i = 0; i < 2; ++i) {
      uv_signal_init(loop.raw(), &signals[i]);
      signals[i].data = &stop;
      uv_signal_start_oneshot(
          &signals[i],
          [](uv_signal_t* handle, int signal) {
            spdlog::info("signal {}: closing listeners and connections", signal);
            (*static_cast<std::function<void()>*>(handle->data))();
          },
          i == 0 ? SIGTERM : SIGINT);
    }
    // SIGHUP reads the command line (and so --config) again.
    std::function<void()> reload = [&balancer, args = std::vector<std::string>(argv, argv + argc)] {
      spdlog::info("received SIGHUP; reloading");
      auto fresh = estuary::balancer::ParseConfigForReload(args);
      if (!fresh) {
        spdlog::error("reload: configuration not changed: {}", fresh.error());
        return;
      }
      balancer.Reload(*fresh);
    };
    uv_signal_init(loop.raw(), &hangup);
    hangup.data = &reload;
    uv_signal_start(
        &hangup, [](uv_signal_t* handle, int) { (*static_cast<std::function<void()>*>(handle->data))(); }, SIGHUP);
    // Signals first: a standby prints its ready line inside Start(), and a
    // script may send SIGTERM as soon as it reads it.
    if (auto started = balancer.Start(); !started) {
      std::fprintf(stderr, "estuary-lb: error: %s\n", started.error().c_str());
      for (auto& handle : signals) uv_close(reinterpret_cast<uv_handle_t*>(&handle), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&hangup), nullptr);
      return 1;
    }
    loop.Run();
    for (auto& handle : signals) uv_close(reinterpret_cast<uv_handle_t*>(&handle), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&hangup), nullptr);
  }
  spdlog::info("stopped");
  spdlog::default_logger()->flush();
  return exit_status;
}
