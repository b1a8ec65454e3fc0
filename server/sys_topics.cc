// $SYS/broker/... statistics, retained, with the names Mosquitto users know.
#include <fmt/format.h>

#include "server/node.h"

namespace estuary::server {

void Node::StartSysTimer() {
  if (config_.sys_interval_s == 0) return;
  PublishSys();
  shards_[0]->loop().AddTimer(int64_t{config_.sys_interval_s} * 1000, [this] {
    if (shutting_down_) return;
    StartSysTimer();
  });
}

void Node::PublishSys() {
  uint64_t connected = 0, total = 0, sessions = 0, received = 0, sent = 0, bytes_in = 0, bytes_out = 0,
           subscriptions = 0, dropped = 0, retained = 0;
  for (const auto& m : metrics_) {
    connected += m->connections.load(std::memory_order_relaxed);
    total += m->connections_total.load(std::memory_order_relaxed);
    sessions += m->sessions.load(std::memory_order_relaxed);
    received += m->messages_in.load(std::memory_order_relaxed);
    sent += m->messages_out.load(std::memory_order_relaxed);
    bytes_in += m->bytes_in.load(std::memory_order_relaxed);
    bytes_out += m->bytes_out.load(std::memory_order_relaxed);
    subscriptions += m->subscriptions.load(std::memory_order_relaxed);
    dropped += m->messages_dropped.load(std::memory_order_relaxed);
  }
  retained = metrics_[0]->retained_messages.load(std::memory_order_relaxed);
  const int64_t uptime_s = (io::SystemClock::Instance().NowMs() - started_ms_) / 1000;
  const std::pair<const char*, std::string> values[] = {
      {"$SYS/broker/version", fmt::format("estuary {}", ESTUARY_VERSION)},
      {"$SYS/broker/uptime", fmt::format("{} seconds", uptime_s)},
      {"$SYS/broker/clients/connected", std::to_string(connected)},
      {"$SYS/broker/clients/active", std::to_string(connected)},
      {"$SYS/broker/clients/total", std::to_string(sessions)},
      {"$SYS/broker/clients/disconnected", std::to_string(sessions > connected ? sessions - connected : 0)},
      {"$SYS/broker/connections/total", std::to_string(total)},
      {"$SYS/broker/messages/received", std::to_string(received)},
      {"$SYS/broker/messages/sent", std::to_string(sent)},
      {"$SYS/broker/messages/dropped", std::to_string(dropped)},
      {"$SYS/broker/publish/messages/received", std::to_string(received)},
      {"$SYS/broker/publish/messages/sent", std::to_string(sent)},
      {"$SYS/broker/bytes/received", std::to_string(bytes_in)},
      {"$SYS/broker/bytes/sent", std::to_string(bytes_out)},
      {"$SYS/broker/subscriptions/count", std::to_string(subscriptions)},
      {"$SYS/broker/retained messages/count", std::to_string(retained)},
  };
  core::ShardBroker& broker = shards_[0]->broker();
  for (const auto& [topic, value] : values) {
    auto message = std::make_shared<Message>();
    message->id = broker.NextMessageId();
    message->topic = topic;
    message->payload = MakePayload(value);
    message->retain = true;
    message->origin = Origin{Protocol::kInternal, "$SYS", config_.node_id};
    broker.Publish(std::move(message));
  }
  broker.Housekeeping();
}

}  // namespace estuary::server
