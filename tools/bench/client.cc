#include "tools/bench/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <variant>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"
#include "tools/bench/payload.h"

namespace estuary::bench {
namespace {

constexpr uint32_t kMaxPacketSize = 268'435'455 + 5;

template <typename... Fns>
struct Overloaded : Fns... {
  using Fns::operator()...;
};

std::string UvError(int status) { return std::string(uv_strerror(status)) + " (" + uv_err_name(status) + ")"; }

}  // namespace

std::shared_ptr<MqttClient> MqttClient::Create(io::UvLoop& loop, Config config, Handlers handlers) {
  return std::shared_ptr<MqttClient>(new MqttClient(loop, std::move(config), std::move(handlers)));
}

MqttClient::MqttClient(io::UvLoop& loop, Config config, Handlers handlers)
    : loop_(loop), config_(std::move(config)), handlers_(std::move(handlers)) {}

MqttClient::~MqttClient() {
  if (connection_ && state_ != State::kClosed) connection_->Close();
}

void MqttClient::Start() {
  state_ = State::kConnecting;
  if (!config_.tls_error.empty()) {
    Fail(config_.tls_error);
    return;
  }
  if (!config_.local_address.empty()) {
    auto connection = ConnectFromLocalAddress();
    if (!connection) return;  // Fail() was called
    StartConnection(std::move(connection));
    OnConnected(0);  // the connect completes (or fails) under the adopted socket
    return;
  }
  std::weak_ptr<MqttClient> weak = weak_from_this();
  StartConnection(io::TcpConnection::Connect(loop_, config_.broker, [weak](int status) {
    if (auto self = weak.lock()) self->OnConnected(status);
  }));
}

void MqttClient::StartConnection(std::shared_ptr<io::TcpConnection> connection) {
  connection_ = std::move(connection);
  std::weak_ptr<MqttClient> weak = weak_from_this();
  io::TcpConnection::Handlers handlers;
  handlers.on_data = [weak](std::string_view bytes) {
    auto self = weak.lock();
    if (!self) return;
    if (self->tls_) {
      self->OnCiphertext(bytes);
    } else {
      self->OnData(bytes);
    }
  };
  handlers.on_close = [weak](int status) {
    if (auto self = weak.lock()) self->OnClose(status);
  };
  handlers.on_drain = [weak] {
    auto self = weak.lock();
    if (self && self->handlers_.on_drain) self->handlers_.on_drain();
  };
  connection_->set_watermarks(config_.max_queued_bytes / 2, config_.max_queued_bytes);
  connection_->SetHandlers(std::move(handlers));
}

// TcpConnection::Connect cannot choose the source address, which is what
// lets one machine open more than ~28k connections to one broker port. So
// bind and start a non-blocking connect here and hand the socket to
// TcpConnection::Adopt; a failed connect then shows up as a closed
// connection.
std::shared_ptr<io::TcpConnection> MqttClient::ConnectFromLocalAddress() {
  sockaddr_in local{};
  sockaddr_in remote{};
  local.sin_family = AF_INET;
  remote.sin_family = AF_INET;
  remote.sin_port = htons(config_.broker.port);
  if (inet_pton(AF_INET, config_.local_address.c_str(), &local.sin_addr) != 1 ||
      inet_pton(AF_INET, config_.broker.host.c_str(), &remote.sin_addr) != 1) {
    Fail("--local-addresses needs IPv4 addresses for both ends, got " + config_.local_address + " -> " +
         config_.broker.host);
    return nullptr;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    Fail(std::string("socket: ") + std::strerror(errno));
    return nullptr;
  }
  const int one = 1;
  // Let connect() pick the port, so ports are shared across destinations.
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
      (connect(fd, reinterpret_cast<const sockaddr*>(&remote), sizeof remote) != 0 && errno != EINPROGRESS)) {
    const std::string error = std::strerror(errno);
    close(fd);
    Fail("cannot connect to " + config_.broker.ToString() + " from " + config_.local_address + ": " + error);
    return nullptr;
  }
  return io::TcpConnection::Adopt(loop_, fd);
}

void MqttClient::OnConnected(int status) {
  if (state_ != State::kConnecting) return;
  if (status < 0) {
    Fail("cannot connect to " + config_.broker.ToString() + ": " + UvError(status));
    return;
  }
  connection_->StartReading();
  if (config_.tls) {
    tls_ = std::make_unique<io::TlsSession>(config_.tls, /*server=*/false);
    tls_->Connect(config_.tls_server_name, config_.tls_ticket != nullptr ? *config_.tls_ticket : nullptr);
    tls_->TakeOutput(connection_->output_buffer());
    connection_->MarkDirty();
    return;  // CONNECT once the handshake is done
  }
  SendConnect();
}

void MqttClient::OnCiphertext(std::string_view bytes) {
  thread_local std::string plaintext;
  plaintext.clear();
  const bool was_open = tls_->open();
  const bool ok = tls_->Receive(bytes, plaintext);
  if (tls_->has_output()) {
    tls_->TakeOutput(connection_->output_buffer());
    connection_->MarkDirty();
  }
  if (!ok) {
    Fail("TLS: " + (tls_->error().empty() ? std::string("the broker closed the session") : tls_->error()));
    return;
  }
  if (!was_open && tls_->open()) {
    if (config_.tls_resumed != nullptr && tls_->resumed()) config_.tls_resumed->fetch_add(1);
    SendConnect();
  }
  if (config_.tls_ticket != nullptr && !ticket_taken_ && tls_->open()) {
    // TLS 1.3: the ticket comes after the handshake, with the broker's
    // first records.
    if (auto ticket = tls_->TakeTicket()) {
      *config_.tls_ticket = std::move(ticket);
      ticket_taken_ = true;
    }
  }
  if (!plaintext.empty()) OnData(plaintext);
}

std::string& MqttClient::Output() { return tls_ ? plaintext_out_ : connection_->output_buffer(); }

void MqttClient::MarkDirty() {
  if (!tls_) {
    connection_->MarkDirty();
    return;
  }
  if (encrypt_posted_) return;
  encrypt_posted_ = true;
  std::weak_ptr<MqttClient> weak = weak_from_this();
  loop_.Post([weak] {
    if (auto self = weak.lock()) self->Encrypt();
  });
}

void MqttClient::Encrypt() {
  encrypt_posted_ = false;
  if (plaintext_out_.empty() || !tls_->Send(plaintext_out_)) return;
  plaintext_out_.clear();
  tls_->TakeOutput(connection_->output_buffer());
  connection_->MarkDirty();
}

void MqttClient::SendConnect() {
  mqtt::ConnectPacket connect;
  connect.protocol_name = "MQTT";
  connect.version = config_.version;
  connect.clean_start = true;
  if (config_.session_expiry_s > 0) {
    if (config_.version == mqtt::ProtocolVersion::kV5) {
      connect.properties.session_expiry_interval = config_.session_expiry_s;
    } else {
      connect.clean_start = false;  // a fresh client id each run: nothing to resume
    }
  }
  connect.keep_alive = config_.keepalive_s;
  connect.client_id = config_.client_id;
  state_ = State::kAwaitingConnack;
  Send(connect);
}

void MqttClient::OnData(std::string_view bytes) {
  const int64_t arrival_ns = MonotonicNowNs();
  if (input_.empty()) {
    const size_t used = ParseFrames(bytes, arrival_ns);
    if (state_ != State::kClosed) input_.assign(bytes.substr(used));
    return;
  }
  input_.append(bytes);
  const size_t used = ParseFrames(input_, arrival_ns);
  input_.erase(0, used);
}

// Decodes every complete packet at the start of `bytes`; returns how many
// bytes they took.
size_t MqttClient::ParseFrames(std::string_view bytes, int64_t arrival_ns) {
  size_t used = 0;
  while (state_ != State::kClosed && used < bytes.size()) {
    const std::string_view rest = bytes.substr(used);
    auto frame = mqtt::PeekFrame(rest, kMaxPacketSize);
    if (!frame) {
      Fail("bad packet from broker: " + frame.error().message);
      break;
    }
    if (frame->header_size == 0 || frame->total_size() > rest.size()) break;
    auto packet = mqtt::DecodePacket(rest.substr(0, frame->total_size()), config_.version);
    if (!packet) {
      Fail("bad packet from broker: " + packet.error().message);
      break;
    }
    used += frame->total_size();
    Dispatch(*packet, arrival_ns);
  }
  return used;
}

void MqttClient::Dispatch(mqtt::Packet& packet, int64_t arrival_ns) {
  std::visit(Overloaded{
                 [&](const mqtt::ConnackPacket& p) { OnConnack(p); },
                 [&](const mqtt::SubackPacket& p) { OnSuback(p); },
                 [&](const mqtt::PublishPacket& p) { OnPublish(p, arrival_ns); },
                 [&](const mqtt::AckPacket& p) { OnAck(p); },
                 [&](const mqtt::PingrespPacket&) {},
                 [&](const mqtt::DisconnectPacket& p) {
                   Fail(std::string("broker sent DISCONNECT: ") + mqtt::ToString(p.reason));
                 },
                 [&](const auto&) {
                   Fail(std::string("unexpected ") + mqtt::ToString(mqtt::TypeOf(packet)) + " from broker");
                 },
             },
             packet);
}

void MqttClient::OnConnack(const mqtt::ConnackPacket& connack) {
  if (state_ != State::kAwaitingConnack) {
    Fail("unexpected CONNACK from broker");
    return;
  }
  if (mqtt::IsError(connack.reason)) {
    Fail("broker refused the connection of " + config_.client_id + ": " + mqtt::ToString(connack.reason));
    return;
  }
  if (connack.properties.receive_maximum) server_receive_maximum_ = *connack.properties.receive_maximum;
  if (config_.filters.empty()) {
    state_ = State::kReady;
    if (handlers_.on_ready) handlers_.on_ready();
    return;
  }
  mqtt::SubscribePacket subscribe;
  subscribe.packet_id = 1;
  for (const std::string& filter : config_.filters) {
    mqtt::Subscription subscription;
    subscription.filter = filter;
    subscription.options.qos = static_cast<uint8_t>(config_.subscribe_qos);
    subscribe.subscriptions.push_back(std::move(subscription));
  }
  state_ = State::kAwaitingSuback;
  Send(subscribe);
}

void MqttClient::OnSuback(const mqtt::SubackPacket& suback) {
  if (state_ != State::kAwaitingSuback || suback.packet_id != 1) {
    Fail("unexpected SUBACK from broker");
    return;
  }
  for (size_t i = 0; i < suback.reasons.size(); ++i) {
    if (mqtt::IsError(suback.reasons[i])) {
      const std::string filter = i < config_.filters.size() ? config_.filters[i] : "?";
      Fail("broker refused the subscription to '" + filter + "': " + mqtt::ToString(suback.reasons[i]));
      return;
    }
  }
  state_ = State::kReady;
  if (handlers_.on_ready) handlers_.on_ready();
}

void MqttClient::OnPublish(const mqtt::PublishPacket& publish, int64_t arrival_ns) {
  if (publish.qos == 1) {
    SendAck(mqtt::PacketType::kPuback, publish.packet_id);
  } else if (publish.qos == 2) {
    SendAck(mqtt::PacketType::kPubrec, publish.packet_id);
    if (awaiting_pubrel_.empty()) awaiting_pubrel_.resize(65536, false);
    // A resend before PUBREL is the same message: deliver it once.
    if (awaiting_pubrel_[publish.packet_id]) return;
    awaiting_pubrel_[publish.packet_id] = true;
  }
  if (handlers_.on_message) handlers_.on_message(publish.payload, arrival_ns);
}

void MqttClient::OnAck(const mqtt::AckPacket& ack) {
  const bool ok = !mqtt::IsError(ack.reason);
  switch (ack.type) {
    case mqtt::PacketType::kPuback:
    case mqtt::PacketType::kPubcomp:
      if (handlers_.on_publish_done) handlers_.on_publish_done(ack.packet_id, ok);
      break;
    case mqtt::PacketType::kPubrec:
      if (ok) {
        SendAck(mqtt::PacketType::kPubrel, ack.packet_id);
      } else if (handlers_.on_publish_done) {
        handlers_.on_publish_done(ack.packet_id, false);
      }
      break;
    case mqtt::PacketType::kPubrel:
      if (!awaiting_pubrel_.empty()) awaiting_pubrel_[ack.packet_id] = false;
      SendAck(mqtt::PacketType::kPubcomp, ack.packet_id);
      break;
    default:
      break;
  }
}

void MqttClient::OnClose(int status) {
  socket_closed_ = true;
  if (state_ == State::kClosed) return;
  std::string error = "connection to " + config_.broker.ToString() + " closed";
  if (state_ == State::kConnecting || state_ == State::kAwaitingConnack) {
    error = "cannot connect to " + config_.broker.ToString();
  }
  if (status < 0 && status != UV_EOF) {
    error += ": " + UvError(status);
  } else {
    error += " by the broker";
  }
  Fail(error);
}

void MqttClient::Publish(const mqtt::PublishPacket& fields, std::string_view payload) {
  if (state_ != State::kReady) return;
  mqtt::EncodePublish(fields, payload, config_.version, Output());
  MarkDirty();
}

void MqttClient::Ping() {
  if (state_ == State::kReady) Send(mqtt::PingreqPacket{});
}

void MqttClient::Disconnect() {
  handlers_ = Handlers{};
  if (!connection_ || state_ == State::kClosed) return;
  if (state_ == State::kReady) Send(mqtt::DisconnectPacket{});
  state_ = State::kClosed;
  if (tls_) Encrypt();
  connection_->Close();
}

bool MqttClient::open() const { return connection_ && !socket_closed_; }

bool MqttClient::blocked() const {
  return connection_ && (connection_->above_high_watermark() || plaintext_out_.size() > config_.max_queued_bytes);
}

void MqttClient::Send(const mqtt::Packet& packet) {
  mqtt::EncodePacket(packet, config_.version, Output());
  MarkDirty();
}

void MqttClient::SendAck(mqtt::PacketType type, uint16_t packet_id) {
  mqtt::AckPacket ack;
  ack.type = type;
  ack.packet_id = packet_id;
  Send(ack);
}

void MqttClient::Fail(const std::string& error) {
  const State before = state_;
  state_ = State::kClosed;
  if (connection_ && before != State::kClosed) connection_->Close();
  auto on_failed = std::move(handlers_.on_failed);
  handlers_.on_failed = nullptr;
  if (on_failed) on_failed(error);
}

}  // namespace estuary::bench
