#pragma once
// The node's durable storage (docs/storage.md): one StorageEngine per shard
// in <data-dir>/shard-<n>, chosen by --storage and --sync. The data dir
// records the shard count and engine it was written with
// (<data-dir>/estuary.meta); a node refuses to start on a data dir written
// with another shard count or engine, since sessions live on the shard their
// client id hashes to and retained topics on the shard their topic hashes to.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/expected.h"
#include "io/loop.h"
#include "persistence/storage_engine.h"
#include "server/config.h"

namespace estuary::server {

// False for --storage memory or an empty --data-dir: nothing is written and
// nothing survives a restart (the broker behaves as before persistence).
bool StorageEnabled(const NodeConfig& config);

// Creates the data dir, or checks that its recorded shard count and engine
// match the config; records them on first use.
Expected<void, std::string> PrepareDataDir(const NodeConfig& config);

// Opens shard `shard`'s engine on the shard's loop (group commit and the
// interval timer run there).
Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenShardEngine(
    const NodeConfig& config, uint16_t shard, io::Loop& loop);

// Opens the metadata group's engine (<data-dir>/meta, the same --storage
// kind) on the cluster agent's loop.
Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenMetaEngine(const NodeConfig& config,
                                                                                  io::Loop& loop);
// The partitions' raft groups (cluster-core/partition/): <data-dir>/partitions.
Expected<std::unique_ptr<persistence::StorageEngine>, std::string> OpenPartitionEngine(const NodeConfig& config,
                                                                                       io::Loop& loop);

// The membership incarnation this node last used (docs/cluster.md,
// "Incarnations"), kept in <data-dir>/incarnation so that a restart comes
// back higher. nullopt without storage, without the file, or if it does not
// parse (logged).
std::optional<uint64_t> LoadIncarnation(const NodeConfig& config);
// Writes it durably (temp file, fsync, rename), creating the data dir if
// needed. A no-op without storage.
Expected<void, std::string> SaveIncarnation(const NodeConfig& config, uint64_t incarnation);

}  // namespace estuary::server
