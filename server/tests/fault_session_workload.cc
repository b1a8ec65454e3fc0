#include "server/tests/fault_session_workload.h"

#include <algorithm>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr char kClientPrefix[] = "fault-s";
constexpr auto kConnectWait = std::chrono::milliseconds(30'000);
constexpr uint32_t kSessionExpiry = 3600;

std::string TopicOf(const std::string& client) { return "fault/" + client.substr(sizeof("fault-") - 1); }

// A persistent-session CONNECT (MQTT 5, clean start 0, an hour's expiry).
std::unique_ptr<estuary::testing::RawClient> ConnectSession(const NodeProcess& node, const std::string& client,
                                                           bool* present) {
  auto raw = std::make_unique<estuary::testing::RawClient>();
  if (!raw->Open("127.0.0.1", node.mqtt_port())) return nullptr;
  mqtt::Properties properties;
  properties.session_expiry_interval = kSessionExpiry;
  auto connack = raw->Connect(client, /*clean_start=*/false, properties);
  if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) return nullptr;
  if (present != nullptr) *present = connack->session_present;
  return raw;
}

}  // namespace

SessionWorkload::SessionWorkload(int sessions) {
  for (int s = 0; s < sessions; ++s) all_clients_.push_back(kClientPrefix + std::to_string(s));
  clients_ = all_clients_;
}

void SessionWorkload::UseKeys(const std::vector<std::string>& keys) {
  clients_ = keys;
  next_client_ = 0;
}

bool SessionWorkload::CreateSessions(FaultCluster& cluster, int node, std::string* error) {
  for (const std::string& client : all_clients_) {
    std::unique_ptr<estuary::testing::RawClient> raw;
    WaitUntil([&] { return (raw = ConnectSession(cluster.node(node), client, nullptr)) != nullptr; }, kConnectWait);
    if (!raw) {
      if (error) *error = client + " could not connect to node " + std::to_string(node);
      return false;
    }
    mqtt::SubscribePacket subscribe;
    subscribe.packet_id = 1;
    subscribe.subscriptions.push_back({TopicOf(client), mqtt::SubscribeOptions{1}});
    raw->Send(subscribe);
    if (!raw->ReceiveAs<mqtt::SubackPacket>(kConnectWait)) {
      if (error) *error = client + ": no SUBACK";
      return false;
    }
    raw->Send(mqtt::DisconnectPacket{});
    raw->WaitClosed();
  }
  sessions_created_ = true;
  return true;
}

bool SessionWorkload::Connect(FaultCluster& cluster, int node, std::string* error) {
  if (!sessions_created_ && !CreateSessions(cluster, node, error)) return false;
  publisher_.reset();
  outstanding_.reset();
  const bool connected = WaitUntil(
      [&] {
        publisher_ = ConnectTo(cluster.node(node), "fault-session-publisher-" + std::to_string(++connections_));
        return publisher_ != nullptr;
      },
      kConnectWait);
  if (!connected && error) *error = "the publisher could not connect to node " + std::to_string(node);
  return connected;
}

void SessionWorkload::Send(const std::string& client) {
  mqtt::PublishPacket publish;
  publish.topic = TopicOf(client);
  publish.payload = "s" + std::to_string(++sequence_);
  publish.qos = 1;
  packet_id_ = packet_id_ == 65535 ? 1 : packet_id_ + 1;
  publish.packet_id = packet_id_;
  publisher_->Send(publish);
  outstanding_ = Outstanding{client, sequence_, packet_id_};
}

bool SessionWorkload::WarmUp(std::chrono::milliseconds timeout, std::string* error) {
  for (const auto& client : all_clients_) {
    Send(client);
    const auto deadline = SteadyClock::now() + timeout;
    Step step = Step::kPending;
    while (step == Step::kPending && SteadyClock::now() < deadline) step = Publish(std::chrono::milliseconds(500));
    if (step != Step::kAcknowledged) {
      if (error) *error = "warm-up: the message for " + client + " was not acknowledged";
      return false;
    }
  }
  return true;
}

Workload::Step SessionWorkload::Publish(std::chrono::milliseconds wait) {
  if (!outstanding_) {
    Send(clients_[next_client_]);
    next_client_ = (next_client_ + 1) % clients_.size();
  }
  const auto deadline = SteadyClock::now() + wait;
  while (SteadyClock::now() < deadline) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    auto ack = publisher_->ReceiveAs<mqtt::AckPacket>(std::max(remaining, std::chrono::milliseconds(1)));
    if (ack && ack->packet_id == outstanding_->packet_id) {
      acknowledged_[outstanding_->client].insert(outstanding_->sequence);
      outstanding_.reset();
      return Step::kAcknowledged;
    }
    if (publisher_->closed()) {
      outstanding_.reset();
      return Step::kBroken;
    }
  }
  return Step::kPending;
}

bool SessionWorkload::Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
                             std::string* error) {
  // Each session is resumed once per call, on the first node given: what
  // it receives is taken, so each acknowledged message is checked by one
  // call only, and one that comes again in a later call is a duplicate.
  const int node = nodes.front();
  if (counters.duplicated < 0) counters.duplicated = 0;
  for (const std::string& client : all_clients_) {
    std::set<int64_t>& acknowledged = acknowledged_[client];
    std::set<int64_t>& verified = verified_[client];
    bool present = false;
    std::unique_ptr<estuary::testing::RawClient> raw;
    WaitUntil([&] { return (raw = ConnectSession(cluster.node(node), client, &present)) != nullptr; }, kConnectWait);
    if (!raw) {
      if (error) *error = client + " could not resume on node " + std::to_string(node);
      return false;
    }
    std::map<int64_t, int> seen;
    auto all_came = [&] {
      return std::all_of(acknowledged.begin(), acknowledged.end(), [&](int64_t s) { return seen.count(s) != 0; });
    };
    // Until every acknowledged message came, then 300 ms more for
    // duplicates; or 3 s without any message.
    auto quiet = std::chrono::milliseconds(3000);
    while (true) {
      if (all_came()) quiet = std::chrono::milliseconds(300);
      auto packet = raw->Receive(quiet);
      if (!packet) break;
      auto* publish = std::get_if<mqtt::PublishPacket>(&*packet);
      if (publish == nullptr) continue;
      if (publish->qos > 0) {
        mqtt::AckPacket puback;
        puback.packet_id = publish->packet_id;
        raw->Send(puback);
      }
      if (publish->payload.size() > 1 && publish->payload[0] == 's') ++seen[std::stoll(publish->payload.substr(1))];
    }
    for (const auto& [sequence, times] : seen) {
      counters.duplicated += times - 1 + (verified.count(sequence) != 0 ? 1 : 0);
    }
    for (int64_t sequence : acknowledged) {
      ++counters.checked;
      if (seen.count(sequence) != 0) {
        ++counters.delivered;
        verified.insert(sequence);
      } else {
        ++counters.lost;
        if (counters.losses.size() < 5) {
          counters.losses.push_back(client + ": s" + std::to_string(sequence) + " acknowledged, not delivered on node " +
                                    std::to_string(node) + (present ? "" : " (the session was not present)"));
        }
      }
    }
    acknowledged.clear();
    raw->Send(mqtt::DisconnectPacket{});
  }
  return true;
}

}  // namespace estuary::server::testing
