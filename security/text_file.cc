#include "security/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace estuary::security {

Expected<std::string, std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(std::string(std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return MakeError(std::string("read error"));
  return text.str();
}

}  // namespace estuary::security
