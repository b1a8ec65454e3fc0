// ShardRuntime's part of the admin API's client pages (docs/admin-api.md):
// run on the shard's own thread, posted there by the node (server/admin_api.cc).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/admin_query.h"
#include "server/shard_peers.h"

namespace estuary::server {

namespace {

const char* MqttStateName(mqtt::MqttConnection::State state) {
  switch (state) {
    case mqtt::MqttConnection::State::kConnected: return "connected";
    case mqtt::MqttConnection::State::kClosed: return "closing";
    default: return "connecting";
  }
}

const char* MqttVersionName(mqtt::ProtocolVersion version) {
  switch (version) {
    case mqtt::ProtocolVersion::kV31: return "mqtt3.1";
    case mqtt::ProtocolVersion::kV311: return "mqtt3.1.1";
    case mqtt::ProtocolVersion::kV5: return "mqtt5";
  }
  return "mqtt";
}

}  // namespace

nlohmann::json ShardRuntime::ClientsJson(const ClientFilter& filter, size_t window) const {
  std::vector<nlohmann::json> rows;
  size_t matched = 0;
  const int64_t now = loop_.NowMs();
  auto offer = [&](nlohmann::json row) {
    ++matched;
    rows.push_back(std::move(row));
  };
  auto wanted = [&](const std::string& id, const std::string& user, const std::string& address) {
    return Contains(id, filter.client_id) && Contains(user, filter.username) && Contains(address, filter.address);
  };
  for (const auto& [key, peer] : peers_) {
    if (!peer->mqtt) continue;
    const mqtt::MqttConnection& connection = *peer->mqtt;
    const std::string address = peer->stream->peer_address();
    if (!wanted(connection.client_id(), connection.username(), address)) continue;
    const int64_t since = connection.connected_at_ms();
    offer({{"client_id", connection.client_id()},
           {"username", connection.username()},
           {"address", address},
           {"protocol", MqttVersionName(connection.version())},
           {"state", MqttStateName(connection.state())},
           {"connected_for_ms", since == 0 ? 0 : now - since},
           {"shard", broker_.config().shard_id}});
  }
  for (const auto& [key, peer] : amqp_peers_) {
    if (!peer->amqp) continue;
    const std::string address = peer->stream->peer_address();
    const amqp::AmqpConnection& connection = *peer->amqp;
    if (!wanted(connection.remote_container_id(), connection.sasl_user(), address)) continue;
    offer({{"client_id", connection.remote_container_id()},
           {"username", connection.sasl_user()},
           {"address", address},
           {"protocol", "amqp1.0"},
           {"state", connection.closed() ? "closing" : (connection.opening() ? "connecting" : "connected")},
           {"links", connection.link_count()},
           {"shard", broker_.config().shard_id}});
  }
  // Only the first `window` by client id travel back to the admin thread.
  auto by_id = [](const nlohmann::json& a, const nlohmann::json& b) { return a["client_id"] < b["client_id"]; };
  if (rows.size() > window) {
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(window), rows.end(), by_id);
    rows.resize(window);
  } else {
    std::sort(rows.begin(), rows.end(), by_id);
  }
  return {{"matched", matched}, {"clients", std::move(rows)}};
}

size_t ShardRuntime::Kick(const std::string& client_id) {
  // Collected first: a disconnect may remove the peer from the map.
  std::vector<std::shared_ptr<mqtt::MqttConnection>> mqtt;
  std::vector<std::shared_ptr<amqp::AmqpConnection>> amqp;
  for (const auto& [key, peer] : peers_) {
    if (peer->mqtt && peer->mqtt->client_id() == client_id) mqtt.push_back(peer->mqtt);
  }
  for (const auto& [key, peer] : amqp_peers_) {
    if (peer->amqp && peer->amqp->remote_container_id() == client_id) amqp.push_back(peer->amqp);
  }
  for (const auto& connection : mqtt) {
    spdlog::info("admin: disconnecting MQTT client '{}' (administrative action)", client_id);
    connection->Disconnect(mqtt::ReasonCode::kAdministrativeAction);  // MQTT 5: 0x98; 3.1.1: the socket closes
  }
  for (const auto& connection : amqp) {
    spdlog::info("admin: closing AMQP connection of container '{}' (administrative action)", client_id);
    connection->Shutdown("disconnected by an operator (admin API)");
  }
  return mqtt.size() + amqp.size();
}

}  // namespace estuary::server
