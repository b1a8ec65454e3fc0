#include "cluster-core/meta/raft_host.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <utility>

namespace estuary::meta {

namespace {

std::string BootstrapKey(GroupId group) { return "raftboot/" + std::to_string(group); }

bool IsVoteRequest(raft::MessageType type) {
  return type == raft::MessageType::kVote || type == raft::MessageType::kPreVote;
}

}  // namespace

RaftGroup::RaftGroup(RaftHost& host, GroupConfig config, persistence::StorageEngine& engine,
                     StateMachine& machine)
    : host_(host),
      config_(std::move(config)),
      engine_(engine),
      machine_(machine),
      store_(engine, std::to_string(config_.group)) {}

persistence::Status RaftGroup::Start() {
  auto loaded = store_.Load();
  if (!loaded) return MakeError(loaded.error());
  raft::Storage storage = std::move(*loaded);
  started_empty_ = storage.hard_state == raft::HardState{} && storage.snapshot.index == 0 &&
                   storage.entries.empty();
  auto boot = engine_.Get(BootstrapKey(config_.group));
  if (!boot) return MakeError(boot.error());
  if (*boot) {
    storage.bootstrap = raft::DecodeConfig(std::vector<uint8_t>((*boot)->begin(), (*boot)->end()));
  } else if (started_empty_ && !config_.bootstrap.voters.empty()) {
    const std::vector<uint8_t> bytes = raft::EncodeConfig(config_.bootstrap);
    auto put = engine_.Put(BootstrapKey(config_.group), std::string(bytes.begin(), bytes.end()));
    if (!put) return put;
    storage.bootstrap = config_.bootstrap;
  }
  if (storage.snapshot.index > 0) {
    if (!machine_.Restore(storage.snapshot.data)) {
      return persistence::Fail(persistence::Errc::kCorruption, "raft group snapshot state");
    }
    applied_ = storage.snapshot.index;
  }
  // The lost-state rule (raft_host.h): a store that starts empty with no
  // config of its own waits for a leader and votes only once caught up.
  storage.lost_state = config_.refuse_votes_when_empty && started_empty_ && storage.bootstrap.voters.empty();
  bootstrapped_ = !storage.bootstrap.voters.empty();
  config_.raft.id = host_.self();
  raft_ = std::make_unique<raft::Raft>(config_.raft, std::move(storage),
                                       static_cast<uint64_t>(host_.loop_.NowMs()));
  // The first Ready replays (snapshot, commit] for the state machine.
  Enqueue(raft::Ready{});
  return {};
}

bool RaftGroup::HasState() const {
  return !started_empty_ || bootstrapped_ || raft_->term() != 0 || raft_->log().LastIndex() != 0;
}

Expected<void, std::string> RaftGroup::Bootstrap(raft::Config config) {
  if (HasState()) return MakeError(std::string("the group already has state"));
  if (config.voters.empty()) return MakeError(std::string("a bootstrap config needs a voter"));
  const std::vector<uint8_t> bytes = raft::EncodeConfig(config);
  if (auto put = engine_.Put(BootstrapKey(config_.group), std::string(bytes.begin(), bytes.end())); !put) {
    return MakeError("saving the bootstrap config: " + put.error().message);
  }
  // Nothing was persisted, sent or applied by the empty raft it replaces
  // (term 0, no entry): a new one from the config is the same as a start
  // with it configured.
  bootstrapped_ = true;
  raft_ = std::make_unique<raft::Raft>(config_.raft, raft::Storage{.bootstrap = std::move(config)},
                                       static_cast<uint64_t>(host_.loop_.NowMs()));
  Enqueue(raft::Ready{});
  return {};
}

void RaftGroup::Enqueue(raft::Ready ready) {
  queue_.push_back(std::move(ready));
  Drain();
}

// Readys are handled strictly in the order raft returned them, including
// those produced by proposals made from inside an apply callback.
void RaftGroup::Drain() {
  if (draining_) return;
  draining_ = true;
  while (!queue_.empty()) {
    raft::Ready ready = std::move(queue_.front());
    queue_.pop_front();
    if (ready.Empty()) {
      // The start marker: take whatever the constructor queued.
      raft::Ready first = raft_->Advance(ready);
      if (!first.Empty()) queue_.push_front(std::move(first));
      continue;
    }
    Handle(ready);
    raft::Ready next = raft_->Advance(ready);
    if (!next.Empty()) queue_.push_back(std::move(next));
    MaybeCompact();
  }
  draining_ = false;
  if (!reads_.empty()) ServeReads(host_.loop_.NowMs());
}

void RaftGroup::Handle(const raft::Ready& ready) {
  if (auto saved = store_.Save(ready); !saved) {
    // Raft's promises rest on this write; limping on could elect two leaders.
    spdlog::critical("raft group {}: persisting failed: {}", config_.group, saved.error().message);
    std::abort();
  }
  for (const raft::Message& message : ready.messages) Send(message);
  for (const raft::Write& write : ready.redirected) {
    if (ready.redirect_to == host_.self()) {
      auto proposed = raft_->Propose(write.data, static_cast<uint64_t>(host_.loop_.NowMs()), write.id);
      if (proposed) queue_.push_back(std::move(proposed->ready));
    } else if (ready.redirect_to != raft::kNoNode) {
      ProposeRequest request{config_.group, 0, write.id, write.data};
      host_.transport_.Send(static_cast<cluster::NodeId>(ready.redirect_to), kRaftPropose,
                            EncodeProposeRequest(request));
    }
  }
  if (ready.snapshot && ready.restore_snapshot) {
    if (!machine_.Restore(ready.snapshot->data)) {
      spdlog::critical("raft group {}: the leader's snapshot does not decode", config_.group);
      std::abort();
    }
    applied_ = ready.snapshot->index;
    ++counters_.snapshots_installed;
    for (auto it = waiting_.begin(); it != waiting_.end() && it->first <= applied_;) {
      Answer(it->second, {ProposeStatus::kNotLeader, it->first});
      it = waiting_.erase(it);
    }
  }
  ApplyCommitted(ready);
}

void RaftGroup::Send(const raft::Message& message) {
  if (message.to == raft::kNoNode || message.to > 0xFFFF) return;
  ++counters_.messages_out;
  MarkBusy(message.type);
  host_.transport_.Send(static_cast<cluster::NodeId>(message.to), kRaftMessage,
                        EncodeMessage(config_.group, message));
}

void RaftGroup::ApplyCommitted(const raft::Ready& ready) {
  size_t next_duplicate = 0;
  for (const raft::Entry& entry : ready.committed) {
    const bool duplicate = next_duplicate < ready.duplicates.size() &&
                           ready.duplicates[next_duplicate] == entry.index;
    if (duplicate) ++next_duplicate;
    if (entry.index <= applied_) continue;
    if (!duplicate && entry.type == raft::EntryType::kNormal) {
      machine_.Apply(entry);
      ++counters_.applied_entries;
    }
    applied_ = entry.index;
    auto it = waiting_.find(entry.index);
    if (it == waiting_.end()) continue;
    const bool ours = it->second.term == entry.term;
    Answer(it->second, {ours ? ProposeStatus::kOk : ProposeStatus::kNotLeader, entry.index});
    waiting_.erase(it);
  }
}

void RaftGroup::Answer(Waiting& waiting, ProposeResult result) {
  if (result.status != ProposeStatus::kOk) ++counters_.proposals_failed;
  if (waiting.local) {
    host_.loop_.Post([done = std::move(waiting.local), result] { done(result); });
  } else if (waiting.remote != 0 && waiting.request != 0) {
    ProposeReply reply{config_.group, waiting.request, result.status, result.index, raft_->leader()};
    host_.transport_.Send(waiting.remote, kRaftProposed, EncodeProposeReply(reply));
  }
}

void RaftGroup::MaybeCompact() {
  const raft::Index base = raft_->log().snapshot()->index;
  if (config_.snapshot_every == 0 || applied_ < base + config_.snapshot_every) return;
  ++counters_.snapshots_taken;
  queue_.push_back(raft_->Compact(applied_, machine_.Snapshot()));
}

void RaftGroup::Fail(ProposeCallback done, ProposeStatus status) {
  ++counters_.proposals_failed;
  if (done) host_.loop_.Post([done = std::move(done), status] { done({status, 0}); });
}

void RaftGroup::Propose(std::vector<uint8_t> data, raft::WriteId id, ProposeCallback done) {
  ++counters_.proposals;
  Wake(LeaderLive());
  const int64_t now = host_.loop_.NowMs();
  last_busy_ms_ = now;
  const raft::NodeId leader = raft_->leader();
  if (raft_->role() != raft::Role::kLeader && leader != raft::kNoNode && leader != host_.self()) {
    const uint64_t request = next_request_++;
    forwarded_[request] = Forwarded{std::move(done), now + config_.propose_timeout_ms};
    ++counters_.proposals_forwarded;
    ProposeRequest message{config_.group, request, id, std::move(data)};
    if (host_.transport_.Send(static_cast<cluster::NodeId>(leader), kRaftPropose,
                              EncodeProposeRequest(message)) != cluster::SendResult::kQueued) {
      Fail(std::move(forwarded_[request].done), ProposeStatus::kNotLeader);
      forwarded_.erase(request);
    }
    return;
  }
  if (AwaitingLease(now)) {
    ++counters_.proposals_parked;
    parked_.push_back(Parked{std::move(data), id, std::move(done), 0, 0});
    return;
  }
  ProposeHere(std::move(data), id, std::move(done), now);
}

void RaftGroup::ProposeHere(std::vector<uint8_t> data, raft::WriteId id, ProposeCallback done,
                            int64_t now) {
  auto proposed = raft_->Propose(std::move(data), static_cast<uint64_t>(now), id);
  if (!proposed) {
    const bool not_leader = proposed.error() == raft::Errc::kNotLeader;
    return Fail(std::move(done), not_leader ? ProposeStatus::kNotLeader : ProposeStatus::kRejected);
  }
  if (proposed->held) {
    // A leadership transfer holds it; it is redirected, not answered here:
    // the caller times out and retries (the WriteId makes that safe).
    forwarded_[next_request_++] = Forwarded{std::move(done), now + config_.propose_timeout_ms};
  } else {
    waiting_[proposed->index] =
        Waiting{proposed->term, std::move(done), 0, 0, now + config_.propose_timeout_ms};
  }
  Enqueue(std::move(proposed->ready));
}

Expected<void, raft::Errc> RaftGroup::ChangeConfig(raft::ConfigChange change) {
  Wake(LeaderLive());
  last_busy_ms_ = host_.loop_.NowMs();
  auto changed = raft_->ChangeConfig(change, static_cast<uint64_t>(host_.loop_.NowMs()));
  if (!changed) return MakeError(changed.error());
  Enqueue(std::move(changed->ready));
  return {};
}

Expected<void, raft::Errc> RaftGroup::TransferLeadership(raft::NodeId target) {
  Wake(LeaderLive());
  last_busy_ms_ = host_.loop_.NowMs();
  auto ready = raft_->TransferLeadership(target, static_cast<uint64_t>(last_busy_ms_));
  if (!ready) return MakeError(ready.error());
  Enqueue(std::move(*ready));
  return {};
}

void RaftGroup::CampaignNow() {
  Wake(LeaderLive());
  last_busy_ms_ = host_.loop_.NowMs();
  Enqueue(raft_->CampaignNow(static_cast<uint64_t>(last_busy_ms_)));
}

void RaftGroup::ReadBarrier(ProposeCallback done) {
  ++counters_.reads;
  if (raft_->role() != raft::Role::kLeader) {
    ++counters_.reads_failed;
    if (done) host_.loop_.Post([done = std::move(done)] { done({ProposeStatus::kNotLeader, 0}); });
    return;
  }
  Wake(true);
  const int64_t now = host_.loop_.NowMs();
  reads_.push_back(Read{std::move(done), now + config_.propose_timeout_ms});
  ServeReads(now);
}

// The lease says no other leader can have committed anything since the
// lease round; an entry of this term committed says this leader's commit
// index covers everything committed by earlier leaders; applied == commit
// says the machine holds all of it.
bool RaftGroup::ReadsServable(int64_t now) const {
  if (raft_->role() != raft::Role::kLeader || !raft_->HasLease(static_cast<uint64_t>(now))) return false;
  const raft::Index commit = raft_->commit();
  return raft_->log().TermAt(commit) == raft_->term() && applied_ >= commit;
}

void RaftGroup::ServeReads(int64_t now) {
  const bool leader = raft_->role() == raft::Role::kLeader;
  const bool servable = ReadsServable(now);
  while (!reads_.empty()) {
    Read& read = reads_.front();
    ProposeStatus status = ProposeStatus::kOk;
    if (!leader) {
      status = ProposeStatus::kNotLeader;
    } else if (!servable) {
      if (read.deadline_ms > now) return;  // in order: the oldest has the earliest deadline
      status = ProposeStatus::kTimeout;
    }
    if (status != ProposeStatus::kOk) ++counters_.reads_failed;
    if (read.done) {
      host_.loop_.Post([done = std::move(read.done), status, index = raft_->commit()] { done({status, index}); });
    }
    reads_.pop_front();
  }
}

void RaftGroup::Tick(int64_t now) {
  // Before raft's tick: a heartbeat it sends now would be answered after
  // the group went quiet, and the answer would wake it again.
  MaybeQuiesce(now);
  if (quiescent_) return;
  Enqueue(raft_->Tick(static_cast<uint64_t>(now)));
  for (auto it = forwarded_.begin(); it != forwarded_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    Fail(std::move(it->second.done), ProposeStatus::kTimeout);
    it = forwarded_.erase(it);
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.deadline_ms > now) {
      ++it;
      continue;
    }
    Answer(it->second, {ProposeStatus::kTimeout, it->first});
    it = waiting_.erase(it);
  }
  RetryParked(now);
  if (!reads_.empty()) ServeReads(now);
}

void RaftGroup::OnMessage(cluster::NodeId from, raft::Message message) {
  if (message.from != from || message.to != host_.self()) {
    ++counters_.bad_frames;
    return;
  }
  if (IsVoteRequest(message.type) &&
      (raft_->votes_barred() ||
       (config_.refuse_votes_when_empty && !bootstrapped_ && raft_->log().LastIndex() == 0))) {
    ++counters_.votes_refused;
    return;
  }
  ++counters_.messages_in;
  if (quiescent_) {
    Wake(LeaderLive());
    WakeLeader(from);
  }
  MarkBusy(message.type);
  const int64_t now = host_.loop_.NowMs();
  Enqueue(raft_->Step(message, static_cast<uint64_t>(now)));
  if (!parked_.empty()) RetryParked(now);
}

void RaftGroup::OnProposeRequest(cluster::NodeId from, ProposeRequest request) {
  Wake(LeaderLive());
  const int64_t now = host_.loop_.NowMs();
  last_busy_ms_ = now;
  if (AwaitingLease(now)) {
    ++counters_.proposals_parked;
    parked_.push_back(Parked{std::move(request.data), request.write_id, {}, from, request.request});
    return;
  }
  auto proposed = raft_->Propose(std::move(request.data), static_cast<uint64_t>(now), request.write_id);
  if (!proposed || proposed->held) {
    if (request.request == 0) return;
    const bool not_leader = !proposed ? proposed.error() == raft::Errc::kNotLeader : true;
    ProposeReply reply{config_.group, request.request,
                       not_leader ? ProposeStatus::kNotLeader : ProposeStatus::kRejected, 0,
                       raft_->leader()};
    host_.transport_.Send(from, kRaftProposed, EncodeProposeReply(reply));
    if (proposed) Enqueue(std::move(proposed->ready));
    return;
  }
  waiting_[proposed->index] =
      Waiting{proposed->term, {}, from, request.request, now + config_.propose_timeout_ms};
  Enqueue(std::move(proposed->ready));
}

void RaftGroup::OnProposeReply(const ProposeReply& reply) {
  auto it = forwarded_.find(reply.request);
  if (it == forwarded_.end()) return;  // timed out already
  ProposeCallback done = std::move(it->second.done);
  forwarded_.erase(it);
  if (reply.status != ProposeStatus::kOk) ++counters_.proposals_failed;
  if (done) host_.loop_.Post([done = std::move(done), reply] { done({reply.status, reply.index}); });
}

RaftHost::RaftHost(io::Loop& loop, cluster::Transport& transport, uint32_t tick_ms)
    : loop_(loop), transport_(transport), tick_ms_(tick_ms) {}

RaftHost::~RaftHost() { loop_.CancelTimer(tick_timer_); }

Expected<RaftGroup*, std::string> RaftHost::AddGroup(GroupConfig config, persistence::StorageEngine& engine,
                                                     StateMachine& machine) {
  const GroupId id = config.group;
  if (groups_.count(id) != 0) return MakeError(std::string("raft group already exists"));
  std::unique_ptr<RaftGroup> group(new RaftGroup(*this, std::move(config), engine, machine));
  if (auto started = group->Start(); !started) return MakeError(started.error().message);
  RaftGroup* out = group.get();
  groups_[id] = std::move(group);
  active_.insert(id);
  if (tick_timer_ == 0) ScheduleTick();
  return out;
}

RaftGroup* RaftHost::group(GroupId id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

void RaftHost::ScheduleTick() {
  tick_timer_ = loop_.AddTimer(tick_ms_, scope_.Guard([this] {
    const int64_t now = loop_.NowMs();
    // Quiescent groups are not in active_; a tick may quiesce (erase) the
    // group it runs, or wake others (insert), so walk a copy.
    const std::vector<GroupId> active(active_.begin(), active_.end());
    for (GroupId id : active) {
      RaftGroup* target = group(id);
      if (target != nullptr && !target->quiescent_) target->Tick(now);
    }
    ScheduleTick();
  }));
}

void RaftHost::OnFrame(cluster::NodeId from, uint8_t type, std::string_view body) {
  if (type == kRaftMessage) {
    auto decoded = DecodeMessage(body);
    RaftGroup* target = decoded ? group(decoded->group) : nullptr;
    if (!target) return void(++bad_frames_);
    target->OnMessage(from, std::move(decoded->message));
  } else if (type == kRaftPropose) {
    auto decoded = DecodeProposeRequest(body);
    RaftGroup* target = decoded ? group(decoded->group) : nullptr;
    if (!target) return void(++bad_frames_);
    target->OnProposeRequest(from, std::move(*decoded));
  } else if (type == kRaftProposed) {
    auto decoded = DecodeProposeReply(body);
    RaftGroup* target = decoded ? group(decoded->group) : nullptr;
    if (!target) return void(++bad_frames_);
    target->OnProposeReply(*decoded);
  } else if (type == kRaftQuiesce) {
    auto decoded = DecodeQuiesce(body);
    RaftGroup* target = decoded ? group(decoded->group) : nullptr;
    if (!target) return void(++bad_frames_);
    target->OnQuiesce(from, *decoded);
  } else if (type == kRaftWake) {
    auto decoded = DecodeWake(body);
    RaftGroup* target = decoded ? group(decoded->group) : nullptr;
    if (!target) return void(++bad_frames_);
    target->OnWakeRequest(*decoded);
  } else {
    ++bad_frames_;
  }
}

// ---- Quiescence (docs/raft.md, "Quiescence") ----

bool RaftGroup::LeaderLive() const {
  const raft::NodeId leader = raft_->leader();
  return leader != raft::kNoNode && leader <= 0xFFFF &&
         !host_.down_.contains(static_cast<cluster::NodeId>(leader));
}

// Heartbeats do not count: an idle group still heartbeats until it quiesces.
void RaftGroup::MarkBusy(raft::MessageType type) {
  using raft::MessageType;
  if (type == MessageType::kHeartbeat || type == MessageType::kHeartbeatResponse) return;
  last_busy_ms_ = host_.loop_.NowMs();
}

void RaftGroup::Wake(bool leader_live) {
  if (!quiescent_) return;
  quiescent_ = false;
  host_.active_.insert(config_.group);
  --host_.quiesce_.quiescent_now;
  ++host_.quiesce_.wakes;
  ++counters_.wakes;
  const int64_t now = host_.loop_.NowMs();
  woke_at_ms_ = now;
  last_busy_ms_ = now;
  Enqueue(raft_->Wake(static_cast<uint64_t>(now), leader_live));
}

bool RaftGroup::Idle() const {
  return queue_.empty() && !draining_ && waiting_.empty() && forwarded_.empty() && parked_.empty() &&
         reads_.empty();
}

void RaftGroup::EnterQuiescence() {
  quiescent_ = true;
  host_.active_.erase(config_.group);
  ++host_.quiesce_.quiescent_now;
}

// Leader: quiet for a heartbeat interval with nothing left to replicate.
// A follower without a link gets no notice: it is not ticked by us anyway,
// and when it is back its PreVote (or any message) wakes the group.
void RaftGroup::MaybeQuiesce(int64_t now) {
  if (!config_.quiesce || quiescent_ || raft_->role() != raft::Role::kLeader || !Idle()) return;
  if (now - last_busy_ms_ < static_cast<int64_t>(config_.raft.heartbeat_interval_ms)) return;
  const auto down = [this](raft::NodeId peer) {
    return peer <= 0xFFFF && host_.down_.contains(static_cast<cluster::NodeId>(peer));
  };
  if (!raft_->CanQuiesce(down)) return;
  const std::string body =
      EncodeQuiesce(QuiesceNotice{config_.group, raft_->term(), raft_->commit(), host_.self()});
  for (const auto& [peer, progress] : raft_->progress()) {
    if (peer > 0xFFFF) continue;
    const cluster::SendResult sent =
        host_.transport_.Send(static_cast<cluster::NodeId>(peer), kRaftQuiesce, body);
    if (sent == cluster::SendResult::kFull) {
      last_busy_ms_ = now;  // try again a heartbeat interval later
      return;
    }
    if (sent == cluster::SendResult::kQueued) {
      ++counters_.quiesce_notices_sent;
      ++host_.quiesce_.notices_sent;
    }
  }
  EnterQuiescence();
}

// A follower stops only when it holds exactly what the leader holds. On a
// mismatch it keeps (or starts) ticking, and when the notice comes from
// the leader of its term it asks that leader to wake at once (0x44), so
// they resynchronise in a round trip rather than after an election timeout.
void RaftGroup::OnQuiesce(cluster::NodeId from, const QuiesceNotice& notice) {
  const raft::Raft& raft = *raft_;
  const bool ours = config_.quiesce && notice.leader == from &&
                    raft.role() == raft::Role::kFollower && raft.term() == notice.term &&
                    raft.leader() == notice.leader;
  const bool matches = ours && raft.commit() == notice.commit &&
                       raft.log().LastIndex() == notice.commit && applied_ == notice.commit &&
                       Idle();
  if (!matches) {
    ++counters_.quiesce_notices_ignored;
    ++host_.quiesce_.notices_ignored;
    if (ours) {
      Wake(true);
      const std::string body = EncodeWake(WakeRequest{config_.group, raft.term()});
      if (host_.transport_.Send(from, kRaftWake, body) == cluster::SendResult::kQueued) {
        ++counters_.wake_requests_sent;
      }
    }
    return;
  }
  ++counters_.quiesce_notices_accepted;
  ++host_.quiesce_.notices_accepted;
  if (!quiescent_) EnterQuiescence();
}

// Woken by another node (a PreVote, say) while the leader is quiescent and
// live: without heartbeats this follower's election timer would fire and
// it would campaign against a healthy leader, so it asks for them.
void RaftGroup::WakeLeader(cluster::NodeId woken_by) {
  const raft::NodeId leader = raft_->leader();
  if (raft_->role() != raft::Role::kFollower || leader == woken_by || !LeaderLive()) return;
  const std::string body = EncodeWake(WakeRequest{config_.group, raft_->term()});
  if (host_.transport_.Send(static_cast<cluster::NodeId>(leader), kRaftWake, body) ==
      cluster::SendResult::kQueued) {
    ++counters_.wake_requests_sent;
  }
}

void RaftGroup::OnWakeRequest(const WakeRequest& request) {
  if (request.term == raft_->term() && raft_->role() == raft::Role::kLeader) Wake(true);
}

// A woken timestamp-mode leader has no lease until a quorum answers its
// wake heartbeats (one round trip): proposals wait for it instead of
// failing, for at most an election timeout.
bool RaftGroup::AwaitingLease(int64_t now) const {
  return config_.quiesce && config_.raft.mode == raft::Mode::kTimestamp &&
         raft_->role() == raft::Role::kLeader &&
         now < woke_at_ms_ + static_cast<int64_t>(config_.raft.election_timeout_ms) &&
         !raft_->HasLease(static_cast<uint64_t>(now));
}

void RaftGroup::RetryParked(int64_t now) {
  while (!parked_.empty() && !AwaitingLease(now)) {
    Parked parked = std::move(parked_.front());
    parked_.pop_front();
    if (parked.remote != 0) {
      ProposeRequest request{config_.group, parked.request, parked.id, std::move(parked.data)};
      OnProposeRequest(parked.remote, std::move(request));
    } else {
      ProposeHere(std::move(parked.data), parked.id, std::move(parked.local), now);
    }
  }
}

void RaftHost::OnPeerDown(cluster::NodeId node) {
  down_.insert(node);
  for (auto& [id, group] : groups_) {
    const raft::Raft& raft = group->raft();
    if (group->quiescent_ && raft.role() != raft::Role::kLeader && raft.leader() == node) {
      group->Wake(false);
    }
  }
}

void RaftHost::OnPeerUp(cluster::NodeId node) { down_.erase(node); }

}  // namespace estuary::meta
