#include "cluster-core/broker/shard_broker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "base/hash.h"
#include "cluster-core/store/shard_store.h"
#include "model/topic.h"

namespace estuary::core {
namespace {

bool Expired(const Message& message, int64_t now_wall_ms) {
  return message.properties.expiry_at_ms && *message.properties.expiry_at_ms <= now_wall_ms;
}

// What places a session on a shard: the client id, except for an AMQP
// durable subscription ("\0amqp/<length>:<container-id>/<link name>",
// frontends/amqp/session/connection.h), which lives with its connection,
// on the shard of its container-id. A malformed one: the whole id.
std::string_view ShardKey(std::string_view client_id) {
  constexpr std::string_view kDurableAmqp("\0amqp/", 6);
  if (!client_id.starts_with(kDurableAmqp)) return client_id;
  const std::string_view rest = client_id.substr(kDurableAmqp.size());
  const size_t colon = rest.find(':');
  if (colon == 0 || colon == std::string_view::npos || colon > 9) return client_id;
  size_t length = 0;
  for (char c : rest.substr(0, colon)) {
    if (c < '0' || c > '9') return client_id;
    length = length * 10 + static_cast<size_t>(c - '0');
  }
  if (rest.size() - colon - 1 < length) return client_id;
  return rest.substr(colon + 1, length);
}

}  // namespace

bool IsNodeLocalTopic(std::string_view topic) { return topic.starts_with("$SYS/"); }

uint16_t ShardForClientId(std::string_view client_id, uint16_t shard_count) {
  if (shard_count <= 1) return 0;
  return static_cast<uint16_t>(base::Fnv1a32(ShardKey(client_id)) % shard_count);
}

uint16_t ShardForTopic(std::string_view topic, uint16_t shard_count) {
  return ShardForClientId(topic, shard_count);
}

ShardBroker::ShardBroker(ShardConfig config, io::Loop& loop, ShardLink& link, ShardMetrics& metrics)
    : config_(std::move(config)),
      loop_(loop),
      link_(link),
      metrics_(metrics),
      router_(config_.shard_id),
      pending_credits_(config_.shard_count),
      acknowledged_(config_.shard_count, 0) {}

ShardBroker::~ShardBroker() = default;

// --- sessions -------------------------------------------------------------

ShardBroker::AttachResult ShardBroker::Attach(const std::string& client_id, bool clean_start,
                                              SessionSink* sink) {
  if (!moved_stubs_.empty()) EndMovedStub(client_id);  // its client is back here
  Session* session = FindSession(client_id);
  if (session != nullptr) {
    DetachTakenOver(*session);  // cancels a pending will delay or expiry
    auto& will = session->will();
    if (will && (clean_start || will->delay_seconds == 0)) {
      PublishWill(*session);
    }
    will.reset();
    if (clean_start) {
      RemoveSession(session, /*session_ended=*/true);
      session = nullptr;
    }
  }
  const bool present = session != nullptr;
  if (session == nullptr) {
    auto owned = std::make_unique<Session>(client_id, NewGeneration());
    session = owned.get();
    session->set_store(store_.get());
    sessions_.emplace(client_id, std::move(owned));
    ShardMetrics::Add(metrics_.sessions);
  }
  session->set_sink(sink);
  session->set_disconnected_at_ms(0);  // written with the expiry the connection sets next
  return {session, present};
}

std::vector<Delivery> ShardBroker::TakenOverElsewhere(const std::string& client_id) {
  Session* session = FindSession(client_id);
  if (session == nullptr) return {};
  DetachTakenOver(*session);
  if (session->will()) PublishWill(*session);
  // A session on partitions moves with its client (its shared deliveries
  // go with it); any other ends here.
  const bool moves = session->durable() && cluster_ != nullptr && cluster_->SessionsOnPartitions();
  if (!moves) {
    RemoveSession(session, /*session_ended=*/true);
    return {};
  }
  std::vector<Delivery> stale = StaleDeliveries(*session);
  RemoveMovedSession(session, {});
  return stale;
}

void ShardBroker::Disconnect(Session* session, SessionSink* sink, bool publish_will) {
  if (session == nullptr || session->sink() != sink) return;  // taken over already
  session->set_sink(nullptr);
  ReleasePublishers(*session);  // an offline queue drops instead of pausing anyone
  Renew(*session);  // what was armed for the connection's time no longer acts
  auto& will = session->will();
  if (!publish_will) will.reset();
  if (session->expiry_interval() == 0) {
    if (will) PublishWill(*session);
    RemoveSession(session, /*session_ended=*/true);
    return;
  }
  if (will && will->delay_seconds == 0) PublishWill(*session);
  session->set_disconnected_at_ms(loop_.clock().WallMs());
  session->SaveRecord();
  if (will) ScheduleWill(*session, int64_t{will->delay_seconds} * 1000);
  ScheduleExpiry(*session);
  ScheduleSharedRedelivery(*session);
}

Session* ShardBroker::FindSession(const std::string& client_id) {
  auto it = sessions_.find(client_id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void ShardBroker::RemoveSession(Session* session, bool session_ended, std::vector<Delivery> orphans) {
  ReleasePublishers(*session);
  // Taken before the member leaves its groups (so the queue and in-flight
  // metrics below count what stays), sent once it has left them.
  if (session_ended) {
    std::vector<Delivery> own = TakeShared(*session, /*inflight=*/true, nullptr, /*keep_without_member=*/false);
    orphans.insert(orphans.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  }
  RemoveAllSubscriptions(*session);
  RedeliverShared(std::move(orphans), session);
  ShardMetrics::Sub(metrics_.queued_messages, session->queued_messages());
  ShardMetrics::Sub(metrics_.inflight_messages, session->inflight().size());
  ShardMetrics::Sub(metrics_.sessions);
  if (session->durable()) store_->DeleteSession(session->client_id());
  sessions_.erase(session->client_id());
}

void ShardBroker::RemoveAllSubscriptions(Session& session) {
  std::vector<std::string> filters;
  for (const auto& entry : session.subscriptions()) filters.push_back(entry.first);
  for (const auto& filter : filters) RemoveSubscription(&session, filter);
}

void ShardBroker::PublishWill(Session& session) {
  WillMessage will = std::move(*session.will());
  session.will().reset();
  session.SaveRecord();
  // The rules may have changed (SIGHUP) since CONNECT checked the topic.
  if (session.access() != nullptr && !session.access()->MayPublish(will.message->topic)) return;
  auto message = std::make_shared<Message>(*will.message);
  message->id = NextMessageId();
  if (will.expiry_interval) {
    message->properties.expiry_at_ms = loop_.clock().WallMs() + int64_t{*will.expiry_interval} * 1000;
  }
  Publish(std::move(message));
}

// --- publish --------------------------------------------------------------

MessageId ShardBroker::NextMessageId() {
  const uint64_t timestamp = hlc_.Now(static_cast<uint64_t>(loop_.clock().WallMs()));
  next_sequence_ = (next_sequence_ + 1) & 0xFFFFFF;
  const uint32_t sequence = (uint32_t{config_.shard_id} << 24) | next_sequence_;
  return MessageId{config_.node_id, timestamp, sequence};
}

void ShardBroker::Publish(MessagePtr message, std::function<void()> on_safe, FlowId flow,
                          std::function<void()> on_full) {
  current_publisher_ = FlowRef{config_.shard_id, flow};
  // A retained change older than the one held (another node's, raced) is
  // delivered but neither stored nor replicated: the newest wins everywhere.
  if (message->retain && retained_.Apply(message)) {
    if (store_ && ShardForTopic(message->topic, config_.shard_count) == config_.shard_id) {
      PersistRetained(*message);
    }
    metrics_.retained_messages.store(retained_.size(), std::memory_order_relaxed);
    Broadcast([message](ShardBroker& shard) { shard.ApplyRetained(message); });
  }
  Route(message, SafeWaiter{1, false, std::move(on_safe), std::move(on_full)}, flow, RouteScope{});
  current_publisher_ = FlowRef{};
}

void ShardBroker::DeliverFromNode(const MessagePtr& message, bool plain,
                                  const std::vector<std::string>& shared_keys, std::function<void()> on_safe) {
  // No flow: a remote publisher is paused by its own node's window. The
  // shard still names this one, where the safe steps come back to.
  current_publisher_ = FlowRef{config_.shard_id, 0};
  Route(message, SafeWaiter{1, false, std::move(on_safe), {}}, 0, RouteScope{true, plain, &shared_keys});
  current_publisher_ = FlowRef{};
}

void ShardBroker::Route(const MessagePtr& message, SafeWaiter safe, FlowId flow, const RouteScope& scope) {
  MatchResult& match = match_scratch_;
  match.Clear();
  stubs_offered_.clear();  // offers made outside a Route hold no publisher
  // A forward's topic was matched by its sender already: the second match
  // here goes through the router's cache (invalidated by every route change).
  if (scope.from_node) {
    router_.MatchCached(message->topic, match);
  } else {
    router_.Match(message->topic, match);
  }
  safe.full = scope.plain && DeliverLocal(message, match);
  const SharedRouting shared = DeliverShared(message, match, scope);
  const std::vector<std::pair<Destination, std::string>>& shared_forwards = shared.elsewhere;
  safe.full = safe.full || shared.full;
  std::vector<std::string> to_queues;
  if (!to_queues_.empty()) to_queues.swap(to_queues_);  // a nested Route finds its own empty
  // A forward from a node stays on this node; $SYS topics describe this
  // node and stay on it too.
  const bool node_local = scope.from_node || IsNodeLocalTopic(message->topic);
  auto in_scope = [&](Destination destination) { return !node_local || !IsNodeDestination(destination); };

  // One forward per destination with plain routes or a chosen shared group.
  // The vector is borrowed (no allocation per publish); a nested Route
  // would find it empty and allocate its own.
  std::vector<Destination> destinations = std::move(destinations_scratch_);
  destinations.clear();
  if (scope.plain) {
    for (Destination destination : match.remote) {
      if (in_scope(destination)) destinations.push_back(destination);
    }
  }
  const size_t plain_count = destinations.size();
  bool to_nodes = false;
  for (const auto& [destination, key] : shared_forwards) {
    if (std::find(destinations.begin(), destinations.end(), destination) == destinations.end()) {
      destinations.push_back(destination);
    }
  }
  bool to_shards = false;
  for (Destination destination : destinations) {
    to_nodes = to_nodes || IsNodeDestination(destination);
    to_shards = to_shards || !IsNodeDestination(destination);
  }
  // A retained message from a client (or a will) goes to its topic's
  // partition when the cluster keeps retained messages there.
  const bool to_partition = message->retain && !scope.from_node && cluster_ != nullptr &&
                            !IsNodeLocalTopic(message->topic) && cluster_->RetainedOnPartitions();
  // The publisher's acknowledgement waits for durable writes, for the
  // nodes it reached, (a forward from a node) for this node's other
  // shards it reached, and for the retained partition's commit (not with
  // replication.ack = "leader": this node's store is enough, the partition
  // gets it after), and (a publisher told of full queues) for the other
  // shards' word on theirs; with none of these it is given at once, below.
  const bool from_node_to_shards = scope.from_node && !destinations.empty();
  const bool wait_partition = to_partition && !config_.replication_ack_leader;
  const bool wait_shards = from_node_to_shards || (safe.on_full && to_shards);
  const uint64_t safe_token =
      safe.on_safe && (store_ || to_nodes || wait_shards || wait_partition || !to_queues.empty() ||
                       !stubs_offered_.empty())
          ? BeginSafe(std::move(safe))
          : 0;
  // Stubs of moved sessions it matched (moved_stubs.cc): the publisher
  // waits until the session's new node has it.
  for (MovedStub* stub : stubs_offered_) {
    if (safe_token == 0) break;
    AddSafeStep(safe_token);
    stub->tokens.push_back(safe_token);
  }
  stubs_offered_.clear();
  for (const std::string& key : to_queues) {
    if (safe_token != 0) AddSafeStep(safe_token);
    cluster_->AppendToGroupQueue(message, key, config_.shard_id, safe_token);
  }
  if (to_partition) {
    if (wait_partition && safe_token != 0) AddSafeStep(safe_token);
    cluster_->RetainedToPartition(message, config_.shard_id, wait_partition ? safe_token : 0);
  }
  for (size_t i = 0; i < destinations.size(); ++i) {
    std::vector<std::string> keys;
    for (const auto& [d, key] : shared_forwards) {
      if (d == destinations[i]) keys.push_back(key);
    }
    SendForward(destinations[i], message, i < plain_count, std::move(keys), flow, safe_token);
  }
  destinations_scratch_ = std::move(destinations);  // given back, with its capacity
  const bool wait_routes = message->retain && !scope.from_node;
  if (safe_token != 0) {
    if (store_) {
      AddSafeStep(safe_token);
      store_->WhenDurable([this, safe_token] { OnForwardSafe(safe_token); });
    }
    if (wait_routes) {
      AddSafeStep(safe_token);
      WhenRoutesVisible([this, safe_token] { OnForwardSafe(safe_token); });
    }
    OnForwardSafe(safe_token);  // the step Route itself held
  } else if (safe.on_safe) {
    std::function<void()> done = safe.full && safe.on_full ? std::move(safe.on_full) : std::move(safe.on_safe);
    if (wait_routes) {
      WhenRoutesVisible(std::move(done));
    } else {
      done();
    }
  }
}

void ShardBroker::SendForward(Destination destination, const MessagePtr& message, bool plain,
                              std::vector<std::string> keys, FlowId flow, uint64_t safe_token) {
  if (IsNodeDestination(destination) && cluster_ == nullptr) return;  // no agent: routes cannot exist
  ShardMetrics::Add(metrics_.forwards_out);
  ChargeForward(flow);
  const FlowRef publisher = current_publisher_;
  if (safe_token != 0) AddSafeStep(safe_token);
  if (IsNodeDestination(destination)) {
    cluster_->Forward(NodeOfDestination(destination),
                      NodeForward{message, plain, std::move(keys), config_.shard_id, safe_token, publisher});
    return;
  }
  link_.Post(static_cast<uint16_t>(destination),
             [message, plain, keys = std::move(keys), publisher, safe_token](ShardBroker& shard) {
               shard.DeliverForwarded(message, plain, keys, publisher, safe_token);
             });
}

bool ShardBroker::DeliverLocal(const MessagePtr& message, const MatchResult& match, uint16_t only_taken_from) {
  if (match.local.empty()) return false;
  bool full = false;
  std::vector<SubscriberRef>& refs = refs_scratch_;
  refs.assign(match.local.begin(), match.local.end());
  std::sort(refs.begin(), refs.end(),
            [](const SubscriberRef& a, const SubscriberRef& b) { return a.session < b.session; });
  const bool from_mqtt = message->origin.protocol == Protocol::kMqtt &&
                         message->origin.node == config_.node_id;
  const int64_t now_ms = only_taken_from != 0 ? loop_.clock().WallMs() : 0;
  for (size_t i = 0; i < refs.size();) {
    Session* session = refs[i].session;
    if (only_taken_from != 0 && session->taken_from(now_ms) != only_taken_from) {
      while (i < refs.size() && refs[i].session == session) ++i;
      continue;
    }
    Delivery delivery;
    bool wanted = false;
    for (; i < refs.size() && refs[i].session == session; ++i) {
      const SubscriptionOptions& options = *refs[i].options;
      if (options.no_local && from_mqtt && message->origin.client_id == session->client_id()) continue;
      const QoS qos = MinQoS(message->qos, options.max_qos);
      if (!wanted || qos > delivery.qos) delivery.qos = qos;
      if (options.retain_as_published && message->retain) delivery.retain = true;
      if (options.subscription_id != 0) delivery.subscription_ids.push_back(options.subscription_id);
      wanted = true;
    }
    if (!wanted) continue;
    delivery.message = message;
    if (only_taken_from != 0) ShardMetrics::Add(metrics_.replayed_delivered);
    full = Offer(*session, std::move(delivery)) || full;
  }
  return full;
}

bool ShardBroker::Offer(Session& session, Delivery delivery) {
  if (session.moved_stub()) {  // the route gap of a move (moved_stubs.cc): handed on
    OfferToMovedStub(session, std::move(delivery));
    return false;
  }
  const int64_t now_ms = loop_.clock().WallMs();
  // A session adopted from the partition (taken from a gone node, or
  // moved here) may get a message both from its publisher's replay or
  // another copy's hand-off and the usual way (or hold it already): once.
  if (session.remembering() && session.OfferedBefore(delivery.message->id, now_ms)) {
    ShardMetrics::Add(metrics_.replayed_duplicates_skipped);
    return false;
  }
  // --acl-file: a subscriber never gets a topic it may not read (a
  // wildcard subscription, a retained message, a shared group's share).
  if (ClientAccess* access = session.access()) {
    if (!access->MayReceive(delivery.message->topic)) return false;
    delivery.access_checked = true;
  }
  if (Expired(*delivery.message, now_ms)) {
    ShardMetrics::Add(metrics_.messages_dropped);
    return false;
  }
  const Session::EnqueueResult enqueued = session.Enqueue(std::move(delivery), config_.limits.session);
  if (enqueued.dropped_oldest != 0) {
    ShardMetrics::Sub(metrics_.queued_messages, enqueued.dropped_oldest);
    ShardMetrics::Add(metrics_.messages_dropped, enqueued.dropped_oldest);
    ShardMetrics::Add(metrics_.queue_full_dropped_oldest, enqueued.dropped_oldest);
  }
  if (!enqueued.queued) {
    ShardMetrics::Add(metrics_.messages_dropped);
    if (enqueued.full) ShardMetrics::Add(metrics_.queue_full_dropped);
    return enqueued.full;
  }
  ShardMetrics::Add(metrics_.queued_messages);
  SessionSink* sink = session.sink();
  if (sink == nullptr) return false;
  sink->OnDeliveriesReady();
  // Still queued after the connection took what it could: the subscriber
  // is slower than its publishers. Pause this publisher until it drains.
  if (current_publisher_.id != 0 && session.Congested(config_.limits.session) &&
      session.paused_publishers().insert(current_publisher_).second) {
    PauseFlow(current_publisher_);
  }
  return false;
}

// --- ingress flow control ---------------------------------------------------

FlowId ShardBroker::RegisterFlow(std::weak_ptr<PublisherFlow> flow) {
  const FlowId id = next_flow_++;
  flows_.emplace(id, std::move(flow));
  return id;
}

void ShardBroker::UnregisterFlow(FlowId id) {
  flows_.erase(id);
  forward_windows_.erase(id);
}

void ShardBroker::PauseFlow(const FlowRef& flow) {
  if (flow.shard == config_.shard_id) {
    PauseLocalFlow(flow.id);
    return;
  }
  const FlowId id = flow.id;
  link_.Post(flow.shard, [id](ShardBroker& shard) { shard.PauseLocalFlow(id); });
}

void ShardBroker::PauseLocalFlow(FlowId id) {
  auto it = flows_.find(id);
  if (it == flows_.end()) return;
  if (auto flow = it->second.lock()) flow->PauseIngress();
}

void ShardBroker::ResumeLocalFlow(FlowId id) {
  auto it = flows_.find(id);
  if (it == flows_.end()) return;
  if (auto flow = it->second.lock()) flow->ResumeIngress();
}

void ShardBroker::ReleasePublishers(Session& session) {
  std::set<FlowRef> paused;
  paused.swap(session.paused_publishers());
  for (const FlowRef& flow : paused) {
    if (flow.shard == config_.shard_id) {
      ResumeLocalFlow(flow.id);
    } else {
      const FlowId id = flow.id;
      link_.Post(flow.shard, [id](ShardBroker& shard) { shard.ResumeLocalFlow(id); });
    }
  }
}

void ShardBroker::OnDequeued(Session& session) {
  ShardMetrics::Sub(metrics_.queued_messages);
  if (!session.paused_publishers().empty() && session.Relieved(config_.limits.session)) {
    ReleasePublishers(session);
  }
}

// --- subscribe ------------------------------------------------------------

SubscribeOutcome ShardBroker::Subscribe(Session* session, const std::string& filter,
                                        const SubscriptionOptions& options) {
  auto& subscriptions = session->subscriptions();
  auto it = subscriptions.find(filter);
  const bool existed = it != subscriptions.end();
  if (session->durable()) store_->PutSubscription(session->client_id(), filter, options);
  if (existed) {
    it->second = options;  // the router points at this entry: updated in place
    return SubscribeOutcome::kReplaced;
  }
  it = subscriptions.emplace(filter, options).first;
  ShardMetrics::Add(metrics_.subscriptions);
  SubscriberRef ref{session, &it->second};
  if (IsSharedFilter(filter)) {
    auto shared = ParseSharedFilter(filter);
    if (shared) {
      ApplyLocalRouteChange(router_.AddLocal(shared->filter, SharedKey(shared->group, shared->filter), ref));
    }
  } else {
    ApplyLocalRouteChange(router_.AddLocal(filter, {}, ref));
  }
  return SubscribeOutcome::kAdded;
}

UnsubscribeOutcome ShardBroker::Unsubscribe(Session* session, const std::string& filter) {
  if (!RemoveSubscription(session, filter)) return UnsubscribeOutcome::kNotSubscribed;
  // Its queued (not yet sent) shared deliveries go to another member, if
  // one is left; those in flight are completed with this client
  // [MQTT-3.10.4-3] (and move only if its session ends before).
  if (IsSharedFilter(filter)) {
    if (auto shared = ParseSharedFilter(filter)) {
      const std::string key = SharedKey(shared->group, shared->filter);
      RedeliverShared(TakeShared(*session, /*inflight=*/false, &key, /*keep_without_member=*/true), session);
    }
  }
  return UnsubscribeOutcome::kRemoved;
}

bool ShardBroker::RemoveSubscription(Session* session, const std::string& filter) {
  auto& subscriptions = session->subscriptions();
  auto it = subscriptions.find(filter);
  if (it == subscriptions.end()) return false;
  if (IsSharedFilter(filter)) {
    auto shared = ParseSharedFilter(filter);
    if (shared) {
      ApplyLocalRouteChange(
          router_.RemoveLocal(shared->filter, SharedKey(shared->group, shared->filter), session));
    }
  } else {
    ApplyLocalRouteChange(router_.RemoveLocal(filter, {}, session));
  }
  subscriptions.erase(it);
  ShardMetrics::Sub(metrics_.subscriptions);
  if (session->durable()) store_->DeleteSubscription(session->client_id(), filter);
  return true;
}

void ShardBroker::DeliverRetained(Session* session, const std::string& filter,
                                  const SubscriptionOptions& options, SubscribeOutcome outcome) {
  if (IsSharedFilter(filter)) return;  // [MQTT-3.8.4 v5: not sent for shared subscriptions]
  if (options.retain_handling == RetainHandling::kNever ||
      (options.retain_handling == RetainHandling::kSendIfNew && outcome == SubscribeOutcome::kReplaced)) {
    return;
  }
  if (cluster_ != nullptr && !IsNodeLocalTopic(filter) && cluster_->RetainedOnPartitions()) {
    // Read from the partitions (docs/partitions.md): the messages follow
    // once the reads are answered, in the order of this session's
    // subscriptions, if the session still has the subscription then.
    auto read = std::make_shared<RetainedRead>();
    read->incarnation = session->incarnation();
    read->filter = filter;
    read->options = options;
    const std::string& client_id = session->client_id();
    retained_reads_[client_id].push_back(read);
    cluster_->ReadRetained(config_.shard_id, filter,
                           [read, client_id](ShardBroker& shard, std::optional<std::vector<MessagePtr>> messages) {
                             read->answered = true;
                             read->messages = std::move(messages);
                             shard.FlushRetainedReads(client_id);
                           });
    return;
  }
  OfferRetained(*session, LocalRetained(filter), options);
}

void ShardBroker::FlushRetainedReads(const std::string& client_id) {
  auto it = retained_reads_.find(client_id);
  if (it == retained_reads_.end()) return;
  auto& reads = it->second;
  while (!reads.empty() && reads.front()->answered) {
    std::shared_ptr<RetainedRead> read = std::move(reads.front());
    reads.pop_front();
    Session* session = FindSession(client_id);
    if (session == nullptr || session->incarnation() != read->incarnation ||
        !session->subscriptions().contains(read->filter)) {
      continue;
    }
    if (!read->messages) {
      ShardMetrics::Add(metrics_.retained_read_fallbacks);
      spdlog::warn("shard {}: retained messages for '{}' could not be read from the partitions in time; "
                   "this node's copy is used",
                   config_.shard_id, read->filter);
      OfferRetained(*session, LocalRetained(read->filter), read->options);
    } else {
      OfferRetained(*session, *read->messages, read->options);
    }
  }
  if (reads.empty()) retained_reads_.erase(it);
}

std::vector<MessagePtr> ShardBroker::LocalRetained(const std::string& filter) const {
  std::vector<MessagePtr> messages;
  retained_.Match(filter, [&](const MessagePtr& message) { messages.push_back(message); });
  return messages;
}

void ShardBroker::OfferRetained(Session& session, const std::vector<MessagePtr>& messages,
                                const SubscriptionOptions& options) {
  const int64_t now = loop_.clock().WallMs();
  for (const MessagePtr& message : messages) {
    if (Expired(*message, now)) continue;
    Delivery delivery;
    delivery.message = message;
    delivery.qos = MinQoS(message->qos, options.max_qos);
    delivery.retain = true;
    if (options.subscription_id != 0) delivery.subscription_ids.push_back(options.subscription_id);
    Offer(session, std::move(delivery));
  }
}

void ShardBroker::ApplyLocalRouteChange(const std::optional<RouteUpdate>& update) {
  if (!update) return;
  if (cluster_ != nullptr) cluster_->RouteChanged(*update);
  if (config_.shard_count <= 1) return;
  RouteUpdate copy = *update;
  Broadcast([copy](ShardBroker& shard) { shard.ApplyRouteUpdate(copy); });
}

// --- cross-shard ----------------------------------------------------------

void ShardBroker::Broadcast(std::function<void(ShardBroker&)> work) {
  if (config_.shard_count <= 1) return;
  const uint64_t sequence = ++broadcast_sequence_;
  const uint16_t from = config_.shard_id;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (shard == from) continue;
    link_.Post(shard, [work, from, sequence](ShardBroker& target) {
      work(target);
      const uint16_t by = target.config_.shard_id;
      // Acknowledged once durable there (a retained message it stores).
      target.AfterDurable([&target, by, from, sequence] {
        target.link_.Post(from, [by, sequence](ShardBroker& origin) {
          origin.OnBroadcastApplied(by, sequence);
        });
      });
    });
  }
}

void ShardBroker::OnBroadcastApplied(uint16_t from_shard, uint64_t sequence) {
  acknowledged_[from_shard] = std::max(acknowledged_[from_shard], sequence);
  uint64_t visible = broadcast_sequence_;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (shard != config_.shard_id) visible = std::min(visible, acknowledged_[shard]);
  }
  while (!waiting_for_routes_.empty() && waiting_for_routes_.front().first <= visible) {
    auto done = std::move(waiting_for_routes_.front().second);
    waiting_for_routes_.pop_front();
    done();
  }
}

void ShardBroker::WhenRoutesVisible(std::function<void()> done) {
  if (store_) {
    // A SUBSCRIBE is answered once its subscription is durable here too.
    done = [this, inner = std::move(done)]() mutable { AfterDurable(std::move(inner)); };
  }
  uint64_t visible = broadcast_sequence_;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (shard != config_.shard_id) visible = std::min(visible, acknowledged_[shard]);
  }
  if (visible >= broadcast_sequence_) {
    done();
    return;
  }
  waiting_for_routes_.emplace_back(broadcast_sequence_, std::move(done));
}

void ShardBroker::ApplyRouteUpdate(const RouteUpdate& update) { router_.ApplyRemote(update); }

void ShardBroker::ReplaceRoutesOf(Destination destination,
                                  const std::vector<std::pair<std::string, std::string>>& routes) {
  router_.ForgetDestination(destination);
  for (const auto& [filter, key] : routes) router_.ApplyRemote(RouteUpdate{true, filter, key, destination});
}

void ShardBroker::ApplyRetained(const MessagePtr& message) {
  // A retained message from another node moves this clock past it, so a
  // later change made here is newer everywhere (the cluster keeps the newest).
  if (message->id.node != config_.node_id) {
    hlc_.Update(static_cast<uint64_t>(loop_.clock().WallMs()), message->id.timestamp);
  }
  if (!retained_.Apply(message)) return;  // a newer change is held
  if (store_ && ShardForTopic(message->topic, config_.shard_count) == config_.shard_id) {
    PersistRetained(*message);
  }
  metrics_.retained_messages.store(retained_.size(), std::memory_order_relaxed);
}

void ShardBroker::DeliverForwarded(const MessagePtr& message, bool match_plain,
                                   const std::vector<std::string>& shared_keys, FlowRef publisher,
                                   uint64_t safe_token) {
  current_publisher_ = publisher;
  bool full = false;
  if (match_plain) {
    MatchResult& match = match_scratch_;
    match.Clear();
    router_.MatchCached(message->topic, match);  // matched by the sending shard already
    full = DeliverLocal(message, match);
  }
  for (const std::string& key : shared_keys) {
    SharedGroup* group = router_.FindSharedGroup(key);
    if (group == nullptr || group->members.empty()) {
      RerouteSharedToShard(message, key);  // the group left this shard meanwhile
      continue;
    }
    full = DeliverToShared(*group, message) || full;
  }
  current_publisher_ = FlowRef{};
  CreditForward(publisher);
  if (safe_token != 0) {
    const uint16_t origin = publisher.shard;
    AfterDurable([this, origin, safe_token, full] {
      link_.Post(origin, [safe_token, full](ShardBroker& shard) { shard.OnForwardSafe(safe_token, full); });
    });
  }
}

void ShardBroker::ChargeForward(FlowId flow) {
  if (flow == 0) return;
  ForwardWindow& window = forward_windows_[flow];
  if (++window.outstanding >= kForwardWindow && !window.paused) {
    window.paused = true;
    PauseLocalFlow(flow);
  }
}

void ShardBroker::CreditForward(const FlowRef& publisher) {
  if (publisher.id == 0) return;
  auto& credits = pending_credits_[publisher.shard];
  if (!credits.empty() && credits.back().first == publisher.id) {
    ++credits.back().second;
  } else {
    credits.emplace_back(publisher.id, 1);
  }
  if (credit_flush_scheduled_) return;
  credit_flush_scheduled_ = true;
  loop_.Post(  // guarded: the loop may outlive this broker
      scope_.Guard([this] { FlushForwardCredits(); }));
}

void ShardBroker::FlushForwardCredits() {
  credit_flush_scheduled_ = false;
  for (uint16_t shard = 0; shard < config_.shard_count; ++shard) {
    if (pending_credits_[shard].empty()) continue;
    std::vector<std::pair<FlowId, uint32_t>> credits;
    credits.swap(pending_credits_[shard]);
    link_.Post(shard, [credits = std::move(credits)](ShardBroker& origin) {
      origin.OnForwardsDelivered(credits);
    });
  }
}

void ShardBroker::OnForwardsDelivered(const std::vector<std::pair<FlowId, uint32_t>>& credits) {
  for (const auto& [flow, count] : credits) {
    auto it = forward_windows_.find(flow);
    if (it == forward_windows_.end()) continue;
    ForwardWindow& window = it->second;
    window.outstanding -= std::min(window.outstanding, count);
    if (window.paused && window.outstanding <= kForwardWindow / 2) {
      window.paused = false;
      ResumeLocalFlow(flow);
    }
  }
}

void ShardBroker::Housekeeping() {
  retained_.ExpireBefore(loop_.clock().WallMs());
  metrics_.retained_messages.store(retained_.size(), std::memory_order_relaxed);
}

}  // namespace estuary::core
