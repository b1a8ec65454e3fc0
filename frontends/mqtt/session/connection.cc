#include "frontends/mqtt/session/connection.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <type_traits>

#include "frontends/mqtt/codec/encoder.h"
#include "io/log_budget.h"

namespace estuary::mqtt {
namespace {
// The connect-timeout log line: at most this many at once per shard thread,
// then this many a second (io::LogBudget).
constexpr double kTimeoutLinesBurst = 10;
constexpr double kTimeoutLinesPerSecond = 1;

using core::ShardMetrics;

}  // namespace

MqttConnection::MqttConnection(core::ShardBroker& broker, io::Stream& stream,
                               ConnectionSettings settings)
    : broker_(broker), stream_(stream), settings_(std::move(settings)) {
  const core::BrokerLimits& limits = broker_.config().limits;
  const int64_t now = broker_.loop().NowMs();
  // One second's worth of burst each.
  if (limits.max_publish_rate != 0) {
    publish_messages_ = base::TokenBucket(limits.max_publish_rate, limits.max_publish_rate, now);
  }
  if (limits.max_publish_bytes_rate != 0) {
    publish_bytes_ = base::TokenBucket(double(limits.max_publish_bytes_rate), double(limits.max_publish_bytes_rate), now);
  }
  publish_limited_ = limits.max_publish_rate != 0 || limits.max_publish_bytes_rate != 0;
}

MqttConnection::~MqttConnection() {
  if (keep_alive_timer_ != 0) broker_.loop().CancelTimer(keep_alive_timer_);
  if (throttle_timer_ != 0) broker_.loop().CancelTimer(throttle_timer_);
  if (flow_id_ != 0) broker_.UnregisterFlow(flow_id_);
}

void MqttConnection::Start() {
  flow_id_ = broker_.RegisterFlow(weak_from_this());
  last_packet_ms_ = broker_.loop().NowMs();
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  keep_alive_timer_ = broker_.loop().AddTimer(settings_.connect_timeout_ms, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->keep_alive_timer_ = 0;
    if (self->state_ == State::kAwaitingConnect || self->state_ == State::kAuthenticating) {
      // Any peer can cause this line: bounded (the metric counts each).
      thread_local io::LogBudget budget(kTimeoutLinesPerSecond, kTimeoutLinesBurst);
      uint64_t skipped = 0;
      if (budget.Take(self->broker_.loop().NowMs(), skipped)) {
        spdlog::info("mqtt: address={} closed: {} within the connect timeout ({} ms){}", self->stream_.peer_address(),
                     self->state_ == State::kAwaitingConnect ? "no CONNECT" : "AUTH exchange not finished",
                     self->settings_.connect_timeout_ms,
                     skipped == 0 ? std::string() : fmt::format("; {} more not logged since", skipped));
      }
      if (self->settings_.connect_timed_out) self->settings_.connect_timed_out();
    }
    if (self->state_ == State::kAwaitingConnect) {
      self->Fail(ReasonCode::kMaximumConnectTime, "no CONNECT within the connect timeout");
    } else if (self->state_ == State::kAuthenticating) {
      self->RefuseConnect(ReasonCode::kNotAuthorized, "authentication not finished within the connect timeout");
    } else if (self->state_ == State::kClaiming) {
      self->RefuseUnclaimed("client id claim not answered within the connect timeout");
    }
  });
}

void MqttConnection::OnBytes(std::string_view bytes) {
  if (state_ == State::kClosed) return;
  ShardMetrics::Add(broker_.metrics().bytes_in, bytes.size());
  if (input_.empty() && ingress_pauses_ == 0) {
    const size_t consumed = ProcessFrames(bytes);  // the common case: no copy
    if (state_ == State::kClosed) return;
    input_.assign(bytes.substr(consumed));
  } else {
    input_.append(bytes);
    ProcessBufferedInput();
    if (state_ == State::kClosed) return;
  }
  UpdateReading();
}

void MqttConnection::ProcessBufferedInput() {
  const size_t consumed = ProcessFrames(input_);
  if (state_ != State::kClosed) input_.erase(0, consumed);
}

// Decodes and handles whole packets from `view` until it runs out, the
// connection closes, a client id claim holds the packets after CONNECT, or a
// congested subscriber pauses us; returns the bytes consumed.
size_t MqttConnection::ProcessFrames(std::string_view view) {
  const uint32_t max_size = broker_.config().limits.max_packet_size;
  size_t consumed = 0;
  while (state_ != State::kClosed && state_ != State::kClaiming && ingress_pauses_ == 0 && throttle_timer_ == 0 &&
         consumed < view.size()) {
    if (state_ == State::kAwaitingConnect &&
        (static_cast<uint8_t>(view[consumed]) >> 4) != static_cast<uint8_t>(PacketType::kConnect)) {
      // Not waiting for the rest of something that is not CONNECT [MQTT-3.1.0-1].
      Fail(ReasonCode::kProtocolError, "first packet is not CONNECT [MQTT-3.1.0-1]");
      break;
    }
    auto header = PeekFrame(view.substr(consumed), max_size);
    if (!header) {
      Fail(header.error().reason, header.error().message);
      break;
    }
    if (header->header_size == 0 || view.size() - consumed < header->total_size()) break;
    std::string_view frame = view.substr(consumed, header->total_size());
    if (state_ == State::kAwaitingConnect && RoutedElsewhere(frame)) {
      input_ = std::string(view.substr(consumed));
      handed_off_ = true;
      state_ = State::kClosed;
      break;
    }
    if (publish_limited_ && state_ == State::kConnected &&
        (static_cast<uint8_t>(frame[0]) >> 4) == static_cast<uint8_t>(PacketType::kPublish) &&
        !TakePublishBudget(frame.size())) {
      break;  // the PUBLISH waits, unread bytes behind it stay in the socket
    }
    consumed += header->total_size();
    ProcessFrame(frame);
  }
  return consumed;
}

bool MqttConnection::TakePublishBudget(size_t bytes) {
  const int64_t now = broker_.loop().NowMs();
  // Spent as a debt (base/token_bucket.h): a PUBLISH larger than a second's
  // bytes still goes through, and the client waits for it afterwards.
  if (publish_messages_.Available(now) && publish_bytes_.Available(now)) {
    publish_messages_.Spend(1);
    publish_bytes_.Spend(double(bytes));
    return true;
  }
  constexpr double kAnyBudget = 1e-6;
  const int64_t wait_ms =
      std::max(publish_messages_.MsUntil(now, kAnyBudget), publish_bytes_.MsUntil(now, kAnyBudget));
  ShardMetrics::Add(broker_.metrics().publish_throttled);
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  throttle_timer_ = broker_.loop().AddTimer(std::max<int64_t>(wait_ms, 1), [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->throttle_timer_ = 0;
    if (self->state_ == State::kClosed) return;
    self->ProcessBufferedInput();
    self->UpdateReading();
  });
  UpdateReading();
  return false;
}

// Peeks a CONNECT's client id: the socket may belong on another shard.
bool MqttConnection::RoutedElsewhere(std::string_view frame) {
  if (!settings_.route_connect) return false;
  auto packet = DecodePacket(frame, version_);
  if (!packet || !std::holds_alternative<ConnectPacket>(*packet)) return false;
  const std::string& client_id = std::get<ConnectPacket>(*packet).client_id;
  return !client_id.empty() && settings_.route_connect(client_id);
}

void MqttConnection::PauseIngress() {
  ++ingress_pauses_;
  UpdateReading();
}

void MqttConnection::ResumeIngress() {
  if (ingress_pauses_ == 0 || --ingress_pauses_ > 0) return;
  // Not from inside the caller (a subscriber's delivery loop): next turn.
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  broker_.loop().Post([weak] {
    auto self = weak.lock();
    if (!self || self->state_ == State::kClosed || self->ingress_pauses_ > 0) return;
    self->ProcessBufferedInput();
    self->UpdateReading();
  });
}

void MqttConnection::UpdateReading() {
  if (state_ == State::kClosed) return;
  const bool want = state_ != State::kClaiming && ingress_pauses_ == 0 && throttle_timer_ == 0 &&
                    stream_.queued_bytes() <= kOutputHighWatermark;
  if (want == reading_) return;
  reading_ = want;
  if (want) {
    stream_.ResumeReading();
  } else {
    stream_.PauseReading();
  }
}

bool MqttConnection::ProcessFrame(std::string_view frame) {
  last_packet_ms_ = broker_.loop().NowMs();
  auto packet = DecodePacket(frame, version_);
  if (!packet) {
    const DecodeError& error = packet.error();
    if (state_ == State::kAwaitingConnect) {
      if (!error.version_hint) {  // not MQTT at all: close without CONNACK
        Fail(error.reason, error.message);
        return false;
      }
      version_ = *error.version_hint;
      RefuseConnect(error.reason, error.message);
    } else {
      Fail(error.reason, error.message);
    }
    return false;
  }
  Dispatch(*packet);
  return state_ != State::kClosed;
}

void MqttConnection::Dispatch(Packet& packet) {
  if (state_ == State::kAwaitingConnect) {
    if (auto* connect = std::get_if<ConnectPacket>(&packet)) {
      HandleConnect(*connect);
    } else {
      Fail(ReasonCode::kProtocolError, "first packet is not CONNECT [MQTT-3.1.0-1]");
    }
    return;
  }
  if (state_ == State::kAuthenticating) {
    if (auto* auth = std::get_if<AuthPacket>(&packet)) {
      HandleAuth(*auth);
    } else if (std::holds_alternative<DisconnectPacket>(packet)) {
      CloseStream();
    } else {
      RefuseConnect(ReasonCode::kProtocolError, "only AUTH or DISCONNECT before CONNACK [MQTT-3.1.2-30]");
    }
    return;
  }
  std::visit(
      [this](auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, PublishPacket>) {
          HandlePublish(p);
        } else if constexpr (std::is_same_v<T, AckPacket>) {
          switch (p.type) {
            case PacketType::kPuback: HandlePuback(p); break;
            case PacketType::kPubrec: HandlePubrec(p); break;
            case PacketType::kPubrel: HandlePubrel(p); break;
            default: HandlePubcomp(p); break;
          }
        } else if constexpr (std::is_same_v<T, SubscribePacket>) {
          HandleSubscribe(p);
        } else if constexpr (std::is_same_v<T, UnsubscribePacket>) {
          HandleUnsubscribe(p);
        } else if constexpr (std::is_same_v<T, PingreqPacket>) {
          Send(PingrespPacket{});
        } else if constexpr (std::is_same_v<T, DisconnectPacket>) {
          HandleDisconnect(p);
        } else if constexpr (std::is_same_v<T, ConnectPacket>) {
          Fail(ReasonCode::kProtocolError, "second CONNECT [MQTT-3.1.0-2]");
        } else if constexpr (std::is_same_v<T, AuthPacket>) {
          HandleAuth(p);
        } else {
          Fail(ReasonCode::kProtocolError, "packet a client must not send");
        }
      },
      packet);
}

void MqttConnection::Send(const Packet& packet) {
  if (v5() && client_max_packet_size_ != UINT32_MAX &&
      EncodedSize(packet, version_) > client_max_packet_size_) {
    // [MQTT-3.1.2-24, 3.1.2-25] never exceed the client's maximum: drop
    // what may be dropped (reason string, user properties, then optional
    // CONNACK properties) until it fits.
    Packet trimmed = packet;
    if (!TrimToFit(trimmed)) {
      spdlog::debug("mqtt: client={} address={} {} too large for the client, not sent", client_id_, stream_.peer_address(),
                    ToString(TypeOf(packet)));
      return;
    }
    EncodePacket(trimmed, version_, stream_.output());
  } else {
    EncodePacket(packet, version_, stream_.output());
  }
  stream_.Flush();
}

bool MqttConnection::TrimToFit(Packet& packet) const {
  auto fits = [&] { return EncodedSize(packet, version_) <= client_max_packet_size_; };
  std::visit(
      [](auto& p) {
        if constexpr (requires { p.properties; }) {
          p.properties.reason_string.reset();
          p.properties.user_properties.clear();
        }
      },
      packet);
  if (fits()) return true;
  if (auto* connack = std::get_if<ConnackPacket>(&packet)) {
    Properties& p = connack->properties;
    p.response_information.reset();
    p.server_reference.reset();
    if (fits()) return true;
    p.topic_alias_maximum.reset();  // absent: the client sends no aliases
    if (fits()) return true;
    p.maximum_packet_size.reset();
    p.receive_maximum.reset();
  }
  return fits();
}

void MqttConnection::Fail(ReasonCode reason, std::string_view why) {
  if (state_ == State::kClosed) return;
  spdlog::debug("mqtt: client={} address={} closing: {} ({})", client_id_.empty() ? "-" : client_id_, stream_.peer_address(),
                ToString(reason), why);
  ShardMetrics::Add(broker_.metrics().protocol_errors);
  if (state_ == State::kConnected && v5()) {
    DisconnectPacket disconnect;
    disconnect.reason = reason;
    if (request_problem_information_) disconnect.properties.reason_string = std::string(why);
    Send(disconnect);
  }
  CloseStream();
}

void MqttConnection::Disconnect(ReasonCode reason, std::optional<std::string> server_reference) {
  if (state_ != State::kConnected) {
    CloseStream();
    return;
  }
  if (v5()) {
    DisconnectPacket disconnect;
    disconnect.reason = reason;
    disconnect.properties.server_reference = std::move(server_reference);
    Send(disconnect);
  }
  CloseStream();
}

void MqttConnection::CloseStream() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  if (keep_alive_timer_ != 0) {
    broker_.loop().CancelTimer(keep_alive_timer_);
    keep_alive_timer_ = 0;
  }
  if (throttle_timer_ != 0) {
    broker_.loop().CancelTimer(throttle_timer_);
    throttle_timer_ = 0;
  }
  pending_connect_.reset();
  if (session_ != nullptr) {
    NoteSessionEnd(session_->expiry_interval() == 0);
    broker_.Disconnect(session_, this, !clean_disconnect_);
    session_ = nullptr;
  }
  stream_.Close();
  if (release_on_close_) {
    release_on_close_ = false;
    if (settings_.release_client_id) settings_.release_client_id(client_id_);
  }
}

void MqttConnection::NoteSessionEnd(bool session_ends) {
  release_on_close_ = claim_granted_ && session_ends;
  claim_granted_ = false;
}

void MqttConnection::OnStreamClosed() {
  if (state_ == State::kClosed) return;
  spdlog::debug("mqtt: client={} address={} network connection lost", client_id_.empty() ? "-" : client_id_,
                stream_.peer_address());
  CloseStream();
}

void MqttConnection::OnDetached(core::DetachReason reason) {
  // Taken over (here or from another node): the new owner holds the id.
  // Removed: the session ended. Shutdown: it lives on if it has an expiry.
  NoteSessionEnd(reason == core::DetachReason::kSessionRemoved ||
                 (reason == core::DetachReason::kShutdown && session_ != nullptr &&
                  session_->expiry_interval() == 0));
  session_ = nullptr;  // the session is no longer ours: do not touch it
  const ReasonCode code = reason == core::DetachReason::kTakenOver ? ReasonCode::kSessionTakenOver
                                                                   : ReasonCode::kServerShuttingDown;
  spdlog::debug("mqtt: client={} address={} {}", client_id_, stream_.peer_address(), ToString(code));
  Disconnect(code);
}

void MqttConnection::ArmKeepAlive(int64_t delay_ms) {
  if (keep_alive_timer_ != 0) broker_.loop().CancelTimer(keep_alive_timer_);
  std::weak_ptr<MqttConnection> weak = weak_from_this();
  keep_alive_timer_ = broker_.loop().AddTimer(delay_ms, [weak] {
    if (auto self = weak.lock()) {
      self->keep_alive_timer_ = 0;
      self->OnKeepAliveTimer();
    }
  });
}

void MqttConnection::OnKeepAliveTimer() {
  if (state_ != State::kConnected || keep_alive_s_ == 0) return;
  // [MQTT-3.1.2-24] disconnect after one and a half keep alive periods.
  const int64_t limit_ms = int64_t{keep_alive_s_} * 1500;
  // A client held back by its own publish budget has sent a packet we did
  // not read yet: it is not idle.
  if (throttle_timer_ != 0) last_packet_ms_ = broker_.loop().NowMs();
  const int64_t idle_ms = broker_.loop().NowMs() - last_packet_ms_;
  if (idle_ms >= limit_ms) {
    Fail(ReasonCode::kKeepAliveTimeout, "keep alive timeout");
    return;
  }
  ArmKeepAlive(limit_ms - idle_ms);
}

}  // namespace estuary::mqtt
