#pragma once
// BenchClient: one connection of estuary-bench, whatever its protocol
// (MqttClient in client.h, AmqpClient in amqp_client.h). Publisher and
// Worker drive every connection through this interface.
//
// Threading and ownership: held by shared_ptr by its Worker and used only
// on the Worker's loop thread. Handlers run on that thread; on_failed is
// called at most once, and never after Disconnect() or destruction.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "frontends/mqtt/codec/packet.h"

namespace estuary::bench {

class BenchClient {
 public:
  struct Handlers {
    // Connected, and every subscription (MQTT SUBACK) or link (AMQP attach)
    // granted.
    std::function<void()> on_ready;
    std::function<void(const std::string& error)> on_failed;
    // A message for a subscriber: its payload (the AMQP body) and the time
    // its bytes arrived.
    std::function<void(std::string_view payload, int64_t arrival_ns)> on_message;
    // The end of an acknowledged send, by id: MQTT PUBACK or PUBCOMP, AMQP
    // disposition; ok is false for an error reason or a non-accepted outcome.
    std::function<void(uint16_t id, bool ok)> on_publish_done;
    // Sending may go on: queued bytes fell below the low watermark, or (AMQP)
    // link credit arrived.
    std::function<void()> on_drain;
  };

  virtual ~BenchClient() = default;

  virtual void Start() = 0;
  // `fields` carries QoS and id (QoS 0: AMQP pre-settled; QoS 1: unsettled,
  // answered by on_publish_done(id)) and, for MQTT, the topic; an AMQP
  // client sends on the link it opened for its target address.
  virtual void Publish(const mqtt::PublishPacket& fields, std::string_view payload) = 0;
  // Called every half keep-alive period: MQTT PINGREQ; AMQP services its
  // idle-timeout timers on its own.
  virtual void Ping() = 0;
  // Closes gracefully after flushing. No handler is called after.
  virtual void Disconnect() = 0;

  virtual bool ready() const = 0;
  virtual bool open() const = 0;  // the socket is not closed yet
  // True while the socket's queue is above its high watermark, or (AMQP)
  // the sending link has no credit: the publisher waits for on_drain.
  virtual bool blocked() const = 0;
  // Sends the broker allows unacknowledged at once: MQTT 5 Receive Maximum,
  // else 65535.
  virtual uint16_t server_receive_maximum() const { return 65535; }
};

}  // namespace estuary::bench
