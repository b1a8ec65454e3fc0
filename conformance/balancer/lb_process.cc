#include "conformance/balancer/lb_process.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuary-lb"
#endif

namespace estuary::testing {

std::string LbProcess::DefaultBinary() { return std::string(ESTUARY_BIN_DIR) + "/estuary-lb"; }

std::unique_ptr<LbProcess> LbProcess::Start(const std::vector<std::string>& flags, std::string* error,
                                            std::chrono::milliseconds timeout,
                                            const std::vector<std::string>& prefix, const std::string& binary) {
  ChildProcess::Options options;
  options.argv = prefix;
  options.argv.push_back(binary);
  options.argv.insert(options.argv.end(), flags.begin(), flags.end());
  std::unique_ptr<LbProcess> process(new LbProcess());
  process->child_ = ChildProcess::Spawn(options, error);
  if (!process->child_) return nullptr;
  auto line = process->NextLine(timeout);
  if (!line || !process->ParseReadyLine(*line)) {
    const int status = process->Stop(std::chrono::seconds(5));
    if (error) *error = "no ready line from estuary-lb (got '" + line.value_or("") + "', exit " + std::to_string(status) + ")";
    return nullptr;
  }
  return process;
}

LbProcess::~LbProcess() = default;  // ChildProcess kills a child still running

bool LbProcess::ParseReadyLine(const std::string& line) {
  const bool node = line.rfind("estuaryd ready ", 0) == 0;
  if (!node && line.rfind("estuary-lb ready ", 0) != 0) return false;
  ready_line_ = line;
  mqtt_port_ = PortOf(WordValue(line, "mqtt"));
  amqp_port_ = PortOf(WordValue(line, "amqp"));
  heartbeat_port_ = PortOf(WordValue(line, "heartbeat"));
  admin_port_ = PortOf(WordValue(line, "admin"));
  return mqtt_port_ != 0 && amqp_port_ != 0 && (node || heartbeat_port_ != 0);
}

std::optional<std::chrono::steady_clock::time_point> LbProcess::WaitForLine(const std::string& needle,
                                                                            std::chrono::milliseconds timeout,
                                                                            std::string* line) {
  auto found = child_->WaitForLine(needle, timeout);
  if (!found) return std::nullopt;
  if (line != nullptr) *line = *found;
  return std::chrono::steady_clock::now();
}

}  // namespace estuary::testing
