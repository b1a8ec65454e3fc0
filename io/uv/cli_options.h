#pragma once
// Command-line pieces every Estuary program shares (CLI11): HOST:PORT
// options, the log level, and the contract of DESIGN.md's interfaces:
// `--help` prints and exits 0; a bad flag or config key prints one line
// "PROGRAM: error: ..." and exits 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "io/uv/tcp.h"

namespace estuary::io {

// Run with a config, or exit with `status` (help printed or a bad flag).
struct ExitRequest {
  int status = 0;
};

// HOST:PORT, parsed and validated; a later flag wins over an earlier one.
inline CLI::Option* AddEndpointOption(CLI::App& app, const std::string& name, Endpoint& target,
                                      const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name](const std::string& text) {
            auto endpoint = ParseEndpoint(text);
            if (!endpoint) throw CLI::ValidationError(name, endpoint.error());
            target = *endpoint;
          },
          help)
      ->default_str(target.ToString())
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// HOST:PORT,HOST:PORT,... appended to `targets`.
inline CLI::Option* AddEndpointListOption(CLI::App& app, const std::string& name,
                                          std::vector<Endpoint>& targets, const std::string& help) {
  return app
      .add_option_function<std::vector<std::string>>(
          name,
          [&targets, name](const std::vector<std::string>& texts) {
            for (const auto& text : texts) {
              auto endpoint = ParseEndpoint(text);
              if (!endpoint) throw CLI::ValidationError(name, endpoint.error());
              targets.push_back(*endpoint);
            }
          },
          help)
      ->delimiter(',');
}

// A HOST:PORT kept as text (empty = off), checked when given.
inline CLI::Option* AddOptionalEndpointOption(CLI::App& app, const std::string& name,
                                              std::string& target, const std::string& help) {
  return app.add_option(name, target, help)->check([](const std::string& text) {
    auto endpoint = ParseEndpoint(text);
    return endpoint ? std::string() : endpoint.error();
  });
}

inline CLI::Option* AddLogLevelOption(CLI::App& app, std::string& level) {
  return app.add_option("--log-level", level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

// Parses into the config `app` was built over. `validate` (optional) runs
// after parsing and may throw CLI::ValidationError for cross-flag rules.
template <typename Config>
std::variant<Config, ExitRequest> ParseOrExit(CLI::App& app, Config& config, int argc,
                                              const char* const* argv,
                                              const std::function<void()>& validate = {}) {
  try {
    app.parse(argc, argv);
    if (validate) validate();
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return ExitRequest{0};
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), error.what());
    return ExitRequest{2};
  }
  return config;
}

}  // namespace estuary::io
