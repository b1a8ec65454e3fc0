#include "server/tests/fault_stream_workload.h"

#include <algorithm>
#include <cstdio>

#include "server/tests/process_support.h"

namespace estuary::server::testing {
namespace {

constexpr auto kConnectWait = std::chrono::milliseconds(30'000);

}  // namespace

StreamWorkload::StreamWorkload(std::vector<std::string> keys, uint8_t qos, std::string publisher_prefix)
    : all_keys_(std::move(keys)), keys_(all_keys_), qos_(qos), publisher_prefix_(std::move(publisher_prefix)) {}

void StreamWorkload::UseKeys(const std::vector<std::string>& keys) {
  keys_ = keys;
  next_key_ = 0;
}

bool StreamWorkload::Connect(FaultCluster& cluster, int node, std::string* error) {
  if (!set_up_ && !Setup(cluster, node, error)) return false;
  set_up_ = true;
  publisher_.reset();
  outstanding_.reset();
  const bool connected = WaitUntil(
      [&] {
        publisher_ = ConnectTo(cluster.node(node), publisher_prefix_ + std::to_string(NextConnection()));
        return publisher_ != nullptr;
      },
      kConnectWait);
  if (!connected && error) *error = "the publisher could not connect to node " + std::to_string(node);
  return connected;
}

void StreamWorkload::Send(const std::string& key) {
  mqtt::PublishPacket publish = MessageFor(key);
  publish.payload = "s" + std::to_string(++sequence_);
  publish.qos = qos_;
  publish.packet_id = NextPacketId();
  publisher_->Send(publish);
  outstanding_ = Outstanding{key, sequence_, publish.packet_id};
  OnSent(key, sequence_);
}

bool StreamWorkload::WarmUp(std::chrono::milliseconds timeout, std::string* error) {
  for (const auto& key : all_keys_) {
    Send(key);
    const auto deadline = SteadyClock::now() + timeout;
    Step step = Step::kPending;
    while (step == Step::kPending && SteadyClock::now() < deadline) step = Publish(std::chrono::milliseconds(500));
    if (step != Step::kAcknowledged) {
      if (error) *error = "warm-up: the message for " + key + " was not acknowledged";
      return false;
    }
  }
  return true;
}

Workload::Step StreamWorkload::Publish(std::chrono::milliseconds wait) {
  if (!outstanding_) {
    Send(keys_[next_key_]);
    next_key_ = (next_key_ + 1) % keys_.size();
  }
  const auto expected = qos_ == 2 ? mqtt::PacketType::kPubrec : mqtt::PacketType::kPuback;
  const auto deadline = SteadyClock::now() + wait;
  Step step = Step::kPending;
  while (step == Step::kPending && SteadyClock::now() < deadline) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    auto ack = publisher_->ReceiveAs<mqtt::AckPacket>(std::max(remaining, std::chrono::milliseconds(1)));
    if (ack && ack->type == expected && ack->packet_id == outstanding_->packet_id) {
      if (ack->reason != mqtt::ReasonCode::kSuccess) ++reasons_[static_cast<uint8_t>(ack->reason)];
      if (static_cast<uint8_t>(ack->reason) >= 0x80) {  // refused: not an acknowledgement
        outstanding_.reset();
        return Step::kBroken;
      }
      if (qos_ == 2) {
        mqtt::AckPacket release;
        release.type = mqtt::PacketType::kPubrel;
        release.packet_id = ack->packet_id;
        publisher_->Send(release);
      }
      if (fault_at_) {
        acked_after_fault_ms_[outstanding_->sequence] =
            std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - *fault_at_).count();
      }
      OnAcknowledged(outstanding_->key, outstanding_->sequence);
      outstanding_.reset();
      step = Step::kAcknowledged;
    } else if (publisher_->closed()) {
      outstanding_.reset();
      step = Step::kBroken;
    }
  }
  BetweenSteps();
  return step;
}

std::string StreamWorkload::Notes() const {
  std::string notes;
  for (const auto& [reason, count] : reasons_) {
    char code[8];
    std::snprintf(code, sizeof(code), "0x%02x", reason);
    notes += (notes.empty() ? "" : ", ") + std::to_string(count) + " with reason " + code;
  }
  notes = notes.empty() ? "" : "acknowledgements not plain success: " + notes;
  if (lost_before_ + lost_early_ + lost_later_ > 0) {
    notes += (notes.empty() ? "" : "; ") + std::string("lost by when acknowledged: ") + std::to_string(lost_before_) +
             " before the fault, " + std::to_string(lost_early_) + " in its first 5 s, " + std::to_string(lost_later_) +
             " later" + (first_later_.empty() ? "" : " (the first: " + first_later_ + ")");
  }
  return notes;
}

void StreamWorkload::CountLost(const std::vector<int64_t>& sequences) {
  for (int64_t sequence : sequences) {
    auto it = acked_after_fault_ms_.find(sequence);
    if (it == acked_after_fault_ms_.end()) {
      ++lost_before_;
    } else if (it->second < 5'000) {
      ++lost_early_;
    } else {
      ++lost_later_;
      if (first_later_.empty()) first_later_ = "s" + std::to_string(sequence) + WhenAcknowledged(sequence);
    }
  }
}

std::string StreamWorkload::WhenAcknowledged(int64_t sequence) const {
  auto it = acked_after_fault_ms_.find(sequence);
  if (it == acked_after_fault_ms_.end()) return " (acknowledged before the fault)";
  return " (acknowledged " + std::to_string(it->second) + " ms after the fault)";
}

bool StreamWorkload::PublishAcknowledged(mqtt::PublishPacket publish, std::chrono::milliseconds wait) {
  outstanding_.reset();
  publish.qos = 1;
  publish.packet_id = NextPacketId();
  publisher_->Send(publish);
  const auto deadline = SteadyClock::now() + wait;
  while (SteadyClock::now() < deadline && !publisher_->closed()) {
    auto ack = publisher_->ReceiveAs<mqtt::AckPacket>(std::chrono::milliseconds(200));
    if (ack && ack->type == mqtt::PacketType::kPuback && ack->packet_id == publish.packet_id) return true;
  }
  return false;
}

int64_t SequenceOf(const std::string& payload) {
  if (payload.size() < 2 || payload[0] != 's') return -1;
  return std::stoll(payload.substr(1));
}

std::optional<int64_t> TakeDelivery(estuary::testing::RawClient& client, const mqtt::Packet& packet,
                                    ReceiverState& state) {
  if (const auto* release = std::get_if<mqtt::AckPacket>(&packet)) {
    if (release->type == mqtt::PacketType::kPubrel) {
      state.awaiting_release.erase(release->packet_id);
      mqtt::AckPacket complete;
      complete.type = mqtt::PacketType::kPubcomp;
      complete.packet_id = release->packet_id;
      client.Send(complete);
    }
    return std::nullopt;
  }
  const auto* publish = std::get_if<mqtt::PublishPacket>(&packet);
  if (publish == nullptr) return std::nullopt;
  bool fresh = true;
  if (publish->qos > 0) {
    mqtt::AckPacket ack;
    ack.type = publish->qos == 2 ? mqtt::PacketType::kPubrec : mqtt::PacketType::kPuback;
    ack.packet_id = publish->packet_id;
    if (publish->qos == 2) fresh = state.awaiting_release.insert(publish->packet_id).second;
    client.Send(ack);
  }
  const int64_t sequence = SequenceOf(publish->payload);
  if (!fresh || sequence < 0) return std::nullopt;
  return sequence;
}

bool DeliveryLedger::AllCame() const {
  return std::all_of(acknowledged_.begin(), acknowledged_.end(), [&](int64_t s) { return seen_.count(s) != 0; });
}

std::vector<int64_t> DeliveryLedger::Tally(StreamCounters& counters,
                                           const std::function<std::string(int64_t)>& describe) {
  std::vector<int64_t> lost;
  if (counters.duplicated < 0) counters.duplicated = 0;
  // A message that came before its acknowledgement (the period ended with
  // its publish outstanding) is carried into the next period.
  std::map<int64_t, int> carried;
  for (const auto& [sequence, times] : seen_) {
    if (acknowledged_.count(sequence) == 0 && verified_.count(sequence) == 0) {
      carried[sequence] = times;
      continue;
    }
    counters.duplicated += times - 1 + (verified_.count(sequence) != 0 ? 1 : 0);
  }
  for (int64_t sequence : acknowledged_) {
    ++counters.checked;
    if (seen_.count(sequence) != 0) {
      ++counters.delivered;
      verified_.insert(sequence);
    } else {
      ++counters.lost;
      lost.push_back(sequence);
      if (counters.losses.size() < 5) counters.losses.push_back(describe(sequence));
    }
  }
  acknowledged_.clear();
  seen_ = std::move(carried);
  return lost;
}

}  // namespace estuary::server::testing
