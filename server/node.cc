#include "server/node.h"
#include "server/dashboard/assets.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "persistence/memory_engine.h"
#include "server/config_addresses.h"
#include "server/storage.h"

namespace estuary::server {
namespace {

amqp::AmqpSettings AmqpSettingsFor(const NodeConfig& config) {
  amqp::AmqpSettings settings;
  settings.container_id = fmt::format("estuary-node-{}", config.node_id);
  settings.idle_timeout_ms = config.amqp_idle_timeout_ms;
  settings.max_frame_size = config.amqp_max_frame_size;
  settings.max_links = config.amqp_max_links;
  settings.link_credit = config.amqp_credit;
  return settings;
}

// The abuse limits (docs/security.md "Abuse limits"); null when none is set,
// so that the accept path skips them altogether.
std::unique_ptr<ConnectionGuard> MakeGuard(const NodeConfig& config) {
  ConnectionGuardSettings settings;
  settings.address.max_connections_per_address = config.abuse.max_connections_per_ip;
  settings.address.connect_rate_per_address = config.abuse.connect_rate_per_ip;
  // Authentication can fail only against a password file.
  settings.address.auth_backoff_ms = config.password_file.empty() ? 0 : config.abuse.auth_backoff_ms;
  settings.address.auth_failures_before_backoff = config.abuse.auth_failures_before_backoff;
  settings.address.auth_backoff_max_ms = config.abuse.auth_backoff_max_ms;
  // Entries with open connections are never evicted: room for all of them.
  settings.address.max_addresses = std::max<size_t>(65'536, config.limits.max_connections);
  settings.max_pending = config.abuse.max_pending_connections;
  auto guard = std::make_unique<ConnectionGuard>(settings, io::SystemClock::Instance());
  if (!guard->enabled()) return nullptr;
  return guard;
}

}  // namespace

Node::Node(NodeConfig config) : config_(std::move(config)) {
  shared_.max_connections = config_.limits.max_connections;
  shared_.guard = MakeGuard(config_);
  shared_.proxy_from = config_.proxy_from;
  shared_.connect_timeout_ms = config_.connect_timeout_ms;
  for (uint16_t i = 0; i < config_.shards; ++i) {
    metrics_.push_back(std::make_unique<core::ShardMetrics>());
    core::ShardConfig shard;
    shard.node_id = config_.node_id;
    shard.shard_id = i;
    shard.shard_count = config_.shards;
    shard.limits = config_.limits;
    shard.shared = config_.shared_subscriptions;
    shard.replication_ack_leader = config_.replication_ack == "leader";
    shards_.push_back(std::make_unique<ShardRuntime>(shard, *this, *metrics_.back(), shared_));
  }
  for (auto& shard : shards_) {
    // A TLS session (and a WebSocket one) moves with its socket, as the Proton objects do: the
    // old shard no longer touches it once sent (the mailbox orders the
    // handover; docs/architecture.md "TLS connections and shards").
    shard->set_handoff([this](uint16_t target, ClientStream::Detached detached, std::string received,
                              ConnectionGuard::TicketPtr admission) {
      ShardRuntime* to = shards_[target].get();
      to->loop().mailbox().Send([to, detached = std::move(detached), received = std::move(received),
                                 admission = std::move(admission)]() mutable {
        to->AdoptMqtt(std::move(detached), std::move(received), std::move(admission));
      });
    });
    shard->set_amqp_handoff([this](uint16_t target, ClientStream::Detached detached,
                                   std::shared_ptr<amqp::AmqpConnection> connection,
                                   ConnectionGuard::TicketPtr admission) {
      ShardRuntime* to = shards_[target].get();
      to->loop().mailbox().Send([to, detached = std::move(detached), connection = std::move(connection),
                                 admission = std::move(admission)]() mutable {
        to->AdoptAmqp(std::move(detached), std::move(connection), std::move(admission));
      });
    });
  }
}

Node::~Node() {
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  admin_.reset();
  cluster_listener_.reset();
  if (transport_) transport_->set_dial_observer(nullptr);  // it calls the agent's membership
  if (agent_ && agent_->membership()) agent_->membership()->set_bootstrap_hooks(nullptr, nullptr);
  bootstrap_gate_.reset();
  agent_.reset();
  transport_.reset();
}

void Node::Post(uint16_t shard, std::function<void(core::ShardBroker&)> work) {
  ShardRuntime* to = shards_[shard].get();
  to->loop().mailbox().Send([to, work = std::move(work)] { work(to->broker()); });
}

Expected<void, std::string> Node::Start() {
  started_ms_ = io::SystemClock::Instance().NowMs();
  if (!config_.password_file.empty()) {
    auto loaded = PasswordFileAuthenticator::Load(config_.password_file);
    if (!loaded) return MakeError(loaded.error());
    authenticator_ = std::move(*loaded);
    shared_.authenticator = authenticator_.get();
    if (shared_.guard && shared_.guard->auth_backoff()) {
      // Failures slow their address down (docs/security.md "Abuse limits").
      guarded_authenticator_ = std::make_unique<GuardedAuthenticator>(*authenticator_, *shared_.guard);
      shared_.authenticator = guarded_authenticator_.get();
    }
  }
  if (!config_.acl_file.empty()) {
    auto loaded = AclAuthorizer::Load(config_.acl_file);
    if (!loaded) return MakeError(loaded.error());
    authorizer_ = std::move(*loaded);
    shared_.authorizer = authorizer_.get();
  }
  if (!config_.admin_token_file.empty()) {
    auto token = io::AdminToken::Load(config_.admin_token_file);
    if (!token) return MakeError("--admin-token-file " + token.error());
    admin_token_ = std::move(*token);
  }
  if (!config_.tls.cert_file.empty()) {
    auto tls = io::TlsContext::Create(config_.tls);
    if (!tls) return MakeError(tls.error());
    shared_.tls = std::move(*tls);
    shared_.tls_handshake_timeout_ms = config_.tls_handshake_timeout_ms;
    shared_.tls_identity_as_username = config_.tls_identity_as_username;
  }
  if (!config_.cluster_tls.cert_file.empty()) {
    auto tls = io::TlsContext::CreatePeer(config_.cluster_tls);
    if (!tls) return MakeError(tls.error());
    cluster_tls_ = std::move(*tls);
  }
  SetUpCluster();
  if (auto storage = OpenStorage(); !storage) return storage;
  // Shard 0 binds first so that port 0 resolves; the others share its port.
  io::Endpoint mqtt = config_.mqtt;
  for (auto& shard : shards_) {
    auto port = shard->ListenMqtt(mqtt);
    if (!port) return MakeError(fmt::format("mqtt listener {}: {}", mqtt.ToString(), port.error()));
    mqtt.port = *port;
  }
  mqtt_port_ = mqtt.port;
  io::Endpoint amqp_endpoint = config_.amqp;
  for (auto& shard : shards_) {
    auto port = shard->ListenAmqp(amqp_endpoint, AmqpSettingsFor(config_));
    if (!port) return MakeError(fmt::format("amqp listener {}: {}", amqp_endpoint.ToString(), port.error()));
    amqp_endpoint.port = *port;
  }
  amqp_port_ = amqp_endpoint.port;
  if (auto tls = StartTlsListeners(); !tls) return tls;
  if (auto ws = StartWebSocketListeners(); !ws) return ws;
  auto admin = io::HttpServer::Start(shards_[0]->loop(), config_.admin,
                                     [this](const std::string& method, const std::string& path) {
                                       return ServeAdmin(method, path);
                                     });
  if (!admin) return MakeError(fmt::format("admin listener {}: {}", config_.admin.ToString(), admin.error()));
  admin_ = std::move(*admin);
  admin_port_ = admin_->port();
  if (config_.admin_tls) admin_->set_tls(shared_.tls);  // checked while parsing: --tls-cert is set
  if (admin_token_) {
    admin_->set_gate([token = admin_token_.get()](std::string_view method, std::string_view path,
                                                  std::string_view authorization) -> std::optional<io::HttpResponse> {
      if (dashboard::IsStaticRequest(method, path)) return std::nullopt;  // the page asks for the token itself
      return token->Check(method, path, authorization);
    });
  }
  // The dashboard and the gathered pages (server/admin_api.cc), after the gate.
  admin_->set_deferred([this](const std::string& method, const std::string& target,
                              io::HttpServer::Responder respond) {
    return ServeAdminApi(method, target, std::move(respond));
  });
  if (auto aux = StartAuxiliaryListeners(); !aux) return aux;
  InstallSignalHandlers();
  StartSysTimer();
  return {};
}

void Node::SetUpCluster() {
  if (config_.cluster_secret.empty()) return;  // a lone node (--seeds requires a secret)
  ShardRuntime* first = shards_[0].get();
  cluster::UvTransportConfig links;
  links.self = config_.node_id;
  links.advertised_address = AdvertisedCluster(config_);  // --advertise-cluster, else --cluster
  links.secret = config_.cluster_secret;
  links.seed = (uint64_t{config_.node_id} << 32) ^ static_cast<uint64_t>(io::SystemClock::Instance().NowMs());
  links.tls = cluster_tls_;  // null: clear text
  links.tls_node_names = config_.cluster_tls_node_names;
  transport_ = std::make_unique<cluster::UvTransport>(first->loop(), links);
  cluster::ClusterAgentConfig agent;
  agent.self = config_.node_id;
  agent.shard_count = config_.shards;
  agent.forward_timeout_ms = config_.cluster_forward_timeout_ms;
  agent.partitioned_groups = config_.shared_subscriptions.partitioned;
  shard0_thread_ = std::this_thread::get_id();
  // Shard 0 shares the agent's loop: a plain post, no mailbox wake-up.
  auto post_to_agent = [first, thread = shard0_thread_](std::function<void()> fn) {
    if (std::this_thread::get_id() == thread) {
      first->loop().Post(std::move(fn));
    } else {
      first->loop().mailbox().Send(std::move(fn));
    }
  };
  agent_ = std::make_unique<cluster::ClusterAgent>(agent, first->loop(), *transport_, agent_link_, post_to_agent);
  shared_.claim_client_id = [this, post_to_agent](const std::string& client_id, bool clean_start,
                                                  std::function<void(NodeShared::ClaimReply)> done) {
    post_to_agent([this, client_id, clean_start, done] {
      agent_->ClaimClientId(client_id, clean_start, [done](cluster::ClusterAgent::ClaimAnswer answer) {
        done({answer.granted, std::move(answer.session), answer.taken_from, answer.copy_fence});
      });
    });
  };
  shared_.release_client_id = [this, post_to_agent](const std::string& client_id) {
    post_to_agent([this, client_id] { agent_->ReleaseClientId(client_id); });
  };
  // Membership decides when a peer is gone: down after the grace period.
  cluster::MembershipConfig members;
  members.down_after_ms = std::max<uint32_t>(config_.cluster_peer_grace_ms, members.suspect_after_ms + 1);
  members.down_on_refused = config_.cluster_down_on_refused;
  // A restart comes back with a higher incarnation (persisted with --data-dir).
  members.incarnation = cluster::BootIncarnation(LoadIncarnation(config_), first->loop().clock());
  auto save = [this](uint64_t incarnation) {
    if (auto saved = SaveIncarnation(config_, incarnation); !saved) {
      spdlog::error("membership: could not persist incarnation {}: {}", incarnation, saved.error());
    }
  };
  save(*members.incarnation);
  cluster::Membership& membership = agent_->EnableMembership(members);
  membership.set_on_incarnation(save);
  // Refused dials tell membership a peer's process is gone (the agent, the
  // links' handler, has no use for them). The membership lives as long as
  // the agent, which goes before the transport: cleared in the destructor.
  transport_->set_dial_observer(
      [&membership](const cluster::DialFailure& failure) { membership.OnDialFailed(failure); });
  for (auto& shard : shards_) shard->broker().set_cluster(&agent_->port());  // no thread runs yet
}

void Node::AgentShardLink::Post(uint16_t shard, std::function<void(core::ShardBroker&)> work) {
  if (shard != 0) {
    node_.Post(shard, std::move(work));
    return;
  }
  ShardRuntime* first = node_.shards_[0].get();
  first->loop().Post([first, work = std::move(work)] { work(first->broker()); });
}

Expected<void, std::string> Node::StartClusterLinks() {
  auto port = transport_->Listen(config_.cluster);
  if (!port) return MakeError(fmt::format("cluster listener {}: {}", config_.cluster.ToString(), port.error()));
  cluster_port_ = *port;
  // Membership dials the seeds, then every member it learns of (full mesh).
  cluster::Membership& membership = *agent_->membership();
  // An admin listener on a wildcard is announced under --advertise-cluster's host.
  membership.set_addresses(transport_->advertised_address(),
                           io::Endpoint{AnnouncedHost(config_, config_.admin.host), admin_port_}.ToString());
  if (auto meta = StartMetadata(); !meta) return meta;
  std::vector<std::string> seeds;
  for (const io::Endpoint& seed : config_.seeds) seeds.push_back(seed.ToString());
  // Every node answers a --bootstrap-expect peer's question truthfully,
  // with the flag or without: a member of a cluster must never say "no".
  meta::MetaGroup& meta = *agent_->metadata();
  membership.set_bootstrap_hooks([&meta] { return meta.HasState(); }, nullptr);
  membership.Start(seeds);
  if (config_.bootstrap_expect > 0) StartBootstrapGate(seeds);
  return {};
}

// Every node waits with an empty metadata group (it has seeds) until the
// gate decides (server/bootstrap_gate.h; docs/cluster.md "Forming a cluster
// from one configuration").
void Node::StartBootstrapGate(const std::vector<std::string>& seeds) {
  cluster::Membership& membership = *agent_->membership();
  meta::MetaGroup& meta = *agent_->metadata();
  BootstrapHooks hooks;
  hooks.view = [this, seeds, &membership, &meta] {
    BootstrapView view{.self = config_.node_id,
                       .self_address = transport_->advertised_address(),
                       .seeds = seeds,
                       .expect = config_.bootstrap_expect,
                       .self_formed = meta.HasState(),
                       .initial = AmongInitialNodes(config_),
                       .peers = {}};
    for (const cluster::Member& member : membership.members()) {
      if (member.node == config_.node_id || !membership.IsLive(member.node)) continue;
      view.peers.push_back({member.node, member.cluster_address, transport_->connected(member.node), {}});
    }
    return view;
  };
  hooks.ask = [&membership](BootstrapNodeId node) { membership.AskBootstrapState(node); };
  hooks.bootstrap = [&meta] { return meta.Bootstrap(); };
  bootstrap_gate_ = std::make_unique<BootstrapGate>(shards_[0]->loop(), std::move(hooks));
  BootstrapGate* gate = bootstrap_gate_.get();
  membership.set_bootstrap_hooks([&meta] { return meta.HasState(); },
                                 [gate](cluster::NodeId node, bool formed) { gate->OnState(node, formed); });
  gate->Start();
}

// The metadata raft group (docs/cluster.md "Metadata group"): routes and
// members through raft. Its state lives in <data-dir>/meta; without
// --data-dir it is in memory and does not survive a restart.
Expected<void, std::string> Node::StartMetadata() {
  if (StorageEnabled(config_)) {
    auto engine = OpenMetaEngine(config_, shards_[0]->loop());
    if (!engine) return MakeError(engine.error());
    meta_engine_ = std::move(*engine);
  } else {
    meta_engine_ = std::make_unique<persistence::MemoryEngine>();
  }
  meta::MetaGroupConfig meta;
  meta.cluster_address = transport_->advertised_address();
  // A new boot id per process start: the group replaces a restarted node's
  // routes by the ones its new process announces.
  meta.boot_id = (static_cast<uint64_t>(io::SystemClock::Instance().WallMs()) << 16) ^ std::random_device{}();
  meta.has_seeds = !config_.seeds.empty();
  meta.replicas = config_.cluster_replicas;
  if (auto enabled = agent_->EnableMetadata(meta, *meta_engine_); !enabled) {
    return MakeError("metadata group: " + enabled.error());
  }
  // Partitions as raft groups (docs/partitions.md), holding the client-id
  // registry: in <data-dir>/partitions, or memory without a data dir.
  if (StorageEnabled(config_)) {
    auto engine = OpenPartitionEngine(config_, shards_[0]->loop());
    if (!engine) return MakeError(engine.error());
    partition_engine_ = std::move(*engine);
  } else {
    partition_engine_ = std::make_unique<persistence::MemoryEngine>();
  }
  if (auto enabled = agent_->EnablePartitions({}, *partition_engine_); !enabled) {
    return MakeError("partitions: " + enabled.error());
  }
  return {};
}

// Every shard listens on each TLS port, as on the clear-text ones.
Expected<void, std::string> Node::StartTlsListeners() {
  auto listen = [this](const std::string& text, const char* name, auto bind) -> Expected<io::Endpoint, std::string> {
    auto endpoint = io::ParseEndpoint(text);
    if (!endpoint) return MakeError(fmt::format("{} {}", name, endpoint.error()));
    for (auto& shard : shards_) {
      auto port = bind(*shard, *endpoint);
      if (!port) return MakeError(fmt::format("{} listener {}: {}", name, endpoint->ToString(), port.error()));
      endpoint->port = *port;
    }
    return *endpoint;
  };
  if (!config_.mqtts.empty()) {
    auto bound = listen(config_.mqtts, "mqtts", [](ShardRuntime& shard, const io::Endpoint& at) {
      return shard.ListenMqtts(at);
    });
    if (!bound) return MakeError(bound.error());
    mqtts_ = *bound;
  }
  if (!config_.amqps.empty()) {
    auto bound = listen(config_.amqps, "amqps", [](ShardRuntime& shard, const io::Endpoint& at) {
      return shard.ListenAmqps(at);
    });
    if (!bound) return MakeError(bound.error());
    amqps_ = *bound;
  }
  return {};
}

// Every shard listens on each WebSocket port (docs/mqtt.md "WebSocket").
Expected<void, std::string> Node::StartWebSocketListeners() {
  shared_.ws_handshake_timeout_ms = config_.ws_handshake_timeout_ms;
  shared_.ws_max_frame_bytes = config_.limits.max_packet_size;
  struct Listener {
    const std::string& text;
    const char* name;
    Expected<uint16_t, std::string> (ShardRuntime::*bind)(const io::Endpoint&);
    std::optional<io::Endpoint>& bound;
  };
  const Listener listeners[] = {
      {config_.mqtt_ws, "mqtt-ws", &ShardRuntime::ListenMqttWs, mqtt_ws_},
      {config_.amqp_ws, "amqp-ws", &ShardRuntime::ListenAmqpWs, amqp_ws_},
      {config_.mqtt_wss, "mqtt-wss", &ShardRuntime::ListenMqttWss, mqtt_wss_},
      {config_.amqp_wss, "amqp-wss", &ShardRuntime::ListenAmqpWss, amqp_wss_},
  };
  for (const Listener& listener : listeners) {
    if (listener.text.empty()) continue;
    auto endpoint = io::ParseEndpoint(listener.text);
    if (!endpoint) return MakeError(fmt::format("{} {}", listener.name, endpoint.error()));
    for (auto& shard : shards_) {
      auto port = ((*shard).*listener.bind)(*endpoint);
      if (!port) return MakeError(fmt::format("{} listener {}: {}", listener.name, endpoint->ToString(), port.error()));
      endpoint->port = *port;
    }
    listener.bound = *endpoint;
  }
  return {};
}

Expected<void, std::string> Node::StartAuxiliaryListeners() {
  if (transport_) return StartClusterLinks();
  // No secret, no links: the port is bound so the ready line is true and
  // scripts can rely on it, and a connection to it is closed at once.
  auto refuse = [](int fd) { ::close(fd); };
  auto cluster = io::TcpListener::Listen(shards_[0]->loop(), config_.cluster, refuse);
  if (!cluster) {
    return MakeError(fmt::format("cluster listener {}: {}", config_.cluster.ToString(), cluster.error()));
  }
  cluster_listener_ = std::move(*cluster);
  cluster_port_ = cluster_listener_->port();
  return {};
}

std::string Node::ReadyLine() const {
  std::string line = fmt::format("estuaryd ready node={} mqtt={} amqp={} admin={} cluster={}", config_.node_id,
                                 io::Endpoint{config_.mqtt.host, mqtt_port_}.ToString(),
                                 io::Endpoint{config_.amqp.host, amqp_port_}.ToString(),
                                 io::Endpoint{config_.admin.host, admin_port_}.ToString(),
                                 io::Endpoint{config_.cluster.host, cluster_port_}.ToString());
  if (mqtts_) line += " mqtts=" + mqtts_->ToString();
  if (amqps_) line += " amqps=" + amqps_->ToString();
  // WebSocket listeners (StartWebSocketListeners).
  if (mqtt_ws_) line += " mqtt_ws=" + mqtt_ws_->ToString();
  if (amqp_ws_) line += " amqp_ws=" + amqp_ws_->ToString();
  if (mqtt_wss_) line += " mqtt_wss=" + mqtt_wss_->ToString();
  if (amqp_wss_) line += " amqp_wss=" + amqp_wss_->ToString();
  // What others are told to dial, when it is not the listener's own address.
  if (transport_ && !config_.advertise_cluster.empty()) line += " advertise_cluster=" + transport_->advertised_address();
  if (!config_.advertise_mqtt.empty()) line += " advertise_mqtt=" + AdvertisedListener(config_.advertise_mqtt, config_.mqtt.host, mqtt_port_);
  if (!config_.advertise_amqp.empty()) line += " advertise_amqp=" + AdvertisedListener(config_.advertise_amqp, config_.amqp.host, amqp_port_);
  return line;
}

void Node::InstallSignalHandlers() {
  auto install = [this](int signum) {
    auto* handle = new uv_signal_t;
    uv_signal_init(shards_[0]->loop().raw(), handle);
    handle->data = this;
    uv_signal_start(
        handle,
        [](uv_signal_t* h, int sig) {
          spdlog::info("received signal {}; shutting down", sig);
          static_cast<Node*>(h->data)->Shutdown();
        },
        signum);
    return handle;
  };
  sigterm_ = install(SIGTERM);
  sigint_ = install(SIGINT);
  sighup_ = new uv_signal_t;
  uv_signal_init(shards_[0]->loop().raw(), sighup_);
  sighup_->data = this;
  uv_signal_start(
      sighup_,
      [](uv_signal_t* h, int) {
        spdlog::info("received SIGHUP; reloading");
        static_cast<Node*>(h->data)->Reload();
      },
      SIGHUP);
}

void Node::RequestShutdown() {
  shards_[0]->loop().mailbox().Send([this] { Shutdown(); });
}

void Node::Shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  for (uv_signal_t* handle : {sigterm_, sigint_, sighup_}) {
    if (handle == nullptr) continue;
    uv_close(reinterpret_cast<uv_handle_t*>(handle),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_signal_t*>(h); });
  }
  sigterm_ = sigint_ = sighup_ = nullptr;
  if (admin_) admin_->Close();
  if (cluster_listener_) cluster_listener_->Close();
  // Shard 0 stops last, once every other shard has stopped and, in a
  // cluster, the graceful leave finished (peers acknowledged it or
  // membership's leave timeout passed), so the last "left" frame is written
  // before the links close. Both flags live on shard 0's thread.
  ShardRuntime* first = shards_[0].get();
  const uint32_t grace = config_.shutdown_grace_ms;
  auto left = std::make_shared<bool>(agent_ == nullptr);
  auto others_stopped = std::make_shared<bool>(shards_.size() == 1);
  auto maybe_stop_first = [first, grace, left, others_stopped] {
    if (*left && *others_stopped) first->BeginShutdown(grace);
  };
  if (agent_) {
    // Its MemberGone committed first (ends a drain deterministically: docs/
    // partitions.md "Drain"); then peers mark it left at once, not after
    // the failure detector.
    agent_->Leave([this, left, maybe_stop_first] {
      transport_->Close();
      *left = true;
      maybe_stop_first();
    });
  }
  if (shards_.size() == 1) {
    maybe_stop_first();
    return;
  }
  auto remaining = std::make_shared<std::atomic<size_t>>(shards_.size() - 1);
  for (size_t i = 1; i < shards_.size(); ++i) {
    ShardRuntime* shard = shards_[i].get();
    shard->loop().mailbox().Send([shard, first, remaining, grace, others_stopped, maybe_stop_first] {
      shard->BeginShutdown(grace, [first, remaining, others_stopped, maybe_stop_first] {
        if (remaining->fetch_sub(1) == 1) {
          first->loop().mailbox().Send([others_stopped, maybe_stop_first] {
            *others_stopped = true;
            maybe_stop_first();
          });
        }
      });
    });
  }
}

void Node::Run() {
  for (size_t i = 1; i < shards_.size(); ++i) {
    threads_.emplace_back([shard = shards_[i].get()] { shard->loop().Run(); });
  }
  shards_[0]->loop().Run();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  spdlog::info("estuaryd stopped");
}

}  // namespace estuary::server
