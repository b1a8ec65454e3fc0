#pragma once
// What the kill -9 tests share: a temp data dir, a real estuaryd on it
// (--sync always, two shards, the engine from the test parameter), kill -9,
// a QoS 1 stream cut by kill -9, and MQTT helpers on the raw client. Test
// support only; one thread.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/hash.h"
#include "conformance/support/broker_process.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {

inline constexpr uint16_t kDurabilityShards = 2;

// The broker's client id (and AMQP container-id) -> shard hash (FNV-1a),
// so a test can put publisher and subscriber on different shards.
inline uint16_t ShardOf(const std::string& client_id) {
  return static_cast<uint16_t>(base::Fnv1a32(client_id) % kDurabilityShards);
}

inline std::string IdOnShard(const std::string& base, uint16_t shard) {
  for (int suffix = 0;; ++suffix) {
    std::string id = base + "-" + std::to_string(suffix);
    if (ShardOf(id) == shard) return id;
  }
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "estuary-durability-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Parameter: the storage engine ("bitcask" or "rocksdb").
class DurableNodeTest : public ::testing::TestWithParam<std::string> {
 protected:
  using BrokerProcess = testing::BrokerProcess;
  using RawClient = testing::RawClient;

  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  std::unique_ptr<BrokerProcess> StartNode(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--data-dir", dir_.path(), "--storage", GetParam(), "--sync",
                                      "always", "--shards", std::to_string(kDurabilityShards),
                                      "--sys-interval", "0", "--log-level", "warn"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    std::string error;
    auto node = BrokerProcess::Start(flags, &error, std::chrono::seconds(30));
    EXPECT_NE(node, nullptr) << error;
    return node;
  }
  static void Kill9(BrokerProcess& node) {
    ASSERT_EQ(::kill(node.pid(), SIGKILL), 0);
    EXPECT_EQ(node.Stop(), 128 + SIGKILL);
  }
  static mqtt::Properties Expiry(uint32_t interval_s) {
    mqtt::Properties properties;
    properties.session_expiry_interval = interval_s;
    return properties;
  }
  static std::unique_ptr<RawClient> Connect(BrokerProcess& node, const std::string& client_id,
                                            bool clean_start, uint32_t expiry, bool* present = nullptr) {
    auto client = std::make_unique<RawClient>();
    if (!client->Open(node.host(), node.mqtt_port())) return nullptr;
    auto connack = client->Connect(client_id, clean_start, Expiry(expiry));
    if (!connack || connack->reason != mqtt::ReasonCode::kSuccess) return nullptr;
    if (present != nullptr) *present = connack->session_present;
    return client;
  }
  static mqtt::PublishPacket Publish(const std::string& topic, const std::string& payload, uint8_t qos,
                                     uint16_t packet_id, bool retain = false) {
    mqtt::PublishPacket publish;
    publish.topic = topic;
    publish.payload = payload;
    publish.qos = qos;
    publish.packet_id = packet_id;
    publish.retain = retain;
    return publish;
  }
  static void Ack(RawClient& client, mqtt::PacketType type, uint16_t packet_id) {
    mqtt::AckPacket ack;
    ack.type = type;
    ack.packet_id = packet_id;
    client.Send(ack);
  }

  // A publisher `publisher_id` sends 5 batches of 100 QoS 1 messages "m1",
  // "m2", ... to `topic`/(N % 7), each batch acknowledged before the next
  // (all 500 must be), then `last_batch` more to `topic`/x, during which
  // `kill` runs once 10 more PUBACKs came. Returns the payloads whose PUBACK
  // arrived (those that left before the kill included); `sent` gets the
  // total.
  std::set<std::string> PublishAcrossKill(BrokerProcess& node, const std::string& publisher_id,
                                          const std::string& topic, uint16_t last_batch,
                                          const std::function<void()>& kill, size_t* sent) {
    std::set<std::string> acknowledged;
    auto publisher = Connect(node, publisher_id, true, 0);
    if (publisher == nullptr) {
      ADD_FAILURE() << "publisher could not connect";
      return acknowledged;
    }
    auto take_acks = [&](size_t until, std::chrono::milliseconds wait) {
      while (acknowledged.size() < until) {
        auto ack = publisher->ReceiveAs<mqtt::AckPacket>(wait);
        if (!ack) break;
        acknowledged.insert("m" + std::to_string(ack->packet_id));
      }
    };
    constexpr uint16_t kBatch = 100;
    constexpr uint16_t kBatches = 5;
    uint16_t next = 1;
    for (uint16_t batch = 0; batch < kBatches; ++batch) {
      for (uint16_t i = 0; i < kBatch; ++i, ++next) {
        publisher->Send(Publish(topic + "/" + std::to_string(next % 7), "m" + std::to_string(next), 1, next));
      }
      take_acks(size_t{next} - 1, std::chrono::seconds(10));
    }
    EXPECT_EQ(acknowledged.size(), size_t{kBatch} * kBatches);
    for (uint16_t i = 0; i < last_batch; ++i, ++next) {
      publisher->Send(Publish(topic + "/x", "m" + std::to_string(next), 1, next));
    }
    take_acks(acknowledged.size() + 10, std::chrono::seconds(10));  // the node is mid-stream now
    kill();
    take_acks(size_t{next} - 1, std::chrono::milliseconds(500));  // PUBACKs that left before the kill
    *sent = size_t{next} - 1;
    return acknowledged;
  }

  TempDir dir_;
};

// Test names per engine: Engines/DurabilityTest.Name/bitcask.
inline std::string EngineName(const ::testing::TestParamInfo<std::string>& param) { return param.param; }

}  // namespace estuary::conformance
