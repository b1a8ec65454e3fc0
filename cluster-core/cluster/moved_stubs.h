#pragma once
// MovedStubs: when the stubs of moved sessions end (docs/partitions.md,
// "Deliveries left behind by a move", the route gap; issue 29).
//
// A shard keeps the dropped copy of a session that moved to another node
// as a stub whose plain subscriptions keep matching here
// (ShardBroker::EndMovedStub). This class decides when each ends: once the
// session's new owner (asked of the registry) holds a route for every
// filter of the stub as this node sees the routes, and `grace_ms` more
// (publishers' nodes apply the metadata log later than this one; until
// they see the new owner's routes their forwards come here), or when the
// registry names no owner or this node (the session ended, or its client
// came back here), or after `max_ms` whatever happens (logged).
//
// Pure of frames and threads: the agent gives it the registry read, its
// view of the routes and the shard call (hooks), and a loop for its one
// timer; tests drive it on a SimLoop.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster-core/links/transport.h"
#include "io/loop.h"

namespace estuary::cluster {

class MovedStubs {
 public:
  // The registry's owner of a client id: nullopt (outer) when it could
  // not be read (asked again), an empty inner optional when nobody owns it.
  using OwnerAnswer = std::optional<std::optional<NodeId>>;
  struct Hooks {
    std::function<void(const std::string& client_id, std::function<void(OwnerAnswer)> done)> read_owner;
    // Whether this node has `node`'s route for every one of `filters`.
    std::function<bool(NodeId node, const std::vector<std::string>& filters)> routes_seen;
    // Ends stub `stub` of the client id on `shard`.
    std::function<void(uint16_t shard, const std::string& client_id, uint64_t stub)> end;
  };
  struct Timing {
    int64_t check_ms = 100;    // how often open stubs are looked at
    int64_t reread_ms = 1000;  // the owner is asked again while its routes are not seen
    int64_t grace_ms = 2000;
    int64_t max_ms = 30000;
  };
  struct Counters {
    uint64_t opened = 0;
    uint64_t ended_routes_seen = 0;  // the new owner's routes seen (and the grace over)
    uint64_t ended_no_owner = 0;     // the session ended, or its client came back here
    uint64_t ended_timeout = 0;      // max_ms passed first
  };

  MovedStubs(io::Loop& loop, NodeId self, Hooks hooks, Timing timing);
  MovedStubs(io::Loop& loop, NodeId self, Hooks hooks) : MovedStubs(loop, self, std::move(hooks), Timing{}) {}
  ~MovedStubs();
  MovedStubs(const MovedStubs&) = delete;
  MovedStubs& operator=(const MovedStubs&) = delete;

  // A shard opened stub `stub` for the client id (a newer one replaces an
  // older one of the same id: the shard ended that).
  void Opened(uint16_t shard, const std::string& client_id, uint64_t stub, std::vector<std::string> filters);
  size_t open() const { return stubs_.size(); }
  const Counters& counters() const { return counters_; }

 private:
  struct Stub {
    uint16_t shard = 0;
    uint64_t id = 0;
    std::vector<std::string> filters;
    int64_t opened_ms = 0;
    std::optional<NodeId> owner;
    int64_t owner_read_ms = 0;
    bool reading = false;
    int64_t seen_ms = -1;  // when the owner's routes were first all seen
  };
  void ReadOwner(const std::string& client_id);
  void Check();
  void Arm();
  void End(std::map<std::string, Stub>::iterator it);

  io::Loop& loop_;
  NodeId self_;
  Hooks hooks_;
  Timing timing_;
  std::map<std::string, Stub> stubs_;
  std::optional<io::TimerId> timer_;
  Counters counters_;
};

}  // namespace estuary::cluster
