#pragma once
// ShardRuntime's record of one MQTT connection, shared by the files that
// implement ShardRuntime (shard_runtime.cc, shard_runtime_admin.cc).
#include <memory>

#include "server/shard_runtime.h"

namespace estuary::server {

struct ShardRuntime::MqttPeer {
  std::unique_ptr<ClientStream> stream;
  std::shared_ptr<mqtt::MqttConnection> mqtt;  // holds a reference to *stream: declared after it
  uint16_t handoff_target = 0;  // the shard that owns the client id
  int handoff_attempts = 0;     // Detach refused while output was queued
};

}  // namespace estuary::server
