#include "io/uv/log_setup.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace estuary::io {
namespace {

// The value of the word `key=` in `message` ("" if absent): up to the next
// blank, comma, semicolon or closing parenthesis.
std::string_view Word(std::string_view message, std::string_view key) {
  for (size_t at = message.find(key); at != std::string_view::npos; at = message.find(key, at + 1)) {
    if (at != 0 && message[at - 1] != ' ' && message[at - 1] != '(' && message[at - 1] != '[') continue;
    const size_t start = at + key.size();
    const size_t end = message.find_first_of(" ,;)", start);
    return message.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  }
  return {};
}

// spdlog's formatter interface, writing JsonLogLine.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::string time =
        fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::time_t(seconds.count())), millis);
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string line =
        JsonLogLine(time, std::string_view(level.data(), level.size()),
                    std::string_view(msg.logger_name.data(), msg.logger_name.size()), msg.thread_id,
                    std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

void AddLogOptions(CLI::App& app, LogOptions& options) {
  app.add_option("--log-file", options.file,
                 "Write the log to this file instead of stderr, rotated by size: a.log, then a.1.log (the newest "
                 "rotated) ... a.N.log; the ready line stays on stdout");
  app.add_option("--log-max-size", options.max_size_bytes,
                 "Size at which --log-file rotates: bytes, or with a unit (10MB, 512KiB)")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("100MB")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 40));
  app.add_option("--log-max-files", options.max_files, "Rotated files kept beside --log-file (a.1.log ... a.N.log)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--log-format", options.format,
                 "text, or json: one object per line with time, level, logger, thread, message, and client_id and "
                 "address on lines about a client")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
}

std::string JsonLogLine(std::string_view time, std::string_view level, std::string_view logger, uint64_t thread,
                        std::string_view message) {
  nlohmann::json line = {{"time", time}, {"level", level}, {"logger", logger}, {"thread", thread},
                         {"message", message}};
  if (auto client = Word(message, "client="); !client.empty()) line["client_id"] = client;
  if (auto address = Word(message, "address="); !address.empty()) line["address"] = address;
  // A message is not always valid UTF-8 (a client id is bytes): replaced, never thrown.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Expected<void, std::string> SetUpLogging(const std::string& name, const std::string& level, const LogOptions& options,
                                         const std::string& pattern) {
  std::shared_ptr<spdlog::logger> logger;
  try {
    if (options.file.empty()) {
      logger = spdlog::stderr_color_mt(name);
    } else {
      logger = spdlog::rotating_logger_mt(name, options.file, options.max_size_bytes, options.max_files);
    }
  } catch (const spdlog::spdlog_ex& error) {
    return MakeError(fmt::format("--log-file {}: {}", options.file, error.what()));
  }
  if (options.format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern(pattern);
  }
  // Warnings and errors reach the file at once; the rest within a second.
  logger->flush_on(spdlog::level::warn);
  spdlog::flush_every(std::chrono::seconds(1));
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  return {};
}

}  // namespace estuary::io
