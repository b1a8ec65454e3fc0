#pragma once
// Text helpers every estuaryctl command shares: the aligned tables it
// prints and the percent-encoding of what it puts into a request target.
// Pure functions.
#include <string>
#include <vector>

namespace estuary::ctl {

// A header line and one line per row, every column but the last padded to
// its widest cell and followed by two spaces.
std::string Table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// Percent-encoding for a path segment or a query value: letters, digits and
// "-._~" as they are, every other byte as %XX.
std::string Escape(const std::string& text);

}  // namespace estuary::ctl
