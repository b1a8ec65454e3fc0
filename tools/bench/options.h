#pragma once
// estuary-bench's configuration, parsed from flags (CLI11) and validated.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/expected.h"
#include "frontends/mqtt/codec/packet.h"
#include "tools/bench/topic_plan.h"

namespace estuary::bench {

enum class Protocol { kMqtt, kAmqp };

struct Options {
  // HOST:PORT of --broker, its scheme (mqtt:// or amqp://) stripped.
  std::string broker = "127.0.0.1:1883";
  // Where and how publishers and subscribers connect: --broker, unless
  // --publish-broker / --subscribe-broker say otherwise (mixed runs).
  // Idle connections use the publishers' side.
  Protocol publish_protocol = Protocol::kMqtt;
  Protocol subscribe_protocol = Protocol::kMqtt;
  std::string publish_broker = "127.0.0.1:1883";
  std::string subscribe_broker = "127.0.0.1:1883";
  mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV311;
  uint32_t publishers = 1;
  uint32_t subscribers = 1;
  int qos = 0;
  size_t payload_size = 64;
  double rate = 0;          // messages/s over all publishers; 0 = as fast as possible
  uint64_t count = 0;       // messages per publisher; 0 = run for duration_s
  double duration_s = 10;
  Pattern pattern = Pattern::kOneTopic;
  std::string topic_prefix;      // default "estuary-bench/<run id>"
  uint32_t inflight = 64;        // QoS 1/2 unacknowledged messages per publisher
  size_t max_queued_bytes = 1 << 20;  // QoS 0: bytes queued per publisher socket
  uint32_t threads = 1;
  uint16_t keepalive_s = 60;
  uint32_t session_expiry_s = 0;  // MQTT subscribers: persistent sessions when above 0
  double connect_timeout_s = 10;
  double drain_timeout_s = 5;
  uint32_t max_connecting = 256;  // connection attempts in progress per thread
  bool json = false;
  bool idle = false;
  uint32_t connections = 0;  // idle mode
  std::vector<std::string> local_addresses;  // source IPs, round-robin
  std::string client_id_prefix;  // default "eb-<run id>-"
  uint32_t run_id = 0;           // random unless --run-id
  // AMQP 1.0: QoS 0 is pre-settled, QoS 1 unsettled (at least once).
  uint32_t credit = 1000;            // receiver link credit window
  std::string amqp_target_prefix;    // sender target address = prefix + topic
  std::string amqp_source_prefix;    // receiver source address = prefix + filter
  bool amqp_sasl = true;             // SASL ANONYMOUS; false: no SASL layer
  // MQTT over TLS (--tls-ca; a client certificate with --tls-cert/--tls-key):
  // the server is verified against the CA and the name --tls-server-name.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name = "localhost";
  // --tls-resume: each connection offers the ticket the worker's last one got.
  bool tls_resume = false;
  // --plot FILE.png|FILE.svg (tools/bench/plot.h): latency percentiles per
  // second and throughput, drawn by gnuplot after the run.
  std::string plot;

  bool uses(Protocol protocol) const {
    return publish_protocol == protocol || (subscribers > 0 && !idle && subscribe_protocol == protocol);
  }

  bool paced() const { return rate > 0; }
  bool counted() const { return count > 0; }
};

// What to do instead of running: print `text` and exit with `exit_code`
// (0 for --help, 2 for a bad flag; the text is then one line).
struct ParseExit {
  int exit_code = 2;
  std::string text;
};

Expected<Options, ParseExit> ParseOptions(int argc, const char* const* argv);

const char* VersionName(mqtt::ProtocolVersion version);  // "3.1.1" or "5"
const char* ToString(Protocol protocol);                  // "mqtt" or "amqp"

// A broker URL: [mqtt://|amqp://]HOST:PORT; without a scheme, the protocol
// is `default_protocol`. The address is not resolved here.
struct BrokerUrl {
  Protocol protocol = Protocol::kMqtt;
  std::string address;  // HOST:PORT
};
Expected<BrokerUrl, std::string> ParseBrokerUrl(const std::string& url, Protocol default_protocol);
// One line: the workload in words, for the report header.
std::string Describe(const Options& options);

}  // namespace estuary::bench
