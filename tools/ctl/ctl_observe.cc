#include "tools/ctl/ctl_observe.h"

#include <fmt/format.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <iterator>
#include <optional>
#include <ostream>

#include "tools/ctl/ctl.h"
#include "tools/ctl/ctl_text.h"
#include "tools/ctl/http_client.h"

namespace estuary::ctl {
namespace {

using Json = nlohmann::json;

std::string Field(const Json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null()) return "-";
  const Json& value = object[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{:.1f}", value.get<double>());
  return value.dump();
}

std::string Bytes(const Json& value) {
  if (!value.is_number()) return "-";
  double amount = value.get<double>();
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (amount >= 1024 && unit + 1 < std::size(units)) amount /= 1024, ++unit;
  return unit == 0 ? fmt::format("{:.0f}B", amount) : fmt::format("{:.1f}{}", amount, units[unit]);
}

// "?a=1&b=2" from the non-empty pairs.
std::string Query(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string out;
  for (const auto& [name, value] : pairs) {
    if (value.empty()) continue;
    out += (out.empty() ? "?" : "&") + name + "=" + Escape(value);
  }
  return out;
}

struct Answer {
  std::string body;
  Json json;
};

// One request; on failure prints what to do and returns nullopt.
std::optional<Answer> Fetch(const io::Endpoint& admin, const std::string& method, const std::string& target,
                            int timeout_ms, std::ostream& err) {
  auto reply = HttpRequest(admin.host, admin.port, method, target, timeout_ms);
  if (!reply) {
    err << UnreachableMessage(admin, reply.error()) << "\n";
    return std::nullopt;
  }
  Json json = Json::parse(reply->body, nullptr, false);
  if (reply->status == 401) {
    err << "estuaryctl: the node at " << admin.ToString()
        << " requires its admin token: pass --token-file FILE (the node's --admin-token-file)\n";
    return std::nullopt;
  }
  if (reply->status == 404 && !(json.is_object() && json.contains("error"))) {
    err << "estuaryctl: the node at " << admin.ToString() << " does not serve " << target
        << " (HTTP 404): is it an older estuaryd, or not a node's admin listener?\n";
    return std::nullopt;
  }
  if (reply->status >= 400) {
    const std::string why = json.is_object() && json.contains("error") ? Field(json, "error") : reply->body;
    err << fmt::format("estuaryctl: {} {}: {} (HTTP {})\n", method, target, why, reply->status);
    return std::nullopt;
  }
  if (json.is_discarded()) {
    err << "estuaryctl: the answer to " << target << " from " << admin.ToString() << " is not JSON\n";
    return std::nullopt;
  }
  return Answer{reply->body, std::move(json)};
}

std::string PageLine(const Json& page, const char* key) {
  const size_t shown = page.value(key, Json::array()).size();
  const uint64_t total = page.value("total", uint64_t{0});
  const uint64_t offset = page.value("offset", uint64_t{0});
  if (shown == 0) return fmt::format("(none of {})\n", total);
  std::string line = fmt::format("({}-{} of {}", offset + 1, offset + shown, total);
  if (offset + shown < total) line += fmt::format("; --offset {} for more", offset + shown);
  return line + ")\n";
}

std::string FormatRows(const Json& page, const char* key, const std::vector<std::string>& header,
                       const std::vector<std::string>& fields) {
  std::vector<std::vector<std::string>> rows;
  for (const Json& item : page.value(key, Json::array())) {
    std::vector<std::string> row;
    for (const auto& field : fields) {
      if (field == "members") {
        std::string members;
        for (const Json& member : item.value("members", Json::array())) {
          members += (members.empty() ? "" : ",") + member.get<std::string>();
        }
        row.push_back(members);
      } else if (field == "queued_bytes") {
        row.push_back(Bytes(item.value(field, Json())));
      } else if (field == "connected_for_ms") {
        row.push_back(FormatDuration(item.value(field, int64_t{0})));
      } else {
        row.push_back(Field(item, field.c_str()));
      }
    }
    rows.push_back(std::move(row));
  }
  return Table(header, rows) + PageLine(page, key);
}

std::string PageQuery(const ObserveOptions& options, std::vector<std::pair<std::string, std::string>> pairs) {
  pairs.emplace_back("limit", std::to_string(options.limit));
  if (options.offset != 0) pairs.emplace_back("offset", std::to_string(options.offset));
  return Query(pairs);
}

volatile std::sig_atomic_t interrupted = 0;

// Raw single-key input on a terminal for `top` (q quits); restored on exit.
class KeyReader {
 public:
  KeyReader() : terminal_(::isatty(STDIN_FILENO) == 1) {
    if (terminal_ && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    } else {
      terminal_ = false;
    }
  }
  ~KeyReader() {
    if (terminal_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `ms`; true if q was pressed (or stdin closed on a terminal).
  bool QuitWithin(int ms) {
    if (!terminal_) {
      ::poll(nullptr, 0, ms);  // SIGINT interrupts it
      return false;
    }
    pollfd in{STDIN_FILENO, POLLIN, 0};
    if (::poll(&in, 1, ms) <= 0) return false;
    char key = 0;
    return ::read(STDIN_FILENO, &key, 1) == 1 && (key == 'q' || key == 'Q');
  }

 private:
  bool terminal_;
  termios saved_{};
};

int RunTop(const io::Endpoint& admin, const ObserveOptions& options, bool json, int timeout_ms, std::ostream& out,
           std::ostream& err) {
  interrupted = 0;
  auto previous = std::signal(SIGINT, [](int) { interrupted = 1; });
  const bool clear = !json && ::isatty(STDOUT_FILENO) == 1;
  int status = 0;
  {
    KeyReader keys;
    for (int done = 0; options.iterations == 0 || done < options.iterations; ++done) {
      auto overview = Fetch(admin, "GET", "/api/overview", timeout_ms, err);
      if (!overview) {
        status = 1;
        break;
      }
      if (json) {
        out << overview->json.dump() << "\n";
      } else {
        if (clear) out << "\x1b[H\x1b[2J";
        out << FormatStatus(overview->json);
        if (options.iterations == 0) out << "(refreshed every " << options.interval_ms << " ms; q or Ctrl-C stops)\n";
      }
      out.flush();
      if (options.iterations != 0 && done + 1 >= options.iterations) break;
      if (keys.QuitWithin(options.interval_ms) || interrupted) break;
    }
  }
  std::signal(SIGINT, previous);
  return status;
}

}  // namespace

std::string UnreachableMessage(const io::Endpoint& admin, const std::string& why) {
  return fmt::format(
      "estuaryctl: cannot reach the admin API at {}: {}; is estuaryd running there? Give its admin address with "
      "--admin HOST:PORT (the admin= of its ready line; default 127.0.0.1:8080){}",
      admin.ToString(), why,
      why.find("certificate") != std::string::npos || why.find("TLS") != std::string::npos
          ? "; for an --admin-tls listener pass --admin-ca CA.pem"
          : "");
}

std::string FormatStatus(const Json& overview) {
  std::vector<std::vector<std::string>> rows;
  const Json self = overview.value("self", Json());
  size_t up = 0;
  const Json nodes = overview.value("nodes", Json::array());
  for (const Json& node : nodes) {
    const Json load = node.value("load", Json::object());
    std::string id = Field(node, "node") + (node.value("node", Json()) == self ? "*" : "");
    std::string state = Field(node, "state");
    if (state == "up" && !node.value("reachable", false)) state = "up (no load report)";
    if (state == "up") ++up;
    rows.push_back({id, state, Field(node, "role"), Field(node, "score"), Field(load, "connections"),
                    Field(load, "messages_in_per_second"), Field(load, "messages_out_per_second"),
                    Field(load, "queued_messages"), Field(load, "cpu_percent"), Bytes(load.value("memory_bytes", Json())),
                    Field(node, "partitions_led"), Field(node, "admin_address")});
  }
  std::string out = fmt::format("cluster: {} of {} nodes up (answered by node {})\n", up, nodes.size(), Field(overview, "self"));
  out += Table({"NODE", "STATE", "ROLE", "SCORE", "CONNS", "IN/S", "OUT/S", "QUEUED", "CPU%", "MEMORY", "LED", "ADMIN"},
               rows);
  if (overview.contains("partitions")) {
    const Json& partitions = overview["partitions"];
    out += fmt::format("partitions: {} open of {}, {} without a leader (placement epoch {})\n",
                       Field(partitions, "open"), Field(partitions, "total"), Field(partitions, "leaderless"),
                       Field(partitions, "placement_epoch"));
  }
  const Json alarms = overview.value("alarms", Json::array());
  if (alarms.empty()) {
    out += "alarms: none\n";
  } else {
    out += "alarms:\n";
    for (const Json& alarm : alarms) out += "  - " + alarm.get<std::string>() + "\n";
  }
  return out;
}

std::string FormatClients(const Json& page) {
  return FormatRows(page, "clients", {"CLIENT ID", "USER", "ADDRESS", "PROTOCOL", "STATE", "CONNECTED", "SHARD"},
                    {"client_id", "username", "address", "protocol", "state", "connected_for_ms", "shard"});
}

void AddObserveCommands(CLI::App& app, ObserveOptions& options) {
  auto paged = [&options](CLI::App* command) {
    command->add_option("--limit", options.limit, "rows to show (at most 1000)")
        ->capture_default_str()
        ->check(CLI::Range(size_t{1}, size_t{1000}));
    command->add_option("--offset", options.offset, "rows to skip (offset + limit at most 10000)")
        ->check(CLI::Range(size_t{0}, size_t{9999}));
  };
  app.add_subcommand("status", "one screen: nodes, state, role, load, partitions led, connections, alarms");
  auto* clients = app.add_subcommand("clients", "list the clients connected to the node (filters are substrings)");
  clients->add_option("--client-id", options.client_id, "client id (MQTT) or container id (AMQP) contains");
  clients->add_option("--username", options.username, "user name contains");
  clients->add_option("--address", options.address, "client address contains");
  paged(clients);
  clients->add_subcommand("kick", "disconnect client ID from the node (MQTT 5: DISCONNECT 0x98)")
      ->add_option("ID", options.kick, "the client id")
      ->required();
  auto* sessions = app.add_subcommand("sessions", "list the sessions the node holds, online and offline");
  sessions->add_option("--client-id", options.client_id, "client id contains");
  sessions->add_option("--connected", options.connected, "true: online ones only, false: offline ones only")
      ->check(CLI::IsMember({"true", "false"}));
  paged(sessions);
  auto* subscriptions = app.add_subcommand("subscriptions", "list the node's sessions' subscriptions");
  subscriptions->add_option("--client-id", options.client_id, "client id contains");
  subscriptions->add_option("--filter", options.filter, "topic filter contains");
  paged(subscriptions);
  auto* retained = app.add_subcommand("retained", "list retained messages (topic, size, QoS)");
  retained->add_option("--topic", options.topic, "topic contains");
  paged(retained);
  auto* shared = app.add_subcommand("shared", "list shared-subscription groups and their members on the node");
  shared->add_option("--group", options.group, "group name contains");
  paged(shared);
  auto* top = app.add_subcommand("top", "live status, refreshed every second; q or Ctrl-C stops");
  top->add_option("--iterations", options.iterations, "stop after N refreshes (0: until q or Ctrl-C)")
      ->check(CLI::Range(0, 1'000'000));
  top->add_option("--interval-ms", options.interval_ms, "time between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(100, 60'000));
}

bool IsObserveCommand(const std::string& command) {
  for (const char* name : {"status", "clients", "sessions", "subscriptions", "retained", "shared", "top"}) {
    if (command == name) return true;
  }
  return false;
}

int RunObserve(const std::string& command, const io::Endpoint& admin, const ObserveOptions& options, bool json,
               int timeout_ms, std::ostream& out, std::ostream& err) {
  if (command == "top") return RunTop(admin, options, json, timeout_ms, out, err);
  std::string method = "GET", target;
  if (command == "status") target = "/api/overview";
  if (command == "clients" && !options.kick.empty()) {
    method = "DELETE", target = "/api/clients/" + Escape(options.kick);
  } else if (command == "clients") {
    target = "/api/clients" + PageQuery(options, {{"client_id", options.client_id},
                                                  {"username", options.username},
                                                  {"address", options.address}});
  }
  if (command == "sessions") {
    target = "/api/sessions" + PageQuery(options, {{"client_id", options.client_id}, {"connected", options.connected}});
  }
  if (command == "subscriptions") {
    target = "/api/subscriptions" + PageQuery(options, {{"client_id", options.client_id}, {"filter", options.filter}});
  }
  if (command == "retained") target = "/api/retained" + PageQuery(options, {{"topic", options.topic}});
  if (command == "shared") target = "/api/shared" + PageQuery(options, {{"group", options.group}});
  auto answer = Fetch(admin, method, target, timeout_ms, err);
  if (!answer) return 1;
  if (json) {
    out << answer->body << (answer->body.ends_with('\n') ? "" : "\n");
    return 0;
  }
  const Json& body = answer->json;
  try {
    if (command == "status") {
      out << FormatStatus(body);
    } else if (command == "clients" && !options.kick.empty()) {
      out << fmt::format("disconnected '{}' ({} connection(s) on node {})\n", Field(body, "disconnected"),
                         Field(body, "connections"), Field(body, "node"));
    } else if (command == "clients") {
      out << FormatClients(body);
    } else if (command == "sessions") {
      out << FormatRows(body, "sessions",
                        {"CLIENT ID", "CONNECTED", "DURABLE", "EXPIRY(S)", "SUBS", "QUEUED", "QUEUED BYTES", "SHARD"},
                        {"client_id", "connected", "durable", "expiry_interval_s", "subscriptions", "queued_messages",
                         "queued_bytes", "shard"});
    } else if (command == "subscriptions") {
      out << FormatRows(body, "subscriptions", {"FILTER", "CLIENT ID", "QOS", "NO LOCAL", "CONNECTED"},
                        {"filter", "client_id", "qos", "no_local", "connected"});
    } else if (command == "retained") {
      out << FormatRows(body, "retained", {"TOPIC", "BYTES", "QOS", "FROM CLIENT"},
                        {"topic", "payload_bytes", "qos", "from_client"});
    } else if (command == "shared") {
      out << FormatRows(body, "groups", {"GROUP", "FILTER", "MEMBERS", "CONNECTED", "MEMBER IDS"},
                        {"group", "filter", "member_count", "connected", "members"});
    }
  } catch (const Json::exception& error) {
    err << "estuaryctl: malformed answer from the node: " << error.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace estuary::ctl
