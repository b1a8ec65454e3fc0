#pragma once
// The durable broker tests' fixture (durable_broker_test.cc,
// session_replication_test.cc): brokers on memory or Bitcask engines over a
// SimFileSystem; restart = new brokers on the same engines; crash = the
// file system losing what was not synced.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster-core/broker/queue_link_for_tests.h"
#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/store/record_codec.h"
#include "cluster-core/store/shard_store.h"
#include "io/file_system.h"
#include "io/sim/sim_loop.h"
#include "persistence/bitcask/bitcask_engine.h"
#include "persistence/memory_engine.h"

namespace estuary::core::test_support {

enum class EngineKind { kMemory, kBitcask };

class DurableBrokerTest : public ::testing::Test {
 protected:
  void Start(uint16_t shard_count, EngineKind kind = EngineKind::kMemory) {
    kind_ = kind;
    shard_count_ = shard_count;
    for (uint16_t i = 0; i < shard_count; ++i) engines_.push_back(OpenEngine(i));
    Boot();
  }
  std::unique_ptr<persistence::StorageEngine> OpenEngine(uint16_t shard) {
    if (kind_ == EngineKind::kMemory) return std::make_unique<persistence::MemoryEngine>();
    persistence::bitcask::BitcaskOptions options;
    options.sync = persistence::SyncPolicy::kAlways;
    options.loop = &loop_;
    options.clock = &clock_;
    options.log = [](const std::string&) {};
    auto engine = persistence::bitcask::BitcaskEngine::Open(fs_, dir_prefix_ + "shard-" + std::to_string(shard),
                                                            options);
    EXPECT_TRUE(engine) << engine.error().message;
    return std::move(*engine);
  }
  // Builds the brokers on the engines and recovers; returns the counts.
  ShardBroker::RecoveryCounts Boot() {
    metrics_ = std::vector<ShardMetrics>(shard_count_);
    link_.shards.clear();
    ShardBroker::RecoveryCounts total;
    for (uint16_t i = 0; i < shard_count_; ++i) {
      ShardConfig config;
      config.node_id = 7;
      config.shard_id = i;
      config.shard_count = shard_count_;
      config.replication_ack_leader = replication_ack_leader_;
      config.shared.partitioned = partitioned_;
      brokers_.push_back(std::make_unique<ShardBroker>(config, loop_, link_, metrics_[i]));
      if (boot_port_ != nullptr) brokers_.back()->set_cluster(boot_port_);  // a cluster node
      link_.shards.push_back(brokers_.back().get());
      brokers_.back()->AttachStore(*engines_[i]);
    }
    for (auto& broker : brokers_) {
      auto counts = broker->Recover();
      EXPECT_TRUE(counts) << counts.error();
      total.sessions += counts->sessions;
      total.queued += counts->queued;
      total.inflight += counts->inflight;
      total.retained += counts->retained;
      total.wills += counts->wills;
    }
    Settle();
    return total;
  }
  void Settle() {
    for (int i = 0; i < 10; ++i) {
      link_.RunAll();
      loop_.RunUntilIdle();
    }
  }
  // A clean restart: every broker goes, the engines stay.
  ShardBroker::RecoveryCounts Restart() {
    Settle();
    brokers_.clear();
    return Boot();
  }
  // kill -9 and power loss: unsynced bytes are gone.
  ShardBroker::RecoveryCounts CrashAndRestart() {
    link_.Clear();
    brokers_.clear();
    fs_.Crash();
    engines_.clear();
    for (uint16_t i = 0; i < shard_count_; ++i) engines_.push_back(OpenEngine(i));
    return Boot();
  }
  // A persistent session that subscribed and went away.
  Session* OfflineSubscriber(const std::string& client_id, const std::string& filter,
                             QoS qos = QoS::kAtLeastOnce, uint32_t expiry = 3600) {
    ShardBroker& broker = Owner(client_id);
    Session* session = broker.Attach(client_id, false, &sink_).session;
    session->set_expiry_interval(expiry);
    SubscriptionOptions options;
    options.max_qos = qos;
    broker.Subscribe(session, filter, options);
    broker.Disconnect(session, &sink_, false);
    Settle();
    return session;
  }
  ShardBroker& Owner(const std::string& client_id) {
    return *brokers_[ShardForClientId(client_id, shard_count_)];
  }
  MessagePtr Make(const std::string& topic, const std::string& payload, QoS qos = QoS::kAtLeastOnce,
                  bool retain = false) {
    auto message = std::make_shared<Message>();
    message->id = brokers_[0]->NextMessageId();
    message->topic = topic;
    message->payload = MakePayload(payload);
    message->qos = qos;
    message->retain = retain;
    message->origin = Origin{Protocol::kMqtt, "publisher", 7};
    return message;
  }
  std::vector<std::string> QueuedPayloads(Session* session) {
    std::vector<std::string> out;
    while (session->HasQueued()) out.push_back(*session->PopQueued().message->payload);
    return out;
  }
  // What a connected durable session's connection would be given: its
  // first look stages the queue, shown once the staging is durable.
  std::vector<std::string> Drain(Session* session) {
    (void)session->HasQueued();
    Settle();
    return QueuedPayloads(session);
  }
  size_t KeyCount(uint16_t shard) {
    size_t count = 0;
    (void)engines_[shard]->Scan("", [&](std::string_view, std::string_view) {
      ++count;
      return true;
    });
    return count;
  }

  io::ManualClock clock_;
  io::SimLoop loop_{clock_};
  io::SimFileSystem fs_{1};
  QueueLink link_;
  EngineKind kind_ = EngineKind::kMemory;
  std::string dir_prefix_;
  uint16_t shard_count_ = 1;
  bool replication_ack_leader_ = false;  // ShardConfig::replication_ack_leader
  std::vector<std::unique_ptr<persistence::StorageEngine>> engines_;
  std::vector<ShardMetrics> metrics_;
  std::vector<std::unique_ptr<ShardBroker>> brokers_;
  NullSink sink_;
  ClusterPort* boot_port_ = nullptr;
  std::map<std::string, PartitionedGroup, std::less<>> partitioned_;  // ShardConfig::shared.partitioned
};

}  // namespace estuary::core::test_support
