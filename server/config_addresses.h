#pragma once
// The addresses a node gives others (docs/cluster.md "Addresses for more
// than one host"): --advertise-cluster, --advertise-mqtt, --advertise-amqp
// and --bootstrap-expect, their flags and TOML keys, and the start-up rules
// that refuse an address no other host could dial. Used by config.cc; the
// helpers below by the node when it fills in what it announces.
#include <string>
#include <string_view>

#include "server/config.h"

namespace CLI {
class App;
}

namespace estuary::server {

void AddAddressOptions(CLI::App& app, NodeConfig& config);
// Throws CLI::ValidationError naming the flag at fault. Resolves every
// advertised host name once (a blocking lookup, at start-up only).
void CheckAddresses(const NodeConfig& config);

// 0.0.0.0, :: (any spelling of the unspecified address): a listener may
// bind it, but nobody can dial it.
bool IsWildcardHost(std::string_view host);
// What peers dial: --advertise-cluster, else --cluster (normalised
// HOST:PORT). The port may be 0 (the port bound, known after listening).
std::string AdvertisedCluster(const NodeConfig& config);
// The host a wildcard listener of this node is announced under (the admin
// address in membership): --advertise-cluster's host when given, else
// `bound` itself.
std::string AnnouncedHost(const NodeConfig& config, const std::string& bound);
// What /api/load names for a listener bound at `bound_host`:`port`: the
// --advertise-mqtt/--advertise-amqp text (port 0 there: `port`), else the
// bound address.
std::string AdvertisedListener(const std::string& advertise, const std::string& bound_host, uint16_t port);
// How many distinct nodes the seed list names, this node included
// (AdvertisedCluster counted once whether the list holds it or not).
size_t SeededNodeCount(const NodeConfig& config);
// --bootstrap-expect: whether this node is one of the N initial nodes (N
// counts it with the seeds). False for a node outside a list of N (added
// later with the same configuration): it never founds a cluster.
bool AmongInitialNodes(const NodeConfig& config);

}  // namespace estuary::server
