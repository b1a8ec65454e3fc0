#include "tools/bench/options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <random>
#include <sstream>

#include "tools/bench/payload.h"

namespace estuary::bench {
namespace {

constexpr size_t kMaxPayload = 64 << 20;

struct RawFlags {
  std::string broker = "127.0.0.1:1883";
  std::string publish_broker;
  std::string subscribe_broker;
  std::string protocol = "mqtt";
  std::string amqp_sasl = "anonymous";
  std::string version = "3.1.1";
  std::string pattern = "one-topic";
  std::string local_addresses;
  int keepalive_s = 60;
  int64_t run_id = -1;
};

void AddFlags(CLI::App& app, Options& o, RawFlags& raw) {
  // A flag given twice takes its last value, so scripts can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("-b,--broker", raw.broker,
                 "Broker URL [mqtt://|amqp://]HOST:PORT (no scheme: --protocol)")->capture_default_str();
  app.add_option("--publish-broker", raw.publish_broker,
                 "Publishers' broker URL, for mixed runs (default --broker)");
  app.add_option("--subscribe-broker", raw.subscribe_broker,
                 "Subscribers' broker URL, for mixed runs (default --broker)");
  app.add_option("--protocol", raw.protocol, "Protocol of broker URLs without a scheme: mqtt or amqp")
      ->capture_default_str();
  app.add_option("-V,--mqtt-version", raw.version, "MQTT version: 3.1.1 or 5")->capture_default_str();
  app.add_option("-P,--publishers", o.publishers, "Publisher connections")->capture_default_str();
  app.add_option("-S,--subscribers", o.subscribers, "Subscriber connections (0: publish only)")
      ->capture_default_str();
  app.add_option("-q,--qos", o.qos, "QoS of publishes and subscriptions: 0, 1 or 2 (AMQP: 0 pre-settled, 1 unsettled, 2 rcv-settle-mode second)")->capture_default_str();
  app.add_option("-s,--payload", o.payload_size, "Payload bytes (>= 24: sequence and timestamp)")
      ->capture_default_str();
  app.add_option("-r,--rate", o.rate, "Messages/s over all publishers, paced by timers; 0: as fast as possible")
      ->capture_default_str();
  app.add_option("-n,--count", o.count, "Messages per publisher (instead of --duration)");
  app.add_option("-d,--duration", o.duration_s, "Seconds to publish (idle mode: seconds to hold)")
      ->capture_default_str();
  app.add_option("--pattern", raw.pattern,
                 "Topics: one-topic | fan-out (= one-topic) | per-publisher | fan-in (PREFIX/i, subscribers on PREFIX/+)")
      ->capture_default_str();
  app.add_option("-t,--topic", o.topic_prefix, "Topic or topic prefix (default estuary-bench/RUN-ID)");
  app.add_option("--inflight", o.inflight, "QoS 1/2, AMQP unsettled: unacknowledged messages per publisher (capped by the broker's receive maximum)")
      ->capture_default_str();
  app.add_option("--max-queued-bytes", o.max_queued_bytes, "QoS 0 as fast as possible: bytes a publisher may have queued on its socket")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Client event loops (threads) the connections are spread over")
      ->capture_default_str();
  app.add_option("-k,--keepalive", raw.keepalive_s, "MQTT keep alive in seconds")->capture_default_str();
  app.add_option("--session-expiry", o.session_expiry_s,
                 "MQTT subscribers keep persistent sessions (MQTT 5: this session expiry in seconds; 3.1.1: clean "
                 "session 0), so a durable broker stores their deliveries; 0: clean sessions")
      ->capture_default_str();
  app.add_option("--connect-timeout", o.connect_timeout_s, "Seconds to wait for every CONNACK and SUBACK")
      ->capture_default_str();
  app.add_option("--drain-timeout", o.drain_timeout_s, "Seconds to wait at the end for messages in flight")
      ->capture_default_str();
  app.add_option("--max-connecting", o.max_connecting, "Connection attempts in progress at once, per thread")
      ->capture_default_str();
  app.add_flag("--json", o.json, "Print one JSON object with every figure instead of text");
  app.add_option("--plot", o.plot,
                 "After the run, draw the end-to-end latency percentiles per second and the messages received per "
                 "second into FILE.png or FILE.svg (gnuplot)")
      ->check([](const std::string& path) {
        return path.ends_with(".png") || path.ends_with(".svg") ? std::string() : "expected a .png or .svg file name";
      });
  app.add_flag("--idle", o.idle, "Open --connections idle connections and hold them for --duration");
  app.add_option("-c,--connections", o.connections, "Idle mode: connections to open");
  app.add_option("--local-addresses", raw.local_addresses,
                 "Comma-separated source IPv4 addresses for client sockets, used round-robin (e.g. 127.0.0.2,127.0.0.3)");
  app.add_option("--client-id-prefix", o.client_id_prefix, "Client identifier prefix (default eb-RUN-ID-)");
  app.add_option("--run-id", raw.run_id, "Run id carried in payloads and default names (default random)");
  app.add_option("--tls-ca", o.tls_ca, "MQTT over TLS: the CA (PEM) that signed the broker's certificate")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", o.tls_cert, "MQTT over TLS: a client certificate (PEM) to present")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", o.tls_key, "MQTT over TLS: the key of --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--tls-server-name", o.tls_server_name, "MQTT over TLS: the name the broker's certificate must carry")
      ->capture_default_str();
  app.add_flag("--tls-resume", o.tls_resume,
               "MQTT over TLS: each connection offers the session ticket its worker's previous connection got, so "
               "handshakes after a worker's first ones resume (counted as tls_resumed)");
  app.add_option("--credit", o.credit, "AMQP: receiver link credit window (topped up at half)")
      ->capture_default_str();
  app.add_option("--amqp-target-prefix", o.amqp_target_prefix,
                 "AMQP: sender target address = PREFIX + topic (RabbitMQ: /topic/)");
  app.add_option("--amqp-source-prefix", o.amqp_source_prefix,
                 "AMQP: receiver source address = PREFIX + topic filter (RabbitMQ: /topic/)");
  app.add_option("--amqp-sasl", raw.amqp_sasl, "AMQP: anonymous (SASL ANONYMOUS) or none (no SASL layer)")
      ->capture_default_str();
}

std::optional<std::string> ApplyBrokers(Options& o, const RawFlags& raw) {
  Protocol fallback;
  if (raw.protocol == "mqtt") {
    fallback = Protocol::kMqtt;
  } else if (raw.protocol == "amqp") {
    fallback = Protocol::kAmqp;
  } else {
    return "--protocol: expected mqtt or amqp, got '" + raw.protocol + "'";
  }
  auto broker = ParseBrokerUrl(raw.broker, fallback);
  if (!broker) return "--broker: " + broker.error();
  o.broker = broker->address;
  auto side = [&](const std::string& url, const char* flag, Protocol& protocol,
                  std::string& address) -> std::optional<std::string> {
    auto parsed = url.empty() ? broker : ParseBrokerUrl(url, fallback);
    if (!parsed) return std::string(flag) + ": " + parsed.error();
    protocol = parsed->protocol;
    address = parsed->address;
    return std::nullopt;
  };
  if (auto problem = side(raw.publish_broker, "--publish-broker", o.publish_protocol, o.publish_broker)) {
    return problem;
  }
  if (auto problem = side(raw.subscribe_broker, "--subscribe-broker", o.subscribe_protocol, o.subscribe_broker)) {
    return problem;
  }
  if (raw.amqp_sasl != "anonymous" && raw.amqp_sasl != "none") {
    return "--amqp-sasl: expected anonymous or none, got '" + raw.amqp_sasl + "'";
  }
  o.amqp_sasl = raw.amqp_sasl == "anonymous";
  return std::nullopt;
}

std::optional<std::string> ApplyNamedValues(Options& o, const RawFlags& raw) {
  if (auto problem = ApplyBrokers(o, raw)) return problem;
  if (raw.version == "3.1.1" || raw.version == "311" || raw.version == "4") {
    o.version = mqtt::ProtocolVersion::kV311;
  } else if (raw.version == "5" || raw.version == "5.0") {
    o.version = mqtt::ProtocolVersion::kV5;
  } else {
    return "--mqtt-version: expected 3.1.1 or 5, got '" + raw.version + "'";
  }
  if (raw.pattern == "one-topic" || raw.pattern == "fan-out") {
    o.pattern = Pattern::kOneTopic;
  } else if (raw.pattern == "per-publisher") {
    o.pattern = Pattern::kPerPublisher;
  } else if (raw.pattern == "fan-in") {
    o.pattern = Pattern::kFanIn;
  } else {
    return "--pattern: expected one-topic, fan-out, per-publisher or fan-in, got '" + raw.pattern + "'";
  }
  if (raw.keepalive_s < 0 || raw.keepalive_s > 65535) return "--keepalive: must be 0..65535";
  o.keepalive_s = static_cast<uint16_t>(raw.keepalive_s);
  std::stringstream addresses(raw.local_addresses);
  for (std::string address; std::getline(addresses, address, ',');) {
    if (!address.empty()) o.local_addresses.push_back(address);
  }
  if (raw.run_id > UINT32_MAX) return "--run-id: must fit in 32 bits";
  o.run_id = raw.run_id >= 0 ? static_cast<uint32_t>(raw.run_id) : std::random_device{}();
  return std::nullopt;
}

std::optional<std::string> Validate(const Options& o, bool duration_given) {
  if (o.qos < 0 || o.qos > 2) return "--qos: must be 0, 1 or 2";
  if (o.threads < 1 || o.threads > 1024) return "--threads: must be 1..1024";
  if (o.duration_s <= 0) return "--duration: must be > 0";
  if (o.connect_timeout_s <= 0) return "--connect-timeout: must be > 0";
  if (o.drain_timeout_s < 0) return "--drain-timeout: must be >= 0";
  if (o.max_connecting < 1) return "--max-connecting: must be >= 1";
  if (o.tls_cert.empty() != o.tls_key.empty()) return "--tls-cert and --tls-key go together";
  if (!o.tls_cert.empty() && o.tls_ca.empty()) return "--tls-cert needs --tls-ca";
  if (o.uses(Protocol::kAmqp)) {
    if (!o.local_addresses.empty()) return "--local-addresses: MQTT only";
    if (!o.tls_ca.empty()) return "--tls-ca: MQTT only";
    if (o.credit < 1) return "--credit: must be >= 1";
  }
  if (o.idle) {
    if (o.connections < 1) return "--idle needs --connections N (N >= 1)";
    if (o.counted()) return "--count does not apply to --idle";
    return std::nullopt;
  }
  if (o.connections > 0) return "--connections applies only with --idle";
  if (o.counted() && duration_given) return "--count and --duration are alternatives: give one";
  if (o.publishers < 1) return "--publishers: must be >= 1";
  if (o.payload_size < kPayloadHeaderSize || o.payload_size > kMaxPayload) {
    return "--payload: must be 24..67108864 bytes (24 carry the sequence number and timestamp)";
  }
  if (o.rate < 0) return "--rate: must be >= 0";
  if (o.inflight < 1 || o.inflight > 65535) return "--inflight: must be 1..65535";
  if (o.max_queued_bytes < 1024) return "--max-queued-bytes: must be >= 1024";
  return std::nullopt;
}

std::string OneLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

}  // namespace

const char* ToString(Protocol protocol) { return protocol == Protocol::kAmqp ? "amqp" : "mqtt"; }

Expected<BrokerUrl, std::string> ParseBrokerUrl(const std::string& url, Protocol default_protocol) {
  BrokerUrl parsed{default_protocol, url};
  const size_t scheme_end = url.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = url.substr(0, scheme_end);
    if (scheme == "mqtt" || scheme == "tcp") {
      parsed.protocol = Protocol::kMqtt;
    } else if (scheme == "amqp") {
      parsed.protocol = Protocol::kAmqp;
    } else {
      return MakeError("unknown scheme '" + scheme + "' in '" + url + "' (mqtt:// or amqp://)");
    }
    parsed.address = url.substr(scheme_end + 3);
  }
  while (!parsed.address.empty() && parsed.address.back() == '/') parsed.address.pop_back();
  if (parsed.address.empty() || parsed.address.find('/') != std::string::npos ||
      parsed.address.rfind(':') == std::string::npos) {
    return MakeError("expected [mqtt://|amqp://]HOST:PORT, got '" + url + "'");
  }
  return parsed;
}

const char* VersionName(mqtt::ProtocolVersion version) {
  switch (version) {
    case mqtt::ProtocolVersion::kV31: return "3.1";
    case mqtt::ProtocolVersion::kV311: return "3.1.1";
    case mqtt::ProtocolVersion::kV5: return "5";
  }
  return "?";
}

Expected<Options, ParseExit> ParseOptions(int argc, const char* const* argv) {
  Options options;
  RawFlags raw;
  CLI::App app{
      "estuary-bench: MQTT and AMQP 1.0 load generator. P publishers and S subscribers, each\n"
      "its own connection, measure throughput and end-to-end latency against any MQTT or\n"
      "AMQP 1.0 broker, or across the two (--publish-broker, --subscribe-broker).\n"
      "Example: estuary-bench --broker 127.0.0.1:1883 -P 8 -S 1 --pattern fan-in -q 1 -d 10\n"
      "         estuary-bench --broker amqp://127.0.0.1:5672 -q 1 -s 4096 -d 10",
      "estuary-bench"};
  AddFlags(app, options, raw);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return MakeError(ParseExit{0, app.help()});
  } catch (const CLI::ParseError& error) {
    return MakeError(ParseExit{2, "estuary-bench: " + OneLine(error.what())});
  }
  std::optional<std::string> problem = ApplyNamedValues(options, raw);
  if (!problem) problem = Validate(options, app.count("--duration") > 0);
  if (problem) return MakeError(ParseExit{2, "estuary-bench: " + *problem});
  char run_id_hex[16];
  std::snprintf(run_id_hex, sizeof run_id_hex, "%08x", options.run_id);
  if (options.topic_prefix.empty()) options.topic_prefix = std::string("estuary-bench/") + run_id_hex;
  if (options.client_id_prefix.empty()) options.client_id_prefix = std::string("eb-") + run_id_hex + "-";
  return options;
}

namespace {

std::string ProtocolWords(Protocol protocol, mqtt::ProtocolVersion version) {
  return protocol == Protocol::kAmqp ? "amqp 1.0" : std::string("mqtt ") + VersionName(version);
}

}  // namespace

std::string Describe(const Options& o) {
  std::ostringstream out;
  if (o.idle || (o.publish_protocol == o.subscribe_protocol && o.publish_broker == o.subscribe_broker)) {
    out << ProtocolWords(o.publish_protocol, o.version) << " broker " << o.publish_broker;
  } else {
    out << ProtocolWords(o.publish_protocol, o.version) << " publishers to " << o.publish_broker << " -> "
        << ProtocolWords(o.subscribe_protocol, o.version) << " subscribers from " << o.subscribe_broker;
  }
  if (o.idle) {
    out << ", " << o.connections << " idle connections held " << o.duration_s << " s";
  } else {
    out << ", qos " << o.qos;
    if (o.uses(Protocol::kAmqp)) {
      out << (o.qos == 0 ? " (pre-settled)" : o.qos == 1 ? " (unsettled)" : " (rcv-settle-mode second)");
    }
    out << ", " << o.publishers << " -> " << o.subscribers << " ("
        << ToString(o.pattern) << "), payload " << o.payload_size << " B, rate ";
    if (o.paced()) {
      out << o.rate << " msgs/s";
    } else {
      out << "max";
    }
    if (o.counted()) {
      out << ", " << o.count << " msgs per publisher";
    } else {
      out << ", " << o.duration_s << " s";
    }
  }
  out << ", threads " << o.threads;
  return out.str();
}

}  // namespace estuary::bench
