#include "conformance/support/broker_process.h"

#ifndef ESTUARY_BIN_DIR
#error "ESTUARY_BIN_DIR must name the directory that holds estuaryd"
#endif

namespace estuary::testing {

std::string BrokerProcess::DefaultBinary() { return std::string(ESTUARY_BIN_DIR) + "/estuaryd"; }

std::unique_ptr<BrokerProcess> BrokerProcess::Start(const std::vector<std::string>& extra_flags,
                                                    std::string* error, std::chrono::milliseconds timeout,
                                                    const std::string& binary) {
  ChildProcess::Options options;
  options.argv = {binary,        "--mqtt",  "127.0.0.1:0", "--amqp",    "127.0.0.1:0",
                  "--admin",     "127.0.0.1:0", "--cluster", "127.0.0.1:0"};
  options.argv.insert(options.argv.end(), extra_flags.begin(), extra_flags.end());
  std::unique_ptr<BrokerProcess> broker(new BrokerProcess());
  broker->child_ = ChildProcess::Spawn(options, error);
  if (!broker->child_) return nullptr;
  // The ready line is the first line estuaryd prints.
  const std::string line = broker->child_->NextLine(timeout).value_or("");
  if (!broker->ParseReadyLine(line)) {
    const int status = broker->Stop(std::chrono::seconds(5));
    if (error) {
      *error = "no ready line from " + binary + " (got '" + line + "', exit status " +
               std::to_string(status) + ")";
    }
    return nullptr;
  }
  return broker;
}

BrokerProcess::~BrokerProcess() = default;  // ChildProcess kills a child still running

bool BrokerProcess::ParseReadyLine(const std::string& line) {
  if (line.rfind("estuaryd ready ", 0) != 0) return false;
  ready_line_ = line;
  const std::string mqtt = WordValue(line, "mqtt");
  host_ = mqtt.substr(0, mqtt.rfind(':'));
  mqtt_port_ = PortOf(mqtt);
  admin_port_ = PortOf(WordValue(line, "admin"));
  amqp_port_ = PortOf(WordValue(line, "amqp"));
  return !host_.empty() && mqtt_port_ != 0 && admin_port_ != 0 && amqp_port_ != 0;
}

std::string BrokerProcess::mqtt_uri() const { return "tcp://" + host_ + ":" + std::to_string(mqtt_port_); }

int BrokerProcess::Stop(std::chrono::milliseconds timeout) { return child_->Stop(timeout); }

}  // namespace estuary::testing
