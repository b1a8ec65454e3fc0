#include "tools/ctl/ctl.h"

#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <ostream>

#include "io/uv/admin_token.h"
#include "io/uv/cli_options.h"
#include "tools/ctl/ctl_leadership.h"
#include "tools/ctl/ctl_observe.h"
#include "tools/ctl/ctl_passwd.h"
#include "tools/ctl/ctl_reload.h"
#include "tools/ctl/ctl_text.h"
#include "tools/ctl/http_client.h"

namespace estuary::ctl {
namespace {


std::string Scalar(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string FormatReply(const nlohmann::json& body, const std::string& command) {
  if (command == "members") return FormatMembers(body);
  if (command == "partitions") return FormatPartitions(body);
  if (command == "join") return fmt::format("join requested: the node dials {} (see `estuaryctl members`)\n",
                                            Scalar(body.value("joining", nlohmann::json(""))));
  if (command == "remove") return fmt::format("node {} removed\n", Scalar(body.value("removed", nlohmann::json(""))));
  if (command == "leave") {
    return fmt::format("node {} is leaving the cluster\n", Scalar(body.value("leaving", nlohmann::json(""))));
  }
  return FormatGeneric(body);
}

// One line "estuaryctl: ..." for an HTTP error, from the JSON error if any.
std::string ErrorLine(const HttpReply& reply, const std::string& target) {
  auto json = nlohmann::json::parse(reply.body, nullptr, false);
  if (!json.is_discarded() && json.is_object() && json.contains("error")) {
    return fmt::format("estuaryctl: {} (HTTP {})", Scalar(json["error"]), reply.status);
  }
  if (reply.status == 404) return fmt::format("estuaryctl: the node does not serve {} (HTTP 404)", target);
  std::string first_line = reply.body.substr(0, reply.body.find('\n'));
  return fmt::format("estuaryctl: HTTP {} for {}{}{}", reply.status, target, first_line.empty() ? "" : ": ",
                     first_line);
}

}  // namespace

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return fmt::format("{}ms", ms);
  const int64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

std::string FormatMembers(const nlohmann::json& body) {
  const auto self = body.value("self", nlohmann::json());
  std::vector<std::vector<std::string>> rows;
  for (const auto& member : body.value("members", nlohmann::json::array())) {
    const auto node = member.value("node", nlohmann::json());
    std::string id = Scalar(node) + (node == self ? "*" : "");
    std::string incarnation = Scalar(member.value("incarnation", nlohmann::json(0)));
    if (member.value("epoch", 0) != 0) incarnation += fmt::format(" (epoch {})", member.value("epoch", 0));
    std::string state = member.value("state", "?");
    if (member.value("removed", false)) state += " (removed)";
    rows.push_back({id, state, member.value("cluster_address", ""),
                    member.value("admin_address", ""), incarnation,
                    FormatDuration(member.value("for_ms", int64_t{0}))});
  }
  std::string out = Table({"NODE", "STATE", "CLUSTER ADDRESS", "ADMIN ADDRESS", "INCARNATION", "SINCE"}, rows);
  out += "(* the node that answered)\n";
  if (body.contains("refused")) out += fmt::format("refused by the cluster: {}\n", Scalar(body["refused"]));
  return out;
}

// "1,2,3" for a JSON array of node ids ("" for anything else).
static std::string Nodes(const nlohmann::json& entry, const char* key) {
  std::string out;
  if (!entry.contains(key) || !entry[key].is_array()) return out;
  for (size_t i = 0; i < entry[key].size(); ++i) out += (i == 0 ? "" : ",") + Scalar(entry[key][i]);
  return out;
}

// GET /api/cluster/partitions: one row per open partition; role, term,
// commit and applied where the answering node holds a replica, and the
// followers' lag (entries behind the leader's last index) where it leads.
std::string FormatPartitions(const nlohmann::json& body) {
  std::vector<std::vector<std::string>> rows;
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& open = body.contains("open") && body["open"].is_array() ? body["open"] : none;
  for (size_t i = 0; i < open.size(); ++i) {
    const nlohmann::json& entry = open[i];
    std::string lag;
    if (entry.contains("lag") && entry["lag"].is_object()) {
      for (auto it = entry["lag"].begin(); it != entry["lag"].end(); ++it) {
        lag += (lag.empty() ? "" : " ") + it.key() + ":" + Scalar(it.value());
      }
    }
    auto field = [&entry](const char* key) { return entry.contains(key) ? Scalar(entry[key]) : std::string("-"); };
    rows.push_back({field("partition"), Nodes(entry, "placed"), Nodes(entry, "voters"), field("role"),
                    field("leader"), field("pin"), field("term"), field("commit"), field("applied"),
                    lag.empty() ? "-" : lag});
  }
  std::string out = fmt::format("node {}: {} of {} partitions open (placement epoch {})\n",
                                Scalar(body.value("node", nlohmann::json(""))), rows.size(),
                                Scalar(body.value("partitions", nlohmann::json(0))),
                                Scalar(body.value("placement_epoch", nlohmann::json(0))));
  out += Table({"PARTITION", "PLACED", "VOTERS", "ROLE", "LEADER", "PIN", "TERM", "COMMIT", "APPLIED", "LAG"}, rows);
  out += "(role, term, commit and applied as this node sees them; '-' where it holds no replica;\n"
         " PIN: the leader chosen by transfer-leader)\n";
  if (body.contains("draining") && body["draining"].is_array() && !body["draining"].empty()) {
    out += fmt::format("draining: nodes {}\n", Nodes(body, "draining"));
  }
  return out;
}

// Objects print as "key: value" lines; an array of objects as a table.
std::string FormatGeneric(const nlohmann::json& body) {
  auto table_of = [](const nlohmann::json& items) {
    std::vector<std::string> header;
    for (const auto& item : items) {
      if (!item.is_object()) return std::string();
      for (const auto& [key, value] : item.items()) {
        if (std::find(header.begin(), header.end(), key) == header.end()) header.push_back(key);
      }
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& item : items) {
      std::vector<std::string> row;
      for (const auto& key : header) row.push_back(item.contains(key) ? Scalar(item[key]) : "");
      rows.push_back(row);
    }
    std::vector<std::string> upper = header;
    for (auto& name : upper) {
      for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return Table(upper, rows);
  };
  if (body.is_array() && !body.empty()) {
    if (auto table = table_of(body); !table.empty()) return table;
  }
  if (!body.is_object()) return body.dump(2) + "\n";
  std::string out;
  for (const auto& [key, value] : body.items()) {
    if (value.is_array() && !value.empty() && value[0].is_object()) {
      if (auto table = table_of(value); !table.empty()) {
        out += key + ":\n" + table;
        continue;
      }
    }
    out += fmt::format("{}: {}\n", key, value.is_structured() ? value.dump() : Scalar(value));
  }
  return out;
}

int RunCtl(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app("estuaryctl: administer an Estuary cluster through a node's admin API", "estuaryctl");
  io::Endpoint admin{"127.0.0.1", 8080};
  bool json = false;
  int timeout_ms = 5000;
  io::AddEndpointOption(app, "--admin", admin, "the node's admin address HOST:PORT");
  app.add_flag("--json", json, "print the API's JSON as it came");
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "file whose first line is the admin token (the node's --admin-token-file): sent as "
                 "'Authorization: Bearer TOKEN' on every request");
  std::string admin_ca;
  app.add_option("--admin-ca", admin_ca,
                 "HTTPS to the node's --admin-tls listener: its certificate must verify against this PEM CA file "
                 "and name the --admin host");
  app.add_option("--timeout-ms", timeout_ms, "connect and read timeout")->capture_default_str()->check(
      CLI::Range(1, 600'000));
  app.require_subcommand(1, 1);
  std::string address;
  unsigned node = 0;
  app.add_subcommand("members", "list the members, their state and addresses");
  app.add_subcommand("join", "make the node dial ADDR (a cluster address) and exchange member tables")
      ->add_option("ADDR", address, "HOST:PORT of a node's cluster listener")
      ->required()
      ->check([](const std::string& text) {
        auto endpoint = io::ParseEndpoint(text);
        return endpoint ? std::string() : endpoint.error();
      });
  app.add_subcommand("remove", "remove node ID from the cluster (it stays out until joined again)")
      ->add_option("ID", node, "node id")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_subcommand("leave", "make the node leave the cluster gracefully");
  app.add_subcommand("routes", "show the cluster's route table");
  app.add_subcommand("meta", "show the metadata raft group: role, term, leader, voters, members, placement");
  app.add_subcommand("partitions",
                     "show the open partitions: replicas, voters, role, leader, term, commit index, followers' lag");
  app.add_subcommand("load", "show the node's load report");
  TransferOptions transfer;
  auto* transfer_command = app.add_subcommand(
      "transfer-leader",
      "move a partition's leadership (a hot switch: writes are held, not failed) and pin it there");
  transfer_command->add_option("--partition", transfer.partition, "the partition number")->required();
  transfer_command->add_option("--to", transfer.to, "the node to lead it (default: another caught-up voter)")
      ->check(CLI::Range(1, 65535));
  transfer_command->add_flag("--clear", transfer.clear, "drop the pin: the placement's first replica leads again");
  bool no_wait = false;
  app.add_subcommand("drain", "drain the node: no new clients, its partition leaderships move away (waits)")
      ->add_flag("--no-wait", no_wait, "do not wait until the node leads no partition");
  app.add_subcommand("undrain", "end the node's drain");
  // estuaryctl reload (issue 25 point 4; ctl_reload.h).
  app.add_subcommand("reload",
                     "make the node read its configuration file and its password, ACL, token and certificate "
                     "files again (as SIGHUP); prints what changed and what needs a restart");
  PasswdOptions passwd;
  auto* passwd_command = app.add_subcommand(
      "passwd",
      "add USER to a password file (or replace its password) as a $7$ PBKDF2-SHA512 line, mosquitto_passwd's "
      "format; no node is contacted. The password is asked twice on a terminal, or read as the first line of "
      "stdin when stdin is not a terminal");
  passwd_command->add_option("FILE", passwd.file, "the password file (created 0600 if missing)")->required();
  passwd_command->add_option("USER", passwd.user, "the user name")->required();
  passwd_command
      ->add_option("--iterations", passwd.iterations,
                   "PBKDF2 iterations (default 101, mosquitto_passwd's; with --scram 4096, RFC 7677's minimum). "
                   "A $7$ line costs them at each CONNECT; a SCRAM line costs the client, and PLAIN")
      ->check(CLI::Range(1u, 10'000'000u));
  passwd_command->add_flag("--scram", passwd.scram,
                           "write SCRAM-SHA-256 keys (salt, iterations, StoredKey, ServerKey) instead of a $7$ hash: "
                           "the user can then log in with SCRAM-SHA-256 (AMQP SASL, MQTT 5 AUTH) and with a "
                           "password; Mosquitto cannot read such a line");
  ObserveOptions observe;  // status, clients, sessions, subscriptions, retained, shared, top (ctl_observe.h)
  AddObserveCommands(app, observe);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& error) {
    err << "estuaryctl: error: " << error.what() << "\n";
    return 2;
  }
  const std::string command = app.get_subcommands().at(0)->get_name();
  SetBearerToken({});
  SetAdminCa(admin_ca);
  if (!token_file.empty() && command != "passwd") {
    auto token = io::ReadAdminTokenFile(token_file);
    if (!token) {
      err << "estuaryctl: error: --token-file " << token.error() << "\n";
      return 2;
    }
    SetBearerToken(std::move(*token));
  }
  if (command == "reload") return RunReload(admin, json, timeout_ms, out, err);
  if (IsObserveCommand(command)) return RunObserve(command, admin, observe, json, timeout_ms, out, err);
  if (command == "passwd") return RunPasswd(passwd, std::cin, ::isatty(STDIN_FILENO) == 1, out, err);
  if (command == "transfer-leader" || command == "drain" || command == "undrain") {
    try {
      if (command == "transfer-leader") return RunTransfer(admin, transfer, json, timeout_ms, out, err);
      return RunDrain(admin, command == "undrain", !no_wait, json, timeout_ms, out, err);
    } catch (const nlohmann::json::exception& error) {  // a field of an unexpected type
      err << "estuaryctl: malformed answer from the node: " << error.what() << "\n";
      return 1;
    }
  }
  std::string method = "GET", target;
  if (command == "members") target = "/api/cluster/members";
  if (command == "join") method = "POST", target = "/api/cluster/join?address=" + Escape(address);
  if (command == "remove") method = "DELETE", target = fmt::format("/api/cluster/members/{}", node);
  if (command == "leave") method = "POST", target = "/api/cluster/leave";
  if (command == "routes") target = "/api/cluster/routes";
  if (command == "meta") target = "/api/cluster/meta";
  if (command == "partitions") target = "/api/cluster/partitions";
  if (command == "load") target = "/api/load";

  auto reply = HttpRequest(admin.host, admin.port, method, target, timeout_ms);
  if (!reply) {
    err << UnreachableMessage(admin, reply.error()) << "\n";
    return 1;
  }
  if (reply->status >= 400) {
    err << ErrorLine(*reply, target) << "\n";
    return 1;
  }
  if (json) {
    out << reply->body << (reply->body.ends_with('\n') ? "" : "\n");
    return 0;
  }
  auto body = nlohmann::json::parse(reply->body, nullptr, false);
  if (body.is_discarded()) {
    out << reply->body << (reply->body.ends_with('\n') ? "" : "\n");
    return 0;
  }
  out << FormatReply(body, command);
  return 0;
}

}  // namespace estuary::ctl
