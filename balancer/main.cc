// estuary-lb: one balancer of the active/standby pair in front of estuaryd.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <functional>

#include "balancer/balancer.h"
#include "balancer/lb_config.h"

int main(int argc, char** argv) {
  auto outcome = estuary::balancer::ParseCommandLine(argc, argv);
  if (auto* exit = std::get_if<estuary::balancer::ExitRequest>(&outcome)) return exit->status;
  auto& config = std::get<estuary::balancer::BalancerConfig>(outcome);

  // Logs go to stderr; stdout carries only the ready and role lines.
  auto logger = spdlog::stderr_color_mt("estuary-lb");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  std::signal(SIGPIPE, SIG_IGN);

  uv_signal_t signals[2];  // outlives the loop, which runs their close callbacks
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
    // Signals first: a standby prints its ready line inside Start(), and a
    // script may send SIGTERM as soon as it reads it.
    if (auto started = balancer.Start(); !started) {
      std::fprintf(stderr, "estuary-lb: error: %s\n", started.error().c_str());
      for (auto& handle : signals) uv_close(reinterpret_cast<uv_handle_t*>(&handle), nullptr);
      return 1;
    }
    loop.Run();
    for (auto& handle : signals) uv_close(reinterpret_cast<uv_handle_t*>(&handle), nullptr);
  }
  spdlog::info("stopped");
  spdlog::default_logger()->flush();
  return exit_status;
}
