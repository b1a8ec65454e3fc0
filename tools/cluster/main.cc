// estuary-cluster: starts and stops a local Estuary cluster on loopback.
//   estuary-cluster start [--nodes 3] [--dir DIR] [--balancers] ... [-- estuaryd flags]
//   estuary-cluster stop [--dir DIR]
// --help exits 0; a bad flag prints one line and exits 2 (DESIGN.md).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "tools/cluster/launcher.h"

namespace {

using estuary::launcher::LaunchOptions;

void AddStartOptions(CLI::App& start, LaunchOptions& options) {
  start.add_option("-n,--nodes", options.nodes, "Number of estuaryd nodes")->capture_default_str()->check(CLI::Range(1, 64));
  start.add_option("-d,--dir", options.dir, "Directory for the secret, pid file, logs and node-N data folders")
      ->capture_default_str();
  start.add_option("--estuaryd", options.estuaryd, "estuaryd binary (default: next to estuary-cluster)");
  start.add_option("--estuary-lb", options.estuary_lb, "estuary-lb binary (default: next to estuary-cluster)");
  start.add_flag("--balancers", options.balancers,
                 "Also start the estuary-lb pair (active, standby) in front; nodes then take --proxy-from 127.0.0.1");
  start.add_flag("--netns", options.netns,
                 "Root only: every node and balancer in its own network namespace with its own address "
                 "(10.80.X.N/24) on a bridge est<tag>br (10.80.X.254) on this machine, as separate hosts; all use "
                 "the same ports (the bases, or 1883/5672/8080/7000); implies --admin-token (admin ports off loopback); what it makes is listed in DIR/netns.list "
                 "and removed at stop (`stop` also removes a crashed run's); exits 2 without root or `ip`");
  start.add_flag("!--no-cluster-tls", options.cluster_tls,
                 "Links between the nodes in clear text (default: mutual TLS with throwaway certificates made by "
                 "`openssl` in DIR/tls, when estuaryd takes --cluster-tls-cert)");
  start.add_flag("--admin-token", options.admin_token,
                 "Write a random admin token to DIR/admin.token and give it to every node and balancer "
                 "(--admin-token-file); use it with `estuaryctl --token-file DIR/admin.token`");
  start.add_option("--storage", options.storage, "Storage engine of the nodes")
      ->capture_default_str()
      ->check(CLI::IsMember({"bitcask", "rocksdb", "memory"}));
  start.add_option("--sync", options.sync, "Storage sync policy (default: estuaryd's)")
      ->check(CLI::IsMember({"always", "interval", "none"}));
  start.add_option("--mqtt-base", options.mqtt_base, "MQTT port of node 1 (node k: base+k-1); 0 = free ports")->capture_default_str();
  start.add_option("--amqp-base", options.amqp_base, "AMQP port of node 1; 0 = free ports")->capture_default_str();
  start.add_option("--admin-base", options.admin_base, "Admin HTTP port of node 1; 0 = free ports")->capture_default_str();
  start.add_option("--cluster-base", options.cluster_base, "Inter-node port of node 1; 0 = free ports")->capture_default_str();
  start.add_option("--lb-mqtt", options.lb_mqtt, "Active balancer's MQTT port (0 = free)")->capture_default_str();
  start.add_option("--lb-amqp", options.lb_amqp, "Active balancer's AMQP port (0 = free)")->capture_default_str();
  start.add_option("--lb-mqtt2", options.lb_mqtt2, "Standby balancer's MQTT port (0 = free)")->capture_default_str();
  start.add_option("--lb-amqp2", options.lb_amqp2, "Standby balancer's AMQP port (0 = free)")->capture_default_str();
  start.add_option("--lb-heartbeat", options.lb_heartbeat, "Active balancer's heartbeat UDP port, standby's is +1 (0 = free)")
      ->capture_default_str();
  start.add_option("--ready-timeout", options.ready_timeout_ms, "Milliseconds to wait for ready lines and a healthy cluster")
      ->capture_default_str();
  start.add_option("--grace", options.grace_ms, "Milliseconds between SIGTERM and SIGKILL at stop")->capture_default_str();
  start.add_option("estuaryd-flags", options.estuaryd_flags, "Extra estuaryd flags, after --");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"estuary-cluster: starts N estuaryd nodes (and optionally the estuary-lb pair) on loopback, "
               "waits until they form one cluster, prints the endpoints, and stops them all on Ctrl-C or `stop`",
               "estuary-cluster"};
  app.require_subcommand(1);
  LaunchOptions options;
  CLI::App* start = app.add_subcommand("start", "Start a cluster and stay in the foreground until Ctrl-C or SIGTERM");
  AddStartOptions(*start, options);
  std::string stop_dir = options.dir;
  uint32_t stop_timeout_ms = 30000;
  CLI::App* stop = app.add_subcommand("stop", "Stop the cluster whose launcher runs in DIR");
  stop->add_option("-d,--dir", stop_dir, "The directory given to start")->capture_default_str();
  stop->add_option("--timeout", stop_timeout_ms, "Milliseconds to wait for the launcher to exit")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "estuary-cluster: error: %s\n", error.what());
    return 2;
  }
  if (start->parsed()) return estuary::launcher::RunStart(options);
  return estuary::launcher::RunStop(stop_dir, stop_timeout_ms);
}
