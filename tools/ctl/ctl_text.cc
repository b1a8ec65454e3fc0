#include "tools/ctl/ctl_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace estuary::ctl {

std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& name : header) widths.push_back(name.size());
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      out += i + 1 == cells.size() ? cells[i] : fmt::format("{:<{}}  ", cells[i], widths[i]);
    }
    out += "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '~';
    out += plain ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  return out;
}

}  // namespace estuary::ctl
