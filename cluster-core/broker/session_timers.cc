// Deferred actions on sessions: will delay, session expiry, and (in
// shared_redelivery.cc and durable_recovery.cc) the shared-group
// redelivery delay and the timers a restart re-arms. Each is bound to the
// generation of the session it was armed for (issue 27): a session keyed
// by the same client id later (a clean start, an adopted copy) or the same
// session resumed since has another generation, and a late timer leaves it
// alone.
#include "cluster-core/broker/shard_broker.h"

namespace estuary::core {

std::function<void()> ShardBroker::BoundToGeneration(const Session& session, std::function<void(Session&)> action) {
  // The loop may outlive this broker (a test restarting a node's broker on
  // one loop): the action does nothing once the broker is gone.
  return scope_.Guard(
      [this, client_id = session.client_id(), generation = session.generation(), action = std::move(action)] {
        Session* current = FindSession(client_id);
        if (current == nullptr || current->generation() != generation) return;
        action(*current);
      });
}

void ShardBroker::ScheduleWill(Session& session, int64_t delay_ms) {
  loop_.AddTimer(delay_ms, BoundToGeneration(session, [this](Session& current) {
                   if (current.will()) PublishWill(current);
                 }));
}

void ShardBroker::ScheduleExpiry(Session& session, std::optional<int64_t> delay) {
  if (session.expiry_interval() == UINT32_MAX) return;
  const int64_t delay_ms = delay.value_or(int64_t{session.expiry_interval()} * 1000);
  loop_.AddTimer(delay_ms, BoundToGeneration(session, [this](Session& current) {
                   ShardMetrics::Add(metrics_.sessions_expired);
                   if (current.will()) PublishWill(current);  // the session ends: the will goes now
                   RemoveSession(&current, /*session_ended=*/true);
                 }));
}

// The connection attached to `session` (if any) loses it as taken over
// (MQTT 5: 0x8E); timers set for the session so far (will delay, expiry)
// no longer act.
void ShardBroker::DetachTakenOver(Session& session) {
  if (SessionSink* old = session.sink(); old != nullptr) {
    session.set_sink(nullptr);
    old->OnDetached(DetachReason::kTakenOver);
  }
  Renew(session);
}

}  // namespace estuary::core
