#include "server/tests/partition_workload.h"

#include <poll.h>

#include <algorithm>

#include "conformance/support/raw_client.h"
#include "conformance/support/wait_for.h"
#include "server/tests/fault_stream_workload.h"

namespace estuary::server::testing {
namespace {

using estuary::testing::RawClient;
using std::chrono::milliseconds;

constexpr uint32_t kSessionExpiry = 3600;
// Sequence numbers of publisher p start at p * kSequenceSpan (payload "s<n>").
constexpr int64_t kSequenceSpan = 1'000'000'000;

// " pid P[ dup]" of a PUBLISH (a duplicate's description).
std::string PacketNote(const mqtt::Packet& packet) {
  const auto* publish = std::get_if<mqtt::PublishPacket>(&packet);
  if (publish == nullptr) return {};
  return " pid " + std::to_string(publish->packet_id) + (publish->dup ? " dup" : "");
}

}  // namespace

struct PartitionWorkload::Session {
  int index = 0;
  std::string client_id;
  std::string topic;
  int node = 0;
  std::unique_ptr<RawClient> client;
  ReceiverState receiver;
  std::set<int64_t> acknowledged;  // mutex_
  std::map<int64_t, int> seen;     // mutex_
  std::map<int64_t, std::string> seen_where;  // "@ms on node n" per delivery (a duplicate's description); mutex_
};

struct PartitionWorkload::Publisher {
  int index = 0;
  std::unique_ptr<RawClient> client;
  PublisherFigures figures;  // mutex_
  struct InFlight {
    int64_t sequence = 0;
    int session = 0;
  };
  std::map<uint16_t, InFlight> in_flight;
  int64_t next = 0;
  uint16_t packet_id = 0;
  int connections = 0;
};

PartitionWorkload::PartitionWorkload(LabCluster& cluster, PartitionWorkloadOptions options)
    : cluster_(cluster), options_(std::move(options)), started_(std::chrono::steady_clock::now()) {}

PartitionWorkload::~PartitionWorkload() {
  stop_all_ = true;
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

int64_t PartitionWorkload::NowMs() const {
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started_).count();
}

int64_t PartitionWorkload::acknowledged() const {
  std::lock_guard lock(mutex_);
  int64_t total = 0;
  for (const auto& publisher : publishers_) total += publisher->figures.acknowledged;
  return total;
}

bool PartitionWorkload::Resume(Session& session, bool first, std::string* error) {
  std::vector<int> order{options_.subscriber_node};
  for (int id = 1; id <= cluster_.size(); ++id) {
    if (id != options_.subscriber_node) order.push_back(id);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(first ? 30 : 90);
  std::string last;
  for (size_t attempt = 0; !stop_all_ && std::chrono::steady_clock::now() < deadline; ++attempt) {
    // The first connection goes to the sessions' node only (the case puts
    // them there); a reconnect tries it first, then the others in turn.
    const int node = first ? options_.subscriber_node : order[attempt % order.size()];
    auto client = std::make_unique<RawClient>();
    if (!client->Open(cluster_.node(node).host, cluster_.node(node).mqtt_port)) {
      last = "node " + std::to_string(node) + " refused the connection";
      ::poll(nullptr, 0, 100);
      continue;
    }
    mqtt::Properties properties;
    properties.session_expiry_interval = kSessionExpiry;
    // Keep-alive 0: the test's raw client sends no PINGREQ, and a session
    // that receives nothing for a while (a cut, the final wait) must not be
    // ended by the broker's keep-alive check.
    auto connack = client->Connect(session.client_id, first, properties, 0);
    if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) {
      last = "node " + std::to_string(node) + (connack ? " refused the CONNECT" : " gave no CONNACK");
      ::poll(nullptr, 0, 100);
      continue;
    }
    if (!first && !connack->session_present) {
      std::lock_guard lock(mutex_);
      ++sessions_not_present_;
    }
    if (first || !connack->session_present) {
      mqtt::SubscribePacket subscribe;
      subscribe.packet_id = 1;
      subscribe.subscriptions.push_back({session.topic, mqtt::SubscribeOptions{options_.qos}});
      client->Send(subscribe);
      std::optional<mqtt::SubackPacket> suback;
      // Messages queued for the session may come before the SUBACK.
      while (!suback) {
        auto packet = client->Receive(std::chrono::seconds(10));
        if (!packet) break;
        if (auto* ack = std::get_if<mqtt::SubackPacket>(&*packet)) {
          suback = *ack;
        } else if (auto sequence = TakeDelivery(*client, *packet, session.receiver)) {
          std::lock_guard lock(mutex_);
          ++session.seen[*sequence];
          session.seen_where[*sequence] +=
              " @" + std::to_string(NowMs()) + " ms on node " + std::to_string(node) + PacketNote(*packet);
        }
      }
      if (!suback) {
        last = "no SUBACK from node " + std::to_string(node);
        continue;
      }
    }
    session.client = std::move(client);
    session.node = node;
    return true;
  }
  if (error) *error = session.client_id + ": " + last;
  return false;
}

void PartitionWorkload::RunSubscriber(Session& session) {
  while (!stop_all_) {
    if (!session.client) {
      if (!Resume(session, false, nullptr)) return;
      continue;
    }
    auto packet = session.client->Receive(milliseconds(100));
    if (packet) {
      if (auto* disconnect = std::get_if<mqtt::DisconnectPacket>(&*packet)) {
        std::lock_guard lock(mutex_);
        ends_.push_back({session.index, session.node, NowMs(), static_cast<int>(disconnect->reason)});
        session.client.reset();
        continue;
      }
      if (auto sequence = TakeDelivery(*session.client, *packet, session.receiver)) {
        std::lock_guard lock(mutex_);
        ++session.seen[*sequence];
        session.seen_where[*sequence] +=
            " @" + std::to_string(NowMs()) + " ms on node " + std::to_string(session.node) + PacketNote(*packet);
      }
      continue;
    }
    if (session.client->closed()) {
      std::lock_guard lock(mutex_);
      ends_.push_back({session.index, session.node, NowMs(), -1});
      session.client.reset();
    }
  }
}

void PartitionWorkload::RunPublisher(Publisher& publisher) {
  const int node = options_.publisher_nodes[publisher.index];
  const auto interval = std::chrono::microseconds(1'000'000 / std::max(1, options_.rate));
  auto next_send = std::chrono::steady_clock::now();
  while (!stop_all_) {
    if (!publisher.client) {
      publisher.in_flight.clear();  // given up: never acknowledged
      {
        std::lock_guard lock(mutex_);
        publisher.figures.outstanding = 0;
      }
      auto client = std::make_unique<RawClient>();
      if (client->Open(cluster_.node(node).host, cluster_.node(node).mqtt_port)) {
        auto connack = client->Connect("part-pub" + std::to_string(publisher.index) + "-" +
                                           std::to_string(++publisher.connections),
                                       true, {}, 0);
        if (connack && connack->reason == mqtt::ReasonCode::kSuccess) publisher.client = std::move(client);
      }
      if (!publisher.client) ::poll(nullptr, 0, 100);
      next_send = std::chrono::steady_clock::now();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!stop_publishing_ && now >= next_send && publisher.in_flight.size() < static_cast<size_t>(options_.window)) {
      mqtt::PublishPacket publish;
      const int64_t sequence = (publisher.index + 1) * kSequenceSpan + publisher.next;
      const int session = static_cast<int>(publisher.next % options_.sessions);
      ++publisher.next;
      publish.topic = sessions_[session]->topic;
      publish.payload = "s" + std::to_string(sequence);
      publish.qos = options_.qos;
      do {
        publisher.packet_id = publisher.packet_id == 65535 ? 1 : publisher.packet_id + 1;
      } while (publisher.in_flight.count(publisher.packet_id) != 0);
      publish.packet_id = publisher.packet_id;
      publisher.client->Send(publish);
      publisher.in_flight[publish.packet_id] = {sequence, session};
      {
        std::lock_guard lock(mutex_);
        ++publisher.figures.sent;
        publisher.figures.outstanding = static_cast<int64_t>(publisher.in_flight.size());
      }
      next_send += interval;
      if (next_send < now - std::chrono::milliseconds(100)) next_send = now;  // no burst after a stall
    }
    const auto wait = std::clamp(std::chrono::duration_cast<milliseconds>(next_send - std::chrono::steady_clock::now()),
                                 milliseconds(1), milliseconds(20));
    auto packet = publisher.client->Receive(wait);
    if (!packet) {
      if (publisher.client->closed()) publisher.client.reset();
      continue;
    }
    auto* ack = std::get_if<mqtt::AckPacket>(&*packet);
    if (ack == nullptr) continue;
    if (ack->type == mqtt::PacketType::kPubcomp) continue;
    auto it = publisher.in_flight.find(ack->packet_id);
    if (it == publisher.in_flight.end()) continue;
    const Publisher::InFlight done = it->second;
    publisher.in_flight.erase(it);
    if (ack->type == mqtt::PacketType::kPubrec && static_cast<int>(ack->reason) < 0x80) {
      mqtt::AckPacket release;
      release.type = mqtt::PacketType::kPubrel;
      release.packet_id = ack->packet_id;
      publisher.client->Send(release);
    }
    std::lock_guard lock(mutex_);
    publisher.figures.outstanding = static_cast<int64_t>(publisher.in_flight.size());
    if (ledger_closed_) {
      ++publisher.figures.late;
      continue;
    }
    if (static_cast<int>(ack->reason) >= 0x80) {
      ++publisher.figures.refused;
      continue;
    }
    ++publisher.figures.acknowledged;
    publisher.figures.ack_times_ms.push_back(NowMs());
    sessions_[done.session]->acknowledged.insert(done.sequence);
  }
}

bool PartitionWorkload::Start(std::string* error) {
  for (int index = 0; index < options_.sessions; ++index) {
    auto session = std::make_unique<Session>();
    session->index = index;
    session->client_id = "part-s" + std::to_string(index);
    session->topic = "part/s" + std::to_string(index);
    if (!Resume(*session, true, error)) return false;
    sessions_.push_back(std::move(session));
  }
  for (size_t index = 0; index < options_.publisher_nodes.size(); ++index) {
    auto publisher = std::make_unique<Publisher>();
    publisher->index = static_cast<int>(index);
    publisher->figures.node = options_.publisher_nodes[index];
    publishers_.push_back(std::move(publisher));
  }
  for (auto& session : sessions_) threads_.emplace_back([this, raw = session.get()] { RunSubscriber(*raw); });
  for (auto& publisher : publishers_) threads_.emplace_back([this, raw = publisher.get()] { RunPublisher(*raw); });
  return true;
}

void PartitionWorkload::StopPublishing() { stop_publishing_ = true; }

bool PartitionWorkload::WaitDelivered(std::chrono::milliseconds timeout) {
  // An acknowledgement that came after the last check of the ledger would
  // count a message the subscribers were no longer read for as lost: the
  // publishers' last acknowledgements come first, then the ledger closes.
  auto none_outstanding = [&] {
    std::lock_guard lock(mutex_);
    for (const auto& publisher : publishers_) {
      if (publisher->figures.outstanding != 0) return false;
    }
    return true;
  };
  (void)estuary::testing::WaitFor(none_outstanding, timeout, milliseconds(100));
  {
    std::lock_guard lock(mutex_);
    ledger_closed_ = true;
  }
  auto all_came = [&] {
    std::lock_guard lock(mutex_);
    for (const auto& session : sessions_) {
      for (int64_t sequence : session->acknowledged) {
        if (session->seen.count(sequence) == 0) return false;
      }
    }
    return true;
  };
  return estuary::testing::WaitFor(all_came, timeout, milliseconds(100));
}

WorkloadResult PartitionWorkload::Finish() {
  stop_all_ = true;
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
  WorkloadResult result;
  std::lock_guard lock(mutex_);
  for (const auto& session : sessions_) {
    for (int64_t sequence : session->acknowledged) {
      ++result.acknowledged;
      if (session->seen.count(sequence) != 0) {
        ++result.delivered;
      } else {
        ++result.lost;
        if (result.losses.size() < 5) {
          result.losses.push_back("s" + std::to_string(sequence) + " for " + session->client_id);
        }
      }
    }
    for (const auto& [sequence, times] : session->seen) {
      result.duplicated += times - 1;
      if (times > 1 && result.duplicates.size() < 5) {
        result.duplicates.push_back("s" + std::to_string(sequence) + " for " + session->client_id + " x" +
                                    std::to_string(times) + ":" + session->seen_where[sequence]);
      }
    }
  }
  for (const auto& publisher : publishers_) result.publishers.push_back(publisher->figures);
  result.ends = ends_;
  result.sessions_not_present = sessions_not_present_;
  return result;
}

}  // namespace estuary::server::testing
