#include "server/tests/fault_shared_workload.h"

#include <algorithm>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr char kTopic[] = "fault/g";
constexpr char kFilter[] = "$share/fault/fault/g";
constexpr auto kConnectWait = std::chrono::milliseconds(30'000);
constexpr uint32_t kSessionExpiry = 3600;

std::vector<std::string> MemberIds(int members) {
  std::vector<std::string> ids;
  for (int m = 0; m < members; ++m) ids.push_back("fault-g" + std::to_string(m));
  return ids;
}

}  // namespace

SharedGroupWorkload::SharedGroupWorkload(int members, uint8_t qos)
    : StreamWorkload(MemberIds(members), qos, "fault-group-publisher-") {
  for (const std::string& id : Keys()) {
    members_.emplace_back();
    members_.back().client = id;
  }
}

mqtt::PublishPacket SharedGroupWorkload::MessageFor(const std::string& /*key*/) const {
  mqtt::PublishPacket publish;
  publish.topic = kTopic;
  return publish;
}

bool SharedGroupWorkload::Join(FaultCluster& cluster, Member& member, int node, bool subscribe, std::string* error) {
  member.online.reset();
  std::unique_ptr<estuary::testing::RawClient> raw;
  WaitUntil(
      [&] {
        raw = std::make_unique<estuary::testing::RawClient>();
        if (!raw->Open("127.0.0.1", cluster.node(node).mqtt_port())) return false;
        mqtt::Properties properties;
        properties.session_expiry_interval = kSessionExpiry;
        auto connack = raw->Connect(member.client, /*clean_start=*/false, properties);
        return connack && connack->reason == mqtt::ReasonCode::kSuccess;
      },
      kConnectWait);
  if (!raw || raw->closed()) {
    if (error) *error = member.client + " could not connect to node " + std::to_string(node);
    return false;
  }
  if (subscribe) {
    mqtt::SubscribePacket packet;
    packet.packet_id = 1;
    packet.subscriptions.push_back({kFilter, mqtt::SubscribeOptions{qos()}});
    raw->Send(packet);
    std::optional<mqtt::SubackPacket> suback;
    while (!suback) {  // deliveries may come first
      auto reply = raw->Receive(kConnectWait);
      if (!reply) break;
      if (auto* typed = std::get_if<mqtt::SubackPacket>(&*reply)) suback = *typed;
    }
    if (!suback) {
      if (error) *error = member.client + ": no SUBACK";
      return false;
    }
  }
  member.online = std::move(raw);
  member.node = node;
  return true;
}

bool SharedGroupWorkload::Setup(FaultCluster& cluster, int /*node*/, std::string* error) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!Join(cluster, members_[i], static_cast<int>(i % cluster.size()) + 1, true, error)) return false;
  }
  return true;
}

bool SharedGroupWorkload::DrainAll(std::chrono::milliseconds wait) {
  bool any = false;
  for (Member& member : members_) {
    if (!member.online || member.online->closed()) continue;
    while (auto packet = member.online->Receive(wait)) {
      any = true;
      if (auto sequence = TakeDelivery(*member.online, *packet, member.receiver)) ledger_.Delivered(*sequence);
    }
  }
  return any;
}

void SharedGroupWorkload::BetweenSteps() { DrainAll(std::chrono::milliseconds(1)); }

bool SharedGroupWorkload::Prepare(FaultCluster& cluster, int publisher, const std::vector<int>& victims,
                                  std::string* error) {
  std::vector<int> order = victims;
  order.push_back(publisher);
  for (int node = 1; node <= cluster.size(); ++node) {
    if (std::find(order.begin(), order.end(), node) == order.end()) order.push_back(node);
  }
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& member = members_[i];
    const int node = order[i % order.size()];
    if (member.node == node) continue;
    DrainAll(std::chrono::milliseconds(50));
    member.online->Send(mqtt::DisconnectPacket{});
    member.online->WaitClosed();
    if (!Join(cluster, member, node, false, error)) return false;
  }
  return true;
}

bool SharedGroupWorkload::Verify(FaultCluster& cluster, const std::vector<int>& nodes, StreamCounters& counters,
                                 std::string* error) {
  DrainAll(std::chrono::milliseconds(20));  // also notices connections the fault closed
  for (Member& member : members_) {
    const bool node_listed = std::find(nodes.begin(), nodes.end(), member.node) != nodes.end();
    if (member.online && !member.online->closed() && node_listed) continue;
    if (!Join(cluster, member, nodes.front(), false, error)) return false;
  }
  // Until every acknowledged message came, then 300 ms more for
  // duplicates; or 3 s without any message.
  auto last = SteadyClock::now();
  while (SteadyClock::now() - last < (ledger_.AllCame() ? std::chrono::milliseconds(300) : std::chrono::milliseconds(3000))) {
    if (DrainAll(std::chrono::milliseconds(20))) last = SteadyClock::now();
  }
  CountLost(ledger_.Tally(counters, [&](int64_t sequence) {
    return "s" + std::to_string(sequence) + " acknowledged, reached no member" + WhenAcknowledged(sequence);
  }));
  return true;
}

}  // namespace estuary::server::testing
