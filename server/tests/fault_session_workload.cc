#include "server/tests/fault_session_workload.h"

#include <cstdio>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr char kClientPrefix[] = "fault-s";
constexpr auto kConnectWait = std::chrono::milliseconds(30'000);
constexpr uint32_t kSessionExpiry = 3600;

std::vector<std::string> ClientIds(int sessions) {
  std::vector<std::string> clients;
  for (int s = 0; s < sessions; ++s) clients.push_back(kClientPrefix + std::to_string(s));
  return clients;
}

std::string TopicOf(const std::string& client) { return "fault/" + client.substr(sizeof("fault-") - 1); }

// A persistent-session CONNECT (MQTT 5, clean start 0, an hour's expiry).
// `why` (if given) says what the last failed attempt got.
std::unique_ptr<estuary::testing::RawClient> ConnectSession(const NodeProcess& node, const std::string& client,
                                                           bool* present, std::string* why = nullptr) {
  auto raw = std::make_unique<estuary::testing::RawClient>();
  if (!raw->Open("127.0.0.1", node.mqtt_port())) {
    if (why) *why = "the port refused the connection";
    return nullptr;
  }
  mqtt::Properties properties;
  properties.session_expiry_interval = kSessionExpiry;
  auto connack = raw->Connect(client, /*clean_start=*/false, properties);
  if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) {
    if (why) {
      char reason[8];
      std::snprintf(reason, sizeof(reason), "0x%02x", connack ? static_cast<unsigned>(connack->reason) : 0u);
      *why = connack ? std::string("CONNACK ") + reason : raw->closed() ? "closed without a CONNACK" : "no CONNACK in time";
    }
    return nullptr;
  }
  if (present != nullptr) *present = connack->session_present;
  return raw;
}

}  // namespace

SessionWorkload::SessionWorkload(const SessionWorkloadOptions& options)
    : StreamWorkload(ClientIds(options.sessions), options.qos, "fault-session-publisher-"), options_(options) {}

std::string SessionWorkload::name() const {
  return "persistent sessions QoS " + std::to_string(options_.qos) + (options_.on_victims ? " on the victims" : "");
}

mqtt::PublishPacket SessionWorkload::MessageFor(const std::string& client) const {
  mqtt::PublishPacket publish;
  publish.topic = TopicOf(client);
  return publish;
}

bool SessionWorkload::Setup(FaultCluster& cluster, int node, std::string* error) {
  for (const std::string& client : Keys()) {
    std::unique_ptr<estuary::testing::RawClient> raw;
    std::string why;
    WaitUntil([&] { return (raw = ConnectSession(cluster.node(node), client, nullptr, &why)) != nullptr; },
              kConnectWait);
    if (!raw) {
      if (error) *error = client + " could not connect to node " + std::to_string(node) + " (last attempt: " + why + ")";
      return false;
    }
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions.push_back({TopicOf(client), mqtt::SubscribeOptions{qos()}});
    raw->Send(subscribe);
    if (!raw->ReceiveAs<mqtt::SubackPacket>(kConnectWait)) {
      if (error) *error = client + ": no SUBACK";
      return false;
    }
    raw->Send(mqtt::DisconnectPacket{});
    raw->WaitClosed();
  }
  return true;
}

void SessionWorkload::Drain(Session& session, std::chrono::milliseconds wait) {
  while (auto packet = session.online->Receive(wait)) {
    if (auto sequence = TakeDelivery(*session.online, *packet, session.receiver)) session.ledger.Delivered(*sequence);
  }
}

void SessionWorkload::BetweenSteps() {
  for (auto& [client, session] : sessions_) {
    if (session.online && !session.online->closed()) Drain(session, std::chrono::milliseconds(1));
  }
}

std::unique_ptr<estuary::testing::RawClient> SessionWorkload::Resume(FaultCluster& cluster, int node,
                                                                     const std::string& client,
                                                                     std::chrono::milliseconds tail, bool* present,
                                                                     std::string* error) {
  Session& session = sessions_[client];
  std::unique_ptr<estuary::testing::RawClient> raw;
  WaitUntil([&] { return (raw = ConnectSession(cluster.node(node), client, present)) != nullptr; }, kConnectWait);
  if (!raw) {
    if (error) *error = client + " could not resume on node " + std::to_string(node);
    return nullptr;
  }
  auto quiet = std::chrono::milliseconds(3000);
  while (true) {
    if (session.ledger.AllCame()) quiet = tail;
    auto packet = raw->Receive(quiet);
    if (!packet) break;
    if (auto sequence = TakeDelivery(*raw, *packet, session.receiver)) session.ledger.Delivered(*sequence);
  }
  return raw;
}

bool SessionWorkload::Prepare(FaultCluster& cluster, int /*publisher*/, const std::vector<int>& victims,
                              std::string* error) {
  if (!options_.on_victims) return true;
  const auto clients = Keys();
  for (size_t i = 0; i < clients.size(); ++i) {
    auto raw = Resume(cluster, victims[i % victims.size()], clients[i], std::chrono::milliseconds(100), nullptr, error);
    if (!raw) return false;
    if (i % 2 == 1) {
      sessions_[clients[i]].online = std::move(raw);
    } else {
      raw->Send(mqtt::DisconnectPacket{});
      raw->WaitClosed();
    }
  }
  return true;
}

bool SessionWorkload::Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
                             std::string* error) {
  // Each session is resumed once per call, on the first node given: what
  // it receives is taken, so each acknowledged message is checked by one
  // call only, and one that comes again in a later call is a duplicate.
  // A session still online (on the victim) is dropped first, unread.
  const int node = nodes.front();
  if (counters.duplicated < 0) counters.duplicated = 0;
  for (const std::string& client : Keys()) {
    Session& session = sessions_[client];
    session.online.reset();
    bool present = false;
    auto raw = Resume(cluster, node, client, std::chrono::milliseconds(300), &present, error);
    if (!raw) return false;
    CountLost(session.ledger.Tally(counters, [&](int64_t sequence) {
      return client + ": s" + std::to_string(sequence) + " acknowledged, not delivered on node " +
             std::to_string(node) + (present ? "" : " (the session was not present)") + WhenAcknowledged(sequence);
    }));
    raw->Send(mqtt::DisconnectPacket{});
  }
  return true;
}

}  // namespace estuary::server::testing
