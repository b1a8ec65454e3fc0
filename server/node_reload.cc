// Node::Reload (SIGHUP, POST /api/reload): the configuration read again and
// its live keys applied (server/reload.h), then the security files read
// again. Everything here runs on shard 0's thread (the signal handle and
// the admin listener are on its loop); the other shards get their new
// limits by a post to their own loop.
#include <spdlog/spdlog.h>

#include "server/node.h"

namespace estuary::server {

ReloadReport Node::Reload() {
  ReloadReport report;
  ReloadConfig(report);
  ReloadFiles(report);
  if (report.ok()) {
    spdlog::info("reload: done, {} key(s) changed", report.changes.size());
  } else {
    spdlog::error("reload: done with {} error(s); what failed kept its running value", report.errors.size());
  }
  return report;
}

void Node::ReloadConfig(ReloadReport& report) {
  if (!config_source_) return;
  auto fresh = config_source_();
  if (!fresh) {
    spdlog::error("reload: configuration not changed: {}", fresh.error());
    report.errors.push_back("configuration: " + fresh.error());
    return;
  }
  ReloadAbilities abilities;
  abilities.guard = shared_.guard != nullptr;
  abilities.guard_per_address = shared_.guard != nullptr && shared_.guard->per_address();
  report.changes = DiffConfig(config_, *fresh, abilities);
  if (report.changes.empty()) {
    spdlog::info("reload: configuration read again, no key changed");
    return;
  }
  for (const ConfigChange& change : report.changes) {
    if (change.live) {
      spdlog::info("reload: {}", DescribeChange(change));
    } else {
      spdlog::warn("reload: {}", DescribeChange(change));
    }
  }
  const NodeConfig before = config_;
  ApplyLiveChanges(config_, *fresh, abilities);
  ApplyLimits(before);
}

// Pushes what changed in config_ to where it is read.
void Node::ApplyLimits(const NodeConfig& before) {
  if (config_.log_level != before.log_level) spdlog::set_level(spdlog::level::from_str(config_.log_level));
  shared_.max_connections.store(config_.limits.max_connections);
  shared_.connect_timeout_ms.store(config_.connect_timeout_ms, std::memory_order_relaxed);
  if (shared_.guard) {
    shared_.guard->SetLimits(config_.abuse.max_connections_per_ip, config_.abuse.connect_rate_per_ip,
                             config_.abuse.max_pending_connections);
  }
  // Each shard's broker reads its own copy of the limits on its own thread.
  // Connected clients keep what they were told (the negotiated keys need a
  // restart: server/reload.cc); new connections take the new publish rates.
  const core::BrokerLimits limits = config_.limits;
  shards_[0]->broker().SetLimits(limits);
  for (size_t i = 1; i < shards_.size(); ++i) {
    ShardRuntime* shard = shards_[i].get();
    shard->loop().mailbox().Send([shard, limits] { shard->broker().SetLimits(limits); });
  }
}

void Node::ReloadFiles(ReloadReport& report) {
  auto failed = [&report](const std::string& what, const std::string& error) {
    spdlog::error("reload: {} kept as it was: {}", what, error);
    report.errors.push_back(what + ": " + error);
  };
  auto reload = [&failed](const char* what, const std::string& path, auto& target) {
    if (!target) return;
    if (auto done = target->Reload(path); !done) return failed(what, done.error());
    spdlog::info("reload: {} {} read again", what, path);
  };
  reload("password file", config_.password_file, authenticator_);
  reload("ACL file", config_.acl_file, authorizer_);
  if (admin_token_) {
    if (auto done = admin_token_->Reload(); !done) {
      failed("admin token", done.error());
    } else {
      spdlog::info("reload: admin token file {} read again", config_.admin_token_file);
    }
  }
  if (cluster_tls_) {
    // New links use the new pair; links already up keep theirs.
    if (auto done = cluster_tls_->Reload(); !done) {
      failed("cluster TLS certificate", done.error());
    } else {
      spdlog::info("reload: cluster TLS certificate {} read again", config_.cluster_tls.cert_file);
    }
  }
  if (shared_.tls) {
    // New handshakes use the new pair; connections already up keep theirs.
    if (auto done = shared_.tls->Reload(); !done) {
      failed("TLS certificate", done.error());
    } else {
      spdlog::info("reload: TLS certificate {} and key {} read again", config_.tls.cert_file, config_.tls.key_file);
    }
  }
}

io::HttpResponse Node::ServeReload(const std::string& method) {
  if (method != "POST") return {405, "text/plain; charset=utf-8", "POST /api/reload reloads the configuration\n"};
  const ReloadReport report = Reload();
  // 422: the request was understood, what it asked to read was not.
  return {report.ok() ? 200 : 422, "application/json", report.Json()};
}

}  // namespace estuary::server
