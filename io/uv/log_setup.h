#pragma once
// Where and how an Estuary program logs (docs/configuration.md "Logs"):
// stderr as text by default; `--log-file PATH` with size-based rotation
// (`--log-max-size`, `--log-max-files`: spdlog's rotating_file_sink, which
// numbers before the extension: estuaryd.log, estuaryd.1.log (the newest
// rotated) ... estuaryd.N.log); `--log-format json`, one JSON object per line with
// `time`, `level`, `logger`, `thread`, `message`, and `client_id` and
// `address` lifted from a message's `client=ID address=ADDR` words (the
// form every line about a client uses, docs/configuration.md "Logs").
// estuaryd and estuary-lb share the flags.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "base/expected.h"

namespace estuary::io {

struct LogOptions {
  std::string file;                           // "" = stderr
  uint64_t max_size_bytes = 100ull * 1024 * 1024;  // one file's size before it rotates
  uint32_t max_files = 5;                     // rotated files kept beside PATH
  std::string format = "text";                // text | json
};

// --log-file, --log-max-size, --log-max-files, --log-format.
void AddLogOptions(CLI::App& app, LogOptions& options);

// Makes the default logger, named `name`, at `level` (spdlog's names);
// text lines follow spdlog's `pattern`. Call once, before any thread logs.
// Errors: a file that cannot be opened, as one line.
Expected<void, std::string> SetUpLogging(const std::string& name, const std::string& level, const LogOptions& options,
                                         const std::string& pattern);

// The JSON line for one record (exposed for tests): `message` as logged.
std::string JsonLogLine(std::string_view time, std::string_view level, std::string_view logger, uint64_t thread,
                        std::string_view message);

}  // namespace estuary::io
