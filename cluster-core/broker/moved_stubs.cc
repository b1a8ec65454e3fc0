// Stubs of moved sessions: the route gap of a move (docs/partitions.md,
// "Deliveries left behind by a move"; issue 29).
//
// When a session moves to another node, this node drops its copy when it
// hears of the new claim; the new node's routes for the session's
// subscriptions reach this node (and the publishers' nodes) later,
// through the metadata group, once the new node has read the session. A
// publish in between matched no subscriber and was acknowledged: lost for
// the session. So the dropped copy stays as a stub, out of the sessions:
// its plain subscriptions keep matching, what they match is handed on to
// the new node like the copy's own deliveries, and the publishers wait for
// the new node to hold it. The agent ends the stub once it has seen the
// new node's routes for all of the stub's filters here (and a grace for
// publishers' nodes that applied them later; their forwards come here
// until they see this node's routes go, which the metadata log orders
// after the new node's).
#include "cluster-core/broker/shard_broker.h"
#include "cluster-core/store/shard_store.h"
#include "model/topic.h"

namespace estuary::core {

void ShardBroker::RemoveMovedSession(Session* session, std::vector<Delivery> orphans) {
  bool plain = false;
  for (const auto& entry : session->subscriptions()) plain = plain || !IsSharedFilter(entry.first);
  if (!plain || cluster_ == nullptr) return RemoveSession(session, /*session_ended=*/false, std::move(orphans));
  const std::string client_id = session->client_id();
  EndMovedStub(client_id);  // an older stub of the id (it moved here and away again)
  ReleasePublishers(*session);
  // Shared subscriptions leave now, their groups with them: what the
  // groups hold for it goes to other members, as when a copy is removed.
  std::vector<std::string> shared;
  for (const auto& entry : session->subscriptions()) {
    if (IsSharedFilter(entry.first)) shared.push_back(entry.first);
  }
  for (const std::string& filter : shared) RemoveSubscription(session, filter);
  RedeliverShared(std::move(orphans), session);
  ShardMetrics::Sub(metrics_.queued_messages, session->queued_messages());
  ShardMetrics::Sub(metrics_.inflight_messages, session->inflight().size());
  ShardMetrics::Sub(metrics_.sessions);
  if (session->durable()) store_->DeleteSession(client_id);
  session->set_store(nullptr);  // nothing of the stub is written
  // What it held was handed on already (StaleDeliveries).
  (void)session->TakeDeliveries([](const Delivery&) { return true; }, /*inflight=*/true);
  session->MarkMovedStub();

  auto node = sessions_.extract(client_id);
  MovedStub& stub = moved_stubs_[client_id];
  stub.id = next_moved_stub_++;
  stub.session = std::move(node.mapped());
  ShardMetrics::Add(metrics_.moved_stubs);
  std::vector<std::string> filters;
  for (const auto& entry : stub.session->subscriptions()) filters.push_back(entry.first);
  cluster_->MovedStubOpened(config_.shard_id, client_id, stub.id, std::move(filters));
}

void ShardBroker::OfferToMovedStub(Session& session, Delivery delivery) {
  // At most once is not carried across a move (nor are a copy's own QoS 0
  // deliveries, StaleDeliveries).
  if (delivery.qos == QoS::kAtMostOnce || !delivery.message) return;
  auto it = moved_stubs_.find(session.client_id());
  if (it == moved_stubs_.end()) return;
  MovedStub& stub = it->second;
  ShardMetrics::Add(metrics_.moved_stub_deliveries);
  Delivery copy;
  copy.message = std::move(delivery.message);
  copy.qos = delivery.qos;
  copy.retain = delivery.retain;
  copy.subscription_ids = std::move(delivery.subscription_ids);
  stub.pending.push_back(std::move(copy));
  if (stubs_offered_.empty() || stubs_offered_.back() != &stub) stubs_offered_.push_back(&stub);
  if (moved_flush_scheduled_) return;
  moved_flush_scheduled_ = true;
  loop_.Post(scope_.Guard([this] {
    moved_flush_scheduled_ = false;
    FlushMovedStubs();
  }));
}

// Once per loop iteration: each stub's matched deliveries go to the agent
// in one hand-off, with the safe steps of the publishes that made them.
void ShardBroker::FlushMovedStubs() {
  for (auto& [client_id, stub] : moved_stubs_) {
    HandOnMovedStub(client_id, stub);
  }
}

void ShardBroker::HandOnMovedStub(const std::string& client_id, MovedStub& stub) {
  if (stub.pending.empty() && stub.tokens.empty()) return;
  std::vector<uint64_t> tokens = std::exchange(stub.tokens, {});
  cluster_->MovedStubDeliveries(config_.shard_id, client_id, std::exchange(stub.pending, {}),
                                scope_.Guard([this, tokens = std::move(tokens)] {
                                  for (uint64_t token : tokens) OnForwardSafe(token);
                                }));
}

void ShardBroker::EndMovedStub(const std::string& client_id, uint64_t stub_id) {
  auto it = moved_stubs_.find(client_id);
  if (it == moved_stubs_.end() || (stub_id != 0 && it->second.id != stub_id)) return;
  MovedStub& stub = it->second;
  HandOnMovedStub(client_id, stub);
  std::erase(stubs_offered_, &stub);
  std::unique_ptr<Session> session = std::move(stub.session);
  moved_stubs_.erase(it);
  RemoveAllSubscriptions(*session);  // its routes go with them
  ShardMetrics::Sub(metrics_.moved_stubs);
}

}  // namespace estuary::core
