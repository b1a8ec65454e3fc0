#include "server/config_addresses.h"

#include <arpa/inet.h>

#include <set>

#include "io/uv/admin_token.h"
#include "io/uv/cli_options.h"
#include "io/uv/sockaddr.h"
#include "server/bootstrap_gate.h"

namespace estuary::server {
namespace {

std::set<std::string> FoldedSeeds(const NodeConfig& config) {
  std::set<std::string> seeds;
  for (const io::Endpoint& seed : config.seeds) seeds.insert(FoldedAddress(seed.ToString()));
  return seeds;
}

const char* const kRoutable = "name this node's own address or host name, the one other hosts reach it by";

// An advertised HOST:PORT: parsed, not a wildcard, and resolvable here.
void CheckAdvertised(const std::string& flag, const std::string& text) {
  if (text.empty()) return;
  auto endpoint = io::ParseEndpoint(text);
  if (!endpoint) throw CLI::ValidationError(flag, endpoint.error());
  if (IsWildcardHost(endpoint->host)) {
    throw CLI::ValidationError(flag, text + " is a wildcard address that nobody can dial: " + kRoutable);
  }
  if (auto resolved = io::detail::ResolveBlocking(*endpoint); !resolved) {
    throw CLI::ValidationError(flag, text + ": " + resolved.error() + "; " + kRoutable);
  }
}

bool IsNumericHost(const std::string& host) {
  in6_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 || inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// A loopback address reaches nobody on another host: with a seed at a
// numeric address of another host, peers would dial themselves.
void CheckLoopbackAmongHosts(const NodeConfig& config) {
  if (config.cluster_secret_file.empty()) return;
  auto self = io::ParseEndpoint(AdvertisedCluster(config));
  if (!self || !io::IsLoopbackHost(self->host)) return;
  for (const io::Endpoint& seed : config.seeds) {
    if (!IsNumericHost(seed.host) || io::IsLoopbackHost(seed.host)) continue;
    const std::string flag = config.advertise_cluster.empty() ? "--cluster" : "--advertise-cluster";
    throw CLI::ValidationError(flag, self->ToString() + " is a loopback address, which seed " + seed.ToString() +
                                         " on another host cannot dial: " + kRoutable +
                                         (config.advertise_cluster.empty() ? " (--advertise-cluster)" : ""));
  }
}

void CheckBootstrapExpect(const NodeConfig& config) {
  if (config.bootstrap_expect == 0) return;
  const std::string flag = "--bootstrap-expect";
  if (config.seeds.empty()) {
    throw CLI::ValidationError(flag, "needs --seeds, the same list of every initial node's cluster address on each");
  }
  auto self = io::ParseEndpoint(AdvertisedCluster(config));
  if (!self || self->port == 0) {
    throw CLI::ValidationError(flag,
                               "needs a fixed cluster port (--cluster or --advertise-cluster HOST:PORT with "
                               "a port other than 0), to find this node in --seeds");
  }
  // Listed itself (one list on every node) or not (each lists the others):
  // N counts this node with the list. A node outside a list of N is a
  // later one (a StatefulSet scaled up): it only ever joins.
  const size_t listed = FoldedSeeds(config).size();
  const size_t named = SeededNodeCount(config);
  if (config.bootstrap_expect != named && !(named == listed + 1 && config.bootstrap_expect == listed)) {
    throw CLI::ValidationError(
        flag, std::to_string(config.bootstrap_expect) + " does not match the " + std::to_string(named) +
                  " nodes --seeds names with this one (" + AdvertisedCluster(config) +
                  "): list every initial node in --seeds and give their count (docs/cluster.md \"Forming a "
                  "cluster from one configuration\" says why fewer is refused)");
  }
}

}  // namespace

bool IsWildcardHost(std::string_view host) {
  std::string bare(host);
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  in_addr v4{};
  if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) return v4.s_addr == INADDR_ANY;
  in6_addr v6{};
  if (inet_pton(AF_INET6, bare.c_str(), &v6) == 1) return IN6_IS_ADDR_UNSPECIFIED(&v6);
  return bare.empty();
}

std::string AdvertisedCluster(const NodeConfig& config) {
  if (!config.advertise_cluster.empty()) {
    if (auto endpoint = io::ParseEndpoint(config.advertise_cluster)) return endpoint->ToString();
  }
  return config.cluster.ToString();
}

std::string AnnouncedHost(const NodeConfig& config, const std::string& bound) {
  if (!IsWildcardHost(bound) || config.advertise_cluster.empty()) return bound;
  auto endpoint = io::ParseEndpoint(config.advertise_cluster);
  return endpoint ? endpoint->host : bound;
}

std::string AdvertisedListener(const std::string& advertise, const std::string& bound_host, uint16_t port) {
  if (auto endpoint = io::ParseEndpoint(advertise)) {
    if (endpoint->port == 0) endpoint->port = port;
    return endpoint->ToString();
  }
  return io::Endpoint{bound_host, port}.ToString();
}

size_t SeededNodeCount(const NodeConfig& config) {
  std::set<std::string> named = FoldedSeeds(config);
  named.insert(FoldedAddress(AdvertisedCluster(config)));
  return named.size();
}

bool AmongInitialNodes(const NodeConfig& config) {
  if (config.bootstrap_expect == 0) return false;
  return config.bootstrap_expect == SeededNodeCount(config);
}

void AddAddressOptions(CLI::App& app, NodeConfig& config) {
  io::AddOptionalEndpointOption(
      app, "--advertise-cluster", config.advertise_cluster,
      "Inter-node address HOST:PORT other nodes dial to reach this one (announced in membership; default: "
      "--cluster). Needed when --cluster listens on 0.0.0.0 or [::]; port 0 takes the port bound");
  io::AddOptionalEndpointOption(
      app, "--advertise-mqtt", config.advertise_mqtt,
      "MQTT address HOST:PORT the balancers send clients to (/api/load; default: --mqtt, whose wildcard host "
      "the balancer replaces by the node's admin host); port 0 takes the port bound");
  io::AddOptionalEndpointOption(app, "--advertise-amqp", config.advertise_amqp,
                                "AMQP 1.0 address HOST:PORT the balancers send clients to, as --advertise-mqtt");
  app.add_option("--bootstrap-expect", config.bootstrap_expect,
                 "Form a new cluster once N nodes are reachable: every node is given the same --seeds (every "
                 "initial node, this one may be among them) and N, their count; the node with the lowest id "
                 "founds the cluster, the others join it; a node with stored state, or outside a list of N, never "
                 "founds one (docs/cluster.md). 0 = off: only a node without --seeds founds a cluster")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1024u));
}

void CheckAddresses(const NodeConfig& config) {
  CheckAdvertised("--advertise-cluster", config.advertise_cluster);
  CheckAdvertised("--advertise-mqtt", config.advertise_mqtt);
  CheckAdvertised("--advertise-amqp", config.advertise_amqp);
  // Peers dial what this node announces: a wildcard is not an address.
  if (!config.cluster_secret_file.empty() && config.advertise_cluster.empty() && IsWildcardHost(config.cluster.host)) {
    throw CLI::ValidationError("--cluster", config.cluster.ToString() +
                                                " listens on every address, which peers cannot dial: add "
                                                "--advertise-cluster HOST:PORT naming this node");
  }
  CheckLoopbackAmongHosts(config);
  CheckBootstrapExpect(config);
}

}  // namespace estuary::server
