#pragma once
// Line-oriented text files (the password and ACL files): reading one whole,
// walking its lines, trimming blanks. Pure helpers of this module.
#include <cstddef>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace estuary::security {

// The whole file, or the system's reason it cannot be read.
Expected<std::string, std::string> ReadTextFile(const std::string& path);

// `text` without leading and trailing spaces and tabs.
inline std::string_view TrimBlanks(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Calls fn(number, line) for each line, numbered from 1, without its "\n"
// or "\r\n". A last line without a newline counts; an empty text has none.
template <typename Fn>
void ForEachLine(std::string_view text, Fn&& fn) {
  size_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(++number, line);
    start = end + 1;
  }
}

// The entries of a password or ACL file: calls fn(line) for each line,
// trimmed, skipping blank lines and lines starting with '#'. fn returns an
// error text ("" for none); the first one stops the walk and comes back
// as "SOURCE:LINE: error".
template <typename Fn>
Expected<void, std::string> ForEachEntry(std::string_view text, std::string_view source, Fn&& fn) {
  std::string error;
  size_t failed_at = 0;
  ForEachLine(text, [&](size_t number, std::string_view line) {
    if (failed_at != 0) return;
    line = TrimBlanks(line);
    if (line.empty() || line[0] == '#') return;
    error = fn(line);
    if (!error.empty()) failed_at = number;
  });
  if (failed_at == 0) return {};
  return MakeError(std::string(source) + ":" + std::to_string(failed_at) + ": " + error);
}

}  // namespace estuary::security
