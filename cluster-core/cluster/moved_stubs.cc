#include "cluster-core/cluster/moved_stubs.h"

#include <spdlog/spdlog.h>

namespace estuary::cluster {

MovedStubs::MovedStubs(io::Loop& loop, NodeId self, Hooks hooks, Timing timing)
    : loop_(loop), self_(self), hooks_(std::move(hooks)), timing_(timing) {}

MovedStubs::~MovedStubs() {
  if (timer_) loop_.CancelTimer(*timer_);
}

void MovedStubs::Opened(uint16_t shard, const std::string& client_id, uint64_t stub, std::vector<std::string> filters) {
  ++counters_.opened;
  Stub& entry = stubs_[client_id];
  entry = Stub{};
  entry.shard = shard;
  entry.id = stub;
  entry.filters = std::move(filters);
  entry.opened_ms = loop_.NowMs();
  ReadOwner(client_id);
  Arm();
}

void MovedStubs::ReadOwner(const std::string& client_id) {
  auto it = stubs_.find(client_id);
  if (it == stubs_.end() || it->second.reading) return;
  it->second.reading = true;
  it->second.owner_read_ms = loop_.NowMs();
  const uint64_t id = it->second.id;
  hooks_.read_owner(client_id, [this, client_id, id](OwnerAnswer answer) {
    auto found = stubs_.find(client_id);
    if (found == stubs_.end() || found->second.id != id) return;  // ended, or replaced by a newer stub
    Stub& stub = found->second;
    stub.reading = false;
    if (!answer) return;  // not read (the partition elects): asked again at the next check
    if (!answer->has_value() || **answer == self_) {
      // The session ended (its deliveries with it), or its client is back
      // here (the attach ends the stub too): nothing to wait for.
      ++counters_.ended_no_owner;
      return End(found);
    }
    if (stub.owner != **answer) stub.seen_ms = -1;
    stub.owner = **answer;  // its routes are looked for at the next check
  });
}

void MovedStubs::Arm() {
  if (timer_ || stubs_.empty()) return;
  timer_ = loop_.AddTimer(timing_.check_ms, [this] {
    timer_.reset();
    Check();
    Arm();
  });
}

void MovedStubs::Check() {
  const int64_t now = loop_.NowMs();
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    auto next = std::next(it);
    Stub& stub = it->second;
    if (now - stub.opened_ms >= timing_.max_ms) {
      ++counters_.ended_timeout;
      spdlog::info("cluster: the stub of the moved session of '{}' ends after {} ms without its new node's routes "
                   "seen here{}",
                   it->first, now - stub.opened_ms,
                   stub.owner ? fmt::format(" (node {})", *stub.owner) : std::string(" (no owner read)"));
      End(it);
    } else if (stub.owner && hooks_.routes_seen(*stub.owner, stub.filters)) {
      if (stub.seen_ms < 0) stub.seen_ms = now;
      if (now - stub.seen_ms >= timing_.grace_ms) {
        ++counters_.ended_routes_seen;
        End(it);
      }
    } else {
      stub.seen_ms = -1;
      // Not seen yet: the session may have moved on meanwhile.
      if (!stub.reading && (!stub.owner || now - stub.owner_read_ms >= timing_.reread_ms)) ReadOwner(it->first);
    }
    it = next;
  }
}

void MovedStubs::End(std::map<std::string, Stub>::iterator it) {
  const uint16_t shard = it->second.shard;
  const uint64_t id = it->second.id;
  const std::string client_id = it->first;
  stubs_.erase(it);
  hooks_.end(shard, client_id, id);
}

}  // namespace estuary::cluster
