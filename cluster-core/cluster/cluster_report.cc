// ClusterAgent's observation pages: /api/cluster/routes and the
// estuary_cluster_* series of /metrics.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cluster-core/cluster/cluster_agent.h"

namespace estuary::cluster {
namespace {

nlohmann::json RouteJson(const std::string& filter, const std::string& shared_key) {
  nlohmann::json route = {{"filter", filter}};
  if (!shared_key.empty()) route["share"] = shared_key.substr(0, shared_key.find('\0'));
  return route;
}

}  // namespace

std::string ClusterAgent::RoutesJson() const {
  nlohmann::json local = nlohmann::json::array();
  for (const auto& [key, shards] : local_routes_) {
    auto route = RouteJson(key.first, key.second);
    route["shards"] = shards;
    local.push_back(std::move(route));
  }
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& [node, peer] : peers_) {
    nlohmann::json routes = nlohmann::json::array();
    if (auto it = remote_routes_.find(node); it != remote_routes_.end()) {
      for (const auto& [filter, key] : it->second) routes.push_back(RouteJson(filter, key));
    }
    peers.push_back({{"node", node},
                     {"link", peer.up ? "up" : (peer.known ? "down" : "gone")},
                     {"held_frames", peer.held.size()},
                     {"held_bytes", peer.held_bytes},
                     {"routes", std::move(routes)}});
  }
  const ClusterCounters& c = counters();
  nlohmann::json out = {
      {"node", config_.self},
      {"local_routes", std::move(local)},
      {"peers", std::move(peers)},
      {"forwards", {{"out", c.forwards_out}, {"in", c.forwards_in}, {"dropped", c.forwards_dropped},
                    {"expired", c.forwards_expired}, {"parked_again", c.forwards_parked_again},
                    {"held", c.forwards_held}, {"parked", c.forwards_parked},
                    {"replayed", c.forwards_replayed}, {"resent", c.forwards_resent},
                    {"copies_in", c.forward_copies_in}, {"dedup_entries", forward_dedup_.size()},
                    {"replays_awaiting_safe", replays_out_.size()},
                    {"replays_sent_again", c.replays_sent_again}, {"replays_redirected", c.replays_redirected},
                    {"replays_in", c.replays_in},
                    {"replays_held", c.replays_held},
                    {"awaiting_safe", pending_forwards_.size()}}},
  };
  return out.dump();
}

std::string ClusterAgent::MetricsText() const {
  std::string out;
  const NodeId n = config_.self;
  auto series = [&](const char* name, const char* type, const char* help, uint64_t value) {
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n{}{{node=\"{}\"}} {}\n", name, help,
                   name, type, name, n, value);
  };
  const ClusterCounters& c = counters();
  series("estuary_cluster_forwards_out_total", "counter", "Publishes forwarded to other nodes.", c.forwards_out);
  series("estuary_cluster_forwards_in_total", "counter", "Publishes received from other nodes.", c.forwards_in);
  series("estuary_cluster_forwards_dropped_total", "counter",
         "Forwards dropped: QoS 0 without a link, over the held bound, or held past the deadline.",
         c.forwards_dropped);
  series("estuary_cluster_forwards_expired_total", "counter",
         "QoS 1/2 forwards not confirmed by the deadline while their node was not unreachable (parked, never "
         "acknowledged without a confirmation).",
         c.forwards_expired);
  series("estuary_cluster_forwards_parked_again_total", "counter",
         "Parked QoS 1/2 forwards past the park timeout: sent again if the link was up, else parked once more.",
         c.forwards_parked_again);
  series("estuary_cluster_forwards_parked", "gauge",
         "QoS 1/2 forwards past their deadline waiting for an unreachable node to come back or be declared gone.",
         c.forwards_parked);
  series("estuary_cluster_forwards_replayed_total", "counter",
         "QoS 1/2 forwards a gone node never confirmed, sent again to the nodes that took over its sessions.",
         c.forwards_replayed);
  series("estuary_cluster_forwards_resent_total", "counter",
         "QoS 1/2 forwards sent again on a new link: the link they went out on was lost before their confirmation.",
         c.forwards_resent);
  series("estuary_cluster_forward_copies_in_total", "counter",
         "QoS 2 forwards received again after a lost link, confirmed without a second delivery.",
         c.forward_copies_in);
  series("estuary_cluster_forward_dedup_evicted_total", "counter",
         "QoS 2 forward records dropped before their window ended (the bound of 1,000,000 was reached).",
         forward_dedup_.evicted());
  series("estuary_cluster_replays_sent_again_total", "counter",
         "Replayed forwards sent again to a node that had not confirmed them: on a new link, or every replay "
         "timeout while linked (never acknowledged without every confirmation).",
         c.replays_sent_again);
  series("estuary_cluster_replays_redirected_total", "counter",
         "Replayed forwards whose target was declared gone before confirming, made again for the nodes that take "
         "its sessions over.",
         c.replays_redirected);
  series("estuary_cluster_replays_in_total", "counter", "Replayed forwards received (this node's own included).",
         c.replays_in);
  series("estuary_cluster_replays_held", "gauge",
         "Replayed forwards waiting here for this node's takeover of the gone node's sessions.", c.replays_held);
  series("estuary_cluster_forwards_held", "gauge", "Forwards held for peers whose link is down or full.",
         c.forwards_held);
  series("estuary_cluster_group_appends_total", "counter",
         "Messages of partitioned shared groups appended to their queues (their publishers acknowledged).",
         c.group_appends);
  series("estuary_cluster_group_append_retries_total", "counter",
         "Appends to partitioned groups' queues made again (not committed, or the queue full).",
         c.group_append_retries);
  series("estuary_cluster_group_appends_dropped_total", "counter",
         "Messages of partitioned groups not appended by the deadline (their publishers released).",
         c.group_appends_dropped);
  series("estuary_cluster_group_assigns_total", "counter",
         "Partitioned groups' queues this node recorded itself as the consumer of (Assign committed).", c.group_assigns);
  series("estuary_cluster_group_pulls_total", "counter",
         "Credit grants (pull frames) this node sent to the leaders of the queues it consumes.", c.group_pulls);
  series("estuary_cluster_group_pushed_total", "counter",
         "Queue messages this node pushed to their consumers as the queues' partition leader.", c.group_pushed);
  series("estuary_cluster_group_repushed_total", "counter",
         "Of those, pushed again (a lost link, a new consumer, not acknowledged in 10 s).", c.group_repushed);
  series("estuary_cluster_group_push_in_flight", "gauge",
         "Queue messages this node pushed as their partition's leader whose Ack has not applied (each tick).",
         c.group_push_in_flight);
  series("estuary_cluster_older_binary_peers", "gauge",
         "Nodes linked with (and not left) whose link minor is below this binary's: below 1 they reject delivery "
         "records with a shared group's key (written without it), below 2 they apply no queue hands (partitioned "
         "groups deliver QoS 2 at least once), below 3 takeover claims are unguarded, below 4 they take no session "
         "hand-offs (docs/internode.md).",
         c.older_binary_peers);
  series("estuary_cluster_group_push_duplicates_total", "counter",
         "Pushed queue messages this node already held or had acknowledged (dropped).", c.group_push_duplicates);
  series("estuary_cluster_group_handed_off_total", "counter",
         "Queue messages given to members on this node.", c.group_handed_off);
  series("estuary_cluster_group_acked_total", "counter",
         "Queue messages removed once a member's session here held them.", c.group_acked);
  series("estuary_cluster_group_queues_consumed", "gauge", "Partitioned groups' queues this node consumes.",
         c.group_queues_consumed);
  series("estuary_cluster_group_hands_total", "counter",
         "QoS 2 queue messages recorded as handed to a durable member session on this node before the put.",
         c.group_hands);
  series("estuary_cluster_group_hands_refused_total", "counter",
         "Hands refused: another consumer's member holds the message, or it left the queue.", c.group_hands_refused);
  series("estuary_cluster_group_unhands_total", "counter",
         "Handed messages handed back: the put failed (the member session went).", c.group_unhands);
  series("estuary_cluster_group_settles_total", "counter",
         "Settle commands committed for member sessions that arrived on this node.", c.group_settles);
  series("estuary_cluster_group_settled_removed_total", "counter",
         "Messages handed elsewhere that an arrived session held: removed from their queue.", c.group_settled_removed);
  series("estuary_cluster_group_settled_handed_back_total", "counter",
         "Messages handed elsewhere that an arrived session did not hold: back in their queue.",
         c.group_settled_handed_back);
  series("estuary_cluster_group_hand_releases_forced_total", "counter",
         "Handed deliveries sent to their client before their Ack committed (30 s passed).",
         c.group_hand_releases_forced);
  series("estuary_cluster_forwards_awaiting_safe", "gauge", "Forwards waiting for the receiving node's confirmation.",
         pending_forwards_.size());
  series("estuary_cluster_local_routes", "gauge", "Node-level routes this node announces.", local_routes_.size());
  series("estuary_cluster_remote_routes", "gauge", "Routes held for other nodes.", remote_route_count());
  series("estuary_cluster_route_changes_out_total", "counter", "Route changes sent to peers.", c.route_changes_out);
  series("estuary_cluster_client_claims_total", "counter", "Client-id claims proposed to the registry.",
         c.client_claims);
  series("estuary_cluster_client_claims_failed_total", "counter",
         "Client-id claims not committed in time (their CONNECT was refused).", c.client_claims_failed);
  const services::RetainedCounters retained = retained_ ? retained_->counters() : services::RetainedCounters{};
  series("estuary_cluster_retained_writes_total", "counter", "Retained messages written to their partitions.",
         retained.writes);
  series("estuary_cluster_retained_write_retries_total", "counter",
         "Retained partition writes attempted again after a failure.", retained.write_retries);
  series("estuary_cluster_retained_writes_pending", "gauge",
         "Retained partition writes not committed yet (their publishers wait).", retained.writes_pending);
  series("estuary_cluster_retained_writes_dropped_total", "counter",
         "QoS 0 retained messages kept on this node only: 65536 partition writes were pending.",
         retained.writes_dropped);
  series("estuary_cluster_retained_reads_total", "counter", "SUBSCRIBEs whose retained messages were read from partitions.",
         retained.reads);
  series("estuary_cluster_retained_reads_failed_total", "counter",
         "Retained partition reads not answered in time (the shard used its own copy).", retained.reads_failed);
  series("estuary_cluster_session_writes_total", "counter",
         "Write entries of persistent-session changes proposed to partitions.", c.session_writes);
  series("estuary_cluster_session_write_retries_total", "counter",
         "Session partition writes attempted again after a failure.", c.session_write_retries);
  series("estuary_cluster_session_batches_pending", "gauge",
         "Shard batches of session changes not replicated yet (their publishers wait).", c.session_batches_pending);
  series("estuary_cluster_session_writes_refused_total", "counter",
         "Client session changes a partition refused: another node serves the session now.",
         c.session_writes_refused);
  series("estuary_cluster_session_writes_stale_total", "counter",
         "Client session changes of a copy this node had replaced (read back or started anew), dropped by the "
         "partition's copy fence.",
         c.session_writes_stale);
  series("estuary_cluster_session_handoffs_total", "counter",
         "Hand-offs sent: deliveries a moved session held here, not on its partition yet, sent to its new node.",
         c.session_handoffs);
  series("estuary_cluster_session_handoff_deliveries_total", "counter", "Deliveries in those hand-offs.",
         c.session_handoff_deliveries);
  series("estuary_cluster_session_handoffs_unowned_total", "counter",
         "Hand-offs not sent: no node served the session any more (it had ended).", c.session_handoffs_unowned);
  series("estuary_cluster_session_handoffs_failed_total", "counter",
         "Hand-offs given up: no node took them in any attempt (their deliveries are lost for the session).",
         c.session_handoffs_failed);
  series("estuary_cluster_session_handoffs_in_total", "counter",
         "Hand-offs received from a moved session's previous node and taken by the session here.",
         c.session_handoffs_in);
  series("estuary_cluster_moved_stub_handoffs_total", "counter",
         "Hand-offs of what a moved session's stub matched here before its new node's routes were seen.",
         c.moved_stub_handoffs);
  series("estuary_cluster_moved_stubs_opened_total", "counter",
         "Stubs of sessions that moved away, kept matching until their new node's routes were seen here.",
         moved_stubs_->counters().opened);
  series("estuary_cluster_moved_stubs_timed_out_total", "counter",
         "Stubs ended after 30 s without their new node's routes seen here.", moved_stubs_->counters().ended_timeout);
  series("estuary_cluster_session_loads_total", "counter",
         "Sessions read from their partition for a CONNECT that took the client id over.", c.session_loads);
  series("estuary_cluster_session_loads_failed_total", "counter",
         "Session reads not answered in time (the CONNECT was refused).", c.session_loads_failed);
  series("estuary_cluster_sessions_taken_over_total", "counter",
         "Persistent sessions of a gone node claimed and served here until their client returns.",
         c.sessions_taken_over);
  series("estuary_cluster_session_takeovers_failed_total", "counter",
         "Listings, claims or reads of a gone node's sessions that did not succeed.", c.session_takeovers_failed);
  series("estuary_cluster_recovered_sessions_stale_total", "counter",
         "Sessions recovered from this node's store that another node served by then (dropped here).",
         c.recovered_sessions_stale);
  series("estuary_cluster_client_takeovers_out_total", "counter",
         "Committed claims that told another node to close the client's connection.", c.client_takeovers_out);
  series("estuary_cluster_takeovers_total", "counter", "Sessions ended here because their client attached elsewhere.",
         c.takeovers_in);
  out += "# HELP estuary_cluster_peer_up Whether the link to a peer is up.\n# TYPE estuary_cluster_peer_up gauge\n";
  for (const auto& [node, peer] : peers_) {
    fmt::format_to(std::back_inserter(out), "estuary_cluster_peer_up{{node=\"{}\",peer=\"{}\"}} {}\n", n, node,
                   peer.up ? 1 : 0);
  }
  if (meta_) out += meta_->MetricsText();              // estuary_meta_*
  if (partitions_) out += partitions_->MetricsText();  // estuary_partition_*
  return out;
}

}  // namespace estuary::cluster
