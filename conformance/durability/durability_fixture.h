#pragma once
// What the kill -9 tests share: a temp data dir, a real estuaryd on it
// (--sync always, two shards, the engine from the test parameter), kill -9,
// and MQTT helpers on the raw client. Test support only; one thread.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "conformance/support/broker_process.h"
#include "conformance/support/raw_client.h"

namespace estuary::conformance {

inline constexpr uint16_t kDurabilityShards = 2;

// The broker's client id (and AMQP container-id) -> shard hash (FNV-1a),
// so a test can put publisher and subscriber on different shards.
inline uint16_t ShardOf(const std::string& client_id) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : client_id) {
    hash ^= c;
    hash *= 16777619u;
  }
  return static_cast<uint16_t>(hash % kDurabilityShards);
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

  TempDir dir_;
};

}  // namespace estuary::conformance
