// The admin API's gathered pages and the dashboard (docs/admin-api.md):
// /api/overview, /api/clients (and DELETE /api/clients/ID), /api/sessions,
// /api/subscriptions, /api/shared, /api/retained, and the embedded
// dashboard at "/". Runs on shard 0's loop, as the admin listener does;
// what other shards hold is asked for by a post to each shard's loop, and
// their answers come back by a post to shard 0's (GatherShards): no shard's
// state is touched from another thread.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "server/admin_query.h"
#include "server/dashboard/assets.h"
#include "server/node.h"

namespace estuary::server {
namespace {

using Json = nlohmann::json;
constexpr size_t kMaxGroupMembers = 100;  // members listed per shared group (all are counted)

// Names from outside (a client id in the path, a filter) may not be UTF-8;
// nlohmann's strict dump would throw, and an exception here ends the node.
io::HttpResponse JsonResponse(int status, const Json& body) {
  return {status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

io::HttpResponse BadRequest(const std::string& why) { return JsonResponse(400, {{"error", why}}); }

// Concatenates the shards' `key` arrays, sorts them by `order`, and cuts
// the page; "total" sums the shards' "matched".
template <typename Less>
Json MergePage(std::vector<Json> parts, const char* key, const Page& page, Less order) {
  std::vector<Json> rows;
  uint64_t total = 0;
  for (Json& part : parts) {
    total += part.value("matched", uint64_t{0});
    for (Json& row : part[key]) rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), order);
  Json out = Json::array();
  for (size_t i = page.offset; i < rows.size() && i < page.window(); ++i) out.push_back(std::move(rows[i]));
  return {{"total", total}, {"offset", page.offset}, {"limit", page.limit}, {key, std::move(out)}};
}

// Keeps at most `window` rows of `rows` (the first by `order`).
template <typename Less>
void Bound(std::vector<Json>& rows, size_t window, Less order) {
  if (rows.size() > window) {
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(window), rows.end(), order);
    rows.resize(window);
  }
}

bool ById(const Json& a, const Json& b) { return a["client_id"] < b["client_id"]; }

// "$share/G/F" -> {G, F}; nullopt for other filters.
std::optional<std::pair<std::string, std::string>> SharedFilter(std::string_view filter) {
  constexpr std::string_view kPrefix = "$share/";
  if (!filter.starts_with(kPrefix)) return std::nullopt;
  filter.remove_prefix(kPrefix.size());
  const size_t slash = filter.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  return std::pair{std::string(filter.substr(0, slash)), std::string(filter.substr(slash + 1))};
}

Json SessionsPart(const core::ShardBroker& broker, const std::string& client_id, std::optional<bool> connected,
                  size_t window) {
  std::vector<Json> rows;
  size_t matched = 0;
  broker.ForEachSession([&](const core::Session& session) {
    if (!Contains(session.client_id(), client_id)) return;
    if (connected && session.connected() != *connected) return;
    ++matched;
    rows.push_back({{"client_id", session.client_id()},
                    {"connected", session.connected()},
                    {"durable", session.durable()},
                    {"expiry_interval_s", session.expiry_interval()},
                    {"subscriptions", session.subscriptions().size()},
                    {"queued_messages", session.queued_messages()},
                    {"queued_bytes", session.queued_bytes()},
                    {"shard", broker.config().shard_id}});
  });
  Bound(rows, window, ById);
  return {{"matched", matched}, {"sessions", std::move(rows)}};
}

bool ByFilterThenId(const Json& a, const Json& b) {
  if (a["filter"] != b["filter"]) return a["filter"] < b["filter"];
  return a["client_id"] < b["client_id"];
}

Json SubscriptionsPart(const core::ShardBroker& broker, const std::string& client_id, const std::string& filter,
                       size_t window) {
  std::vector<Json> rows;
  size_t matched = 0;
  broker.ForEachSession([&](const core::Session& session) {
    if (!Contains(session.client_id(), client_id)) return;
    for (const auto& [subscribed, options] : session.subscriptions()) {
      if (!Contains(subscribed, filter)) continue;
      ++matched;
      Json row = {{"client_id", session.client_id()},
                  {"filter", subscribed},
                  {"qos", static_cast<int>(options.max_qos)},
                  {"no_local", options.no_local},
                  {"retain_as_published", options.retain_as_published},
                  {"connected", session.connected()}};
      if (options.subscription_id != 0) row["subscription_id"] = options.subscription_id;
      rows.push_back(std::move(row));
    }
  });
  Bound(rows, window, ByFilterThenId);
  return {{"matched", matched}, {"subscriptions", std::move(rows)}};
}

// {"GROUP\0FILTER": {"group", "filter", "members": [...], "member_count", "connected"}}
Json SharedPart(const core::ShardBroker& broker) {
  Json groups = Json::object();
  broker.ForEachSession([&](const core::Session& session) {
    for (const auto& subscription : session.subscriptions()) {
      auto shared = SharedFilter(subscription.first);
      if (!shared) continue;
      Json& group = groups[shared->first + '\n' + shared->second];
      if (group.is_null()) {
        group = {{"group", shared->first}, {"filter", shared->second}, {"members", Json::array()},
                 {"member_count", 0}, {"connected", 0}};
      }
      group["member_count"] = group["member_count"].get<uint64_t>() + 1;
      if (session.connected()) group["connected"] = group["connected"].get<uint64_t>() + 1;
      if (group["members"].size() < kMaxGroupMembers) group["members"].push_back(session.client_id());
    }
  });
  return groups;
}

}  // namespace

void Node::GatherShards(std::function<Json(ShardRuntime&)> part, std::function<void(std::vector<Json>)> done) {
  struct Gathering {
    std::vector<Json> parts;
    size_t waiting = 0;
    std::function<void(std::vector<Json>)> done;
  };
  auto gathering = std::make_shared<Gathering>();
  gathering->parts.resize(shards_.size());
  gathering->waiting = shards_.size();
  gathering->done = std::move(done);
  ShardRuntime* home = shards_[0].get();
  for (size_t index = 0; index < shards_.size(); ++index) {
    ShardRuntime* shard = shards_[index].get();
    // `gathering` is only read and written on home's thread; the shard's
    // closure merely carries the pointer there.
    shard->loop().mailbox().Send([shard, home, index, part, gathering] {
      Json result = part(*shard);
      home->loop().mailbox().Send([index, gathering, answer = std::move(result)]() mutable {
        gathering->parts[index] = std::move(answer);
        if (--gathering->waiting == 0) gathering->done(std::move(gathering->parts));
      });
    });
  }
}

bool Node::ServeAdminApi(const std::string& method, const std::string& target, io::HttpServer::Responder respond) {
  const std::string path(PathOf(target));
  const bool get = method == "GET" || method == "HEAD";
  if (get) {
    if (const EmbeddedAsset* asset = dashboard::FindAsset(path)) {
      respond({200, std::string(asset->content_type), std::string(asset->body), {{"Cache-Control", "no-cache"}}});
      return true;
    }
  }
  constexpr std::string_view kClient = "/api/clients/";
  if (path.starts_with(kClient) && path.size() > kClient.size()) {
    if (method != "DELETE" && method != "POST") {
      respond({405, "text/plain; charset=utf-8", "DELETE (or POST) /api/clients/ID disconnects ID\n", {{"Allow", "DELETE, POST"}}});
      return true;
    }
    ServeKick(PercentDecode(path.substr(kClient.size())), std::move(respond));
    return true;
  }
  static const std::vector<std::string> kPages = {"/api/overview", "/api/clients",  "/api/sessions",
                                                  "/api/subscriptions", "/api/shared", "/api/retained"};
  if (std::find(kPages.begin(), kPages.end(), path) == kPages.end()) return false;
  if (!get) {
    respond({405, "text/plain; charset=utf-8", "method not allowed: GET only\n", {{"Allow", "GET, HEAD"}}});
    return true;
  }
  if (path == "/api/overview") {
    ServeOverview(std::move(respond));
    return true;
  }
  auto page = ParsePage(target);
  if (!page) {
    respond(BadRequest(page.error()));
    return true;
  }
  ServeListing(path, target, *page, std::move(respond));
  return true;
}

void Node::ServeListing(const std::string& path, const std::string& target, const Page& page,
                        io::HttpServer::Responder respond) {
  auto param = [&target](const char* name) { return QueryParam(target, name).value_or(""); };
  const size_t window = page.window();
  if (path == "/api/clients") {
    ShardRuntime::ClientFilter filter{param("client_id"), param("username"), param("address")};
    GatherShards([filter, window](ShardRuntime& shard) { return shard.ClientsJson(filter, window); },
                 [page, respond](std::vector<Json> parts) {
                   respond(JsonResponse(200, MergePage(std::move(parts), "clients", page, ById)));
                 });
  } else if (path == "/api/sessions") {
    std::optional<bool> connected;
    if (auto value = QueryParam(target, "connected")) connected = *value == "true" || *value == "1";
    GatherShards(
        [id = param("client_id"), connected, window](ShardRuntime& shard) {
          return SessionsPart(shard.broker(), id, connected, window);
        },
        [page, respond](std::vector<Json> parts) {
          respond(JsonResponse(200, MergePage(std::move(parts), "sessions", page, ById)));
        });
  } else if (path == "/api/subscriptions") {
    GatherShards(
        [id = param("client_id"), filter = param("filter"), window](ShardRuntime& shard) {
          return SubscriptionsPart(shard.broker(), id, filter, window);
        },
        [page, respond](std::vector<Json> parts) {
          respond(JsonResponse(200, MergePage(std::move(parts), "subscriptions", page, ByFilterThenId)));
        });
  } else if (path == "/api/shared") {
    GatherShards([](ShardRuntime& shard) { return SharedPart(shard.broker()); },
                 [page, respond, group = param("group")](std::vector<Json> parts) {
                   respond(JsonResponse(200, MergeShared(std::move(parts), group, page)));
                 });
  } else {
    respond(JsonResponse(200, RetainedJson(param("topic"), page)));
  }
}

// Shared groups merged over the shards: members listed up to
// kMaxGroupMembers, counted in full.
Json Node::MergeShared(std::vector<Json> parts, const std::string& group_filter, const Page& page) {
  std::map<std::string, Json> groups;
  for (Json& part : parts) {
    for (auto& [key, group] : part.items()) {
      if (!Contains(group["group"].get<std::string>(), group_filter)) continue;
      Json& merged = groups[key];
      if (merged.is_null()) {
        merged = std::move(group);
        continue;
      }
      merged["member_count"] = merged["member_count"].get<uint64_t>() + group["member_count"].get<uint64_t>();
      merged["connected"] = merged["connected"].get<uint64_t>() + group["connected"].get<uint64_t>();
      for (auto& member : group["members"]) {
        if (merged["members"].size() < kMaxGroupMembers) merged["members"].push_back(std::move(member));
      }
    }
  }
  Json out = Json::array();
  size_t index = 0;
  for (auto& [key, group] : groups) {
    if (index >= page.offset && index < page.window()) out.push_back(std::move(group));
    ++index;
  }
  return {{"total", groups.size()}, {"offset", page.offset}, {"limit", page.limit}, {"groups", std::move(out)}};
}

// Every shard holds a replica of the retained messages: shard 0's (this
// loop's) answers alone.
Json Node::RetainedJson(const std::string& topic, const Page& page) const {
  Json rows = Json::array();
  uint64_t matched = 0;
  shards_[0]->broker().retained().ForEach([&](const MessagePtr& message) {
    if (message->PayloadSize() == 0 || !Contains(message->topic, topic)) return;  // empty: a deletion's tombstone
    if (matched >= page.offset && matched < page.window()) {
      Json row = {{"topic", message->topic}, {"payload_bytes", message->PayloadSize()},
                  {"qos", static_cast<int>(message->qos)}};
      if (!message->origin.client_id.empty()) row["from_client"] = message->origin.client_id;
      if (message->origin.node != 0) row["from_node"] = message->origin.node;
      rows.push_back(std::move(row));
    }
    ++matched;
  });
  return {{"total", matched}, {"offset", page.offset}, {"limit", page.limit}, {"retained", std::move(rows)}};
}

void Node::ServeKick(const std::string& client_id, io::HttpServer::Responder respond) {
  GatherShards([client_id](ShardRuntime& shard) { return Json(shard.Kick(client_id)); },
               [client_id, respond, node = config_.node_id](std::vector<Json> parts) {
                 uint64_t count = 0;
                 for (const Json& part : parts) count += part.get<uint64_t>();
                 if (count == 0) {
                   respond(JsonResponse(404, {{"error", fmt::format("no client '{}' is connected to node {} (clients "
                                                                     "are listed per node: GET /api/clients)",
                                                                     Printable(client_id), node)}}));
                   return;
                 }
                 respond(JsonResponse(200, {{"disconnected", client_id}, {"connections", count}, {"node", node}}));
               });
}

}  // namespace estuary::server
