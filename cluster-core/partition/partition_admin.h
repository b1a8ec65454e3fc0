#pragma once
// The admin API for planned leadership moves, served by the node's admin
// listener and used by estuaryctl (docs/partitions.md "Planned leadership
// moves"):
//   POST   /api/cluster/partitions/transfer?partition=P[&to=N]
//          PartitionHost::RequestLeader. 202 {"partition","from","to"}
//          once the pin is proposed: watch GET /api/cluster/partitions on
//          `from` for the leader to become `to`. Refusals are JSON
//          {"error": ...} with 400 (bad query), 404 (unknown partition, not
//          open), 409 (target not a voter, not caught up, draining, or no
//          target), 421 (ask another node: "leader" names the leader, or
//          "replicas" the replicas when this node holds none), 503 (no
//          leader now: try again).
//   DELETE /api/cluster/partitions/transfer?partition=P
//          PartitionHost::ClearLeaderPin. 202 {"partition","pin":0}.
// Call on the PartitionHost's loop. Returns nullopt for paths it does not
// serve.
#include <optional>
#include <string>

#include "cluster-core/partition/partition_host.h"
#include "io/uv/http_server.h"

namespace estuary::partition {

std::optional<io::HttpResponse> ServePartitionAdmin(PartitionHost& host, const std::string& method,
                                                    const std::string& path);

}  // namespace estuary::partition
