#include "tools/bench/fake_broker.h"

#include <list>
#include <string>
#include <variant>
#include <vector>

#include "frontends/mqtt/codec/decoder.h"
#include "frontends/mqtt/codec/encoder.h"
#include "model/topic.h"

namespace estuary::bench::testing {

// Every client connection of the broker and the routing between them. Lives
// on the broker's loop thread.
class FakeBroker::Hub {
 public:
  Hub(const FakeBrokerConfig& config, std::atomic<uint64_t>& accepted) : config_(config), accepted_(accepted) {}

  void Accept(io::UvLoop& loop, int fd) {
    auto connection = io::TcpConnection::Adopt(loop, fd);
    if (!connection) return;
    ++accepted_;
    auto it = sessions_.emplace(sessions_.end());
    it->connection = connection;
    io::TcpConnection::Handlers handlers;
    handlers.on_data = [this, it](std::string_view bytes) { OnData(*it, bytes); };
    handlers.on_close = [this, it](int) { sessions_.erase(it); };
    connection->SetHandlers(std::move(handlers));
  }

 private:
  struct Session {
    std::shared_ptr<io::TcpConnection> connection;
    mqtt::ProtocolVersion version = mqtt::ProtocolVersion::kV311;
    std::string input;
    std::vector<mqtt::Subscription> subscriptions;
    uint16_t next_id = 1;
  };

  void OnData(Session& session, std::string_view bytes) {
    session.input.append(bytes);
    size_t used = 0;
    while (true) {
      std::string_view rest = std::string_view(session.input).substr(used);
      auto frame = mqtt::PeekFrame(rest, 1 << 28);
      if (!frame || frame->header_size == 0 || frame->total_size() > rest.size()) break;
      auto packet = mqtt::DecodePacket(rest.substr(0, frame->total_size()), session.version);
      used += frame->total_size();
      if (!packet) {
        session.connection->Abort();
        return;
      }
      Handle(session, *packet);
    }
    session.input.erase(0, used);
  }

  void Send(Session& session, const mqtt::Packet& packet) {
    mqtt::EncodePacket(packet, session.version, session.connection->output_buffer());
    session.connection->MarkDirty();
  }

  void Ack(Session& session, mqtt::PacketType type, uint16_t id) {
    mqtt::AckPacket ack;
    ack.type = type;
    ack.packet_id = id;
    Send(session, ack);
  }

  void Handle(Session& session, const mqtt::Packet& packet) {
    if (const auto* connect = std::get_if<mqtt::ConnectPacket>(&packet)) {
      session.version = connect->version;
      mqtt::ConnackPacket connack;
      connack.reason = config_.connack_reason;
      Send(session, connack);
      if (mqtt::IsError(config_.connack_reason)) session.connection->Close();
    } else if (const auto* subscribe = std::get_if<mqtt::SubscribePacket>(&packet)) {
      mqtt::SubackPacket suback;
      suback.packet_id = subscribe->packet_id;
      for (const auto& subscription : subscribe->subscriptions) {
        suback.reasons.push_back(config_.refuse_subscriptions ? mqtt::ReasonCode::kNotAuthorized
                                                              : static_cast<mqtt::ReasonCode>(subscription.options.qos));
        if (!config_.refuse_subscriptions) session.subscriptions.push_back(subscription);
      }
      Send(session, suback);
    } else if (const auto* publish = std::get_if<mqtt::PublishPacket>(&packet)) {
      if (++publishes_ == config_.close_after) {
        session.connection->Abort();
        return;
      }
      if (publish->qos == 1 && config_.acknowledge) Ack(session, mqtt::PacketType::kPuback, publish->packet_id);
      if (publish->qos == 2 && config_.acknowledge) Ack(session, mqtt::PacketType::kPubrec, publish->packet_id);
      Route(*publish);
    } else if (const auto* ack = std::get_if<mqtt::AckPacket>(&packet)) {
      if (ack->type == mqtt::PacketType::kPubrel) Ack(session, mqtt::PacketType::kPubcomp, ack->packet_id);
      if (ack->type == mqtt::PacketType::kPubrec) Ack(session, mqtt::PacketType::kPubrel, ack->packet_id);
    } else if (std::holds_alternative<mqtt::PingreqPacket>(packet)) {
      Send(session, mqtt::PingrespPacket{});
    } else if (std::holds_alternative<mqtt::DisconnectPacket>(packet)) {
      session.connection->Close();
    }
  }

  void Route(const mqtt::PublishPacket& publish) {
    for (Session& subscriber : sessions_) {
      for (const auto& subscription : subscriber.subscriptions) {
        if (!TopicMatches(subscription.filter, publish.topic)) continue;
        ++deliveries_;
        if (config_.drop_every != 0 && deliveries_ % config_.drop_every == 0) continue;
        const int copies = config_.duplicate_every != 0 && deliveries_ % config_.duplicate_every == 0 ? 2 : 1;
        mqtt::PublishPacket out;
        out.topic = publish.topic;
        out.qos = std::min(publish.qos, subscription.options.qos);
        for (int i = 0; i < copies; ++i) {
          if (out.qos > 0) {
            out.packet_id = subscriber.next_id;
            subscriber.next_id = subscriber.next_id == 65535 ? 1 : subscriber.next_id + 1;
          }
          mqtt::EncodePublish(out, publish.payload, subscriber.version, subscriber.connection->output_buffer());
          subscriber.connection->MarkDirty();
        }
      }
    }
  }

  const FakeBrokerConfig& config_;
  std::atomic<uint64_t>& accepted_;
  std::list<Session> sessions_;  // stable addresses for the handlers
  uint64_t deliveries_ = 0;
  uint64_t publishes_ = 0;
};

FakeBroker::FakeBroker(FakeBrokerConfig config) : config_(config) {
  thread_ = std::thread([this] {
    io::UvLoop loop;
    Hub hub(config_, accepted_);
    auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) { hub.Accept(loop, fd); });
    if (!listener) std::abort();
    port_ = (*listener)->port();
    loop_ = &loop;
    listening_.set_value();
    loop.Run();
    (*listener)->Close();
  });
  listening_.get_future().wait();
}

FakeBroker::~FakeBroker() {
  loop_->mailbox().Send([this] { loop_->Stop(); });
  thread_.join();
}

}  // namespace estuary::bench::testing
