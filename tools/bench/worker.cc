#include "tools/bench/worker.h"

#include <utility>

#include "tools/bench/amqp_client.h"
#include "tools/bench/client.h"
#include "tools/bench/payload.h"

namespace estuary::bench {
namespace {

constexpr int64_t kClosePollMs = 5;
constexpr int kClosePolls = 200;  // wait at most 1 s for sockets to close

}  // namespace

Worker::Worker(const Options& options, const TopicPlan& plan, BrokerEndpoints brokers,
               Assignment assignment, RunBoard& board)
    : options_(options),
      plan_(plan),
      brokers_(std::move(brokers)),
      assignment_(std::move(assignment)),
      board_(board) {
  result_.keep_timeline = !options_.plot.empty();
  if (options_.tls_ca.empty()) return;
  auto context = io::BuildClientContext(options_.tls_ca, options_.tls_cert, options_.tls_key);
  if (context) {
    tls_context_ = std::move(*context);
  } else {
    tls_error_ = "TLS: " + context.error();
  }
}

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::thread([this] { ThreadMain(); });
  loop_created_.get_future().wait();
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::StartPublishing(int64_t start_ns) {
  loop_->mailbox().Send([this, start_ns] {
    result_.timeline_start_ns = start_ns;  // --plot: seconds counted from here
    for (auto& publisher : publishers_) publisher->Begin(start_ns);
    if (publishers_.empty()) OnPublisherStopped();
  });
}

void Worker::StopPublishing() {
  loop_->mailbox().Send([this] {
    const int64_t now = MonotonicNowNs();
    for (auto& publisher : publishers_) publisher->Stop(now);
  });
}

void Worker::Finish() {
  loop_->mailbox().Send([this] { CloseAll(); });
}

void Worker::ThreadMain() {
  io::UvLoop loop;
  loop_ = &loop;
  CreateClients();
  StartMoreConnections();
  ArmPing();
  loop_created_.set_value();
  loop.Run();
  CollectResult();
  // Everything that holds loop handles goes before the loop does.
  publishers_.clear();
  tallies_.clear();
  slots_.clear();
}

void Worker::CreateClients() {
  for (uint32_t index : assignment_.publishers) {
    Publisher::Setup setup{index, plan_.PublishTopic(index), plan_.Coverage(index)};
    auto publisher = std::make_unique<Publisher>(*loop_, options_, std::move(setup), result_, live_,
                                                 [this] { OnPublisherStopped(); });
    Publisher* p = publisher.get();
    publishers_.push_back(std::move(publisher));
    BenchClient::Handlers handlers;
    handlers.on_publish_done = [p](uint16_t id, bool ok) { p->OnAck(id, ok); };
    handlers.on_drain = [p] { p->OnDrain(); };
    AddClient(options_.publish_protocol, brokers_.publish, index, options_.client_id_prefix + "p" + std::to_string(index),
              plan_.PublishTopic(index), {}, std::move(handlers));
    p->set_client(slots_.back().client);
  }
  for (uint32_t index : assignment_.subscribers) {
    tallies_.push_back(std::make_unique<SubscriberTally>(index, options_.run_id, options_.publishers,
                                                         result_, live_));
    SubscriberTally* tally = tallies_.back().get();
    BenchClient::Handlers handlers;
    handlers.on_message = [tally](std::string_view payload, int64_t arrival_ns) {
      tally->OnMessage(payload, arrival_ns);
    };
    AddClient(options_.subscribe_protocol, brokers_.subscribe, options_.publishers + index,
              options_.client_id_prefix + "s" + std::to_string(index), "", plan_.Filters(index),
              std::move(handlers));
  }
  for (uint32_t number : assignment_.idle) {
    AddClient(options_.publish_protocol, brokers_.publish, number,
              options_.client_id_prefix + "i" + std::to_string(number), "", {}, {});
  }
}

void Worker::AddClient(Protocol protocol, const io::Endpoint& broker, uint64_t ordinal, std::string client_id,
                       std::string topic, std::vector<std::string> filters, BenchClient::Handlers handlers) {
  const size_t slot = slots_.size();
  handlers.on_ready = [this, slot] { OnClientReady(slot); };
  handlers.on_failed = [this, slot](const std::string& error) { OnClientFailed(slot, error); };
  slots_.push_back({protocol == Protocol::kAmqp
                        ? MakeAmqpClient(broker, std::move(client_id), std::move(topic), std::move(filters),
                                         std::move(handlers))
                        : MakeMqttClient(broker, ordinal, std::move(client_id), std::move(filters),
                                         std::move(handlers))});
}

// `ordinal` numbers the client within the whole run, so source addresses
// are shared out evenly whatever the thread.
std::shared_ptr<BenchClient> Worker::MakeMqttClient(const io::Endpoint& broker, uint64_t ordinal,
                                                    std::string client_id, std::vector<std::string> filters,
                                                    BenchClient::Handlers handlers) {
  MqttClient::Config config;
  config.broker = broker;
  if (!options_.local_addresses.empty()) {
    config.local_address = options_.local_addresses[ordinal % options_.local_addresses.size()];
  }
  config.version = options_.version;
  config.client_id = std::move(client_id);
  config.keepalive_s = options_.keepalive_s;
  config.filters = std::move(filters);
  config.subscribe_qos = options_.qos;
  if (!config.filters.empty()) config.session_expiry_s = options_.session_expiry_s;
  config.max_queued_bytes = options_.max_queued_bytes;
  config.tls = tls_context_;
  config.tls_error = tls_error_;
  config.tls_server_name = options_.tls_server_name;
  if (options_.tls_resume) {
    config.tls_ticket = &tls_ticket_;
    config.tls_resumed = &tls_resumed_;
  }
  return MqttClient::Create(*loop_, std::move(config), std::move(handlers));
}

// The target address is the topic and the source addresses the filters,
// each behind its configured prefix (RabbitMQ needs /topic/, Estuary none).
std::shared_ptr<BenchClient> Worker::MakeAmqpClient(const io::Endpoint& broker, std::string client_id,
                                                    std::string topic, std::vector<std::string> filters,
                                                    BenchClient::Handlers handlers) {
  AmqpClient::Config config;
  config.broker = broker;
  config.container_id = std::move(client_id);
  if (!topic.empty()) config.target = options_.amqp_target_prefix + topic;
  for (const std::string& filter : filters) config.sources.push_back(options_.amqp_source_prefix + filter);
  config.presettled = options_.qos == 0;
  config.exactly_once = options_.qos == 2;
  config.credit = options_.credit;
  config.sasl_anonymous = options_.amqp_sasl;
  config.max_queued_bytes = options_.max_queued_bytes;
  return AmqpClient::Create(*loop_, std::move(config), std::move(handlers));
}

void Worker::StartMoreConnections() {
  while (connecting_ < options_.max_connecting && next_to_start_ < slots_.size()) {
    ++connecting_;
    // Keep a reference: Start() may fail at once and the handlers run inside.
    std::shared_ptr<BenchClient> client = slots_[next_to_start_++].client;
    client->Start();
  }
}

void Worker::OnClientReady(size_t slot) {
  slots_[slot].ready = true;
  --connecting_;
  ++resolved_;
  connected_.fetch_add(1);
  StartMoreConnections();
  if (!reported_ready_ && resolved_ == slots_.size()) {
    reported_ready_ = true;
    board_.ReportReady();
  }
}

void Worker::OnClientFailed(size_t slot, const std::string& error) {
  Slot& s = slots_[slot];
  if (s.ready) {
    connected_.fetch_sub(1);
    dropped_.fetch_add(1);
    board_.ReportError(error, !options_.idle);
    return;
  }
  s.failed = true;
  --connecting_;
  ++resolved_;
  failed_.fetch_add(1);
  board_.ReportError(error, !options_.idle);
  StartMoreConnections();
  if (!reported_ready_ && resolved_ == slots_.size()) {
    reported_ready_ = true;
    board_.ReportReady();
  }
}

void Worker::OnPublisherStopped() {
  for (const auto& publisher : publishers_) {
    if (publisher->sending()) return;
  }
  live_.sending_done.store(true);
  board_.Notify();
}

// Brokers drop a client that sends nothing for 1.5 keep-alive periods;
// subscribers and idle connections send nothing on their own.
void Worker::ArmPing() {
  if (options_.keepalive_s == 0) return;
  ping_timer_ = loop_->AddTimer(int64_t{options_.keepalive_s} * 500, [this] {
    for (Slot& slot : slots_) slot.client->Ping();
    ArmPing();
  });
}

void Worker::CloseAll() {
  const int64_t now = MonotonicNowNs();
  for (auto& publisher : publishers_) publisher->Stop(now);
  if (ping_timer_ != 0) loop_->CancelTimer(ping_timer_);
  ping_timer_ = 0;
  for (Slot& slot : slots_) slot.client->Disconnect();
  StopWhenClosed(kClosePolls);
}

// Gives the DISCONNECTs a moment to be written before the loop ends.
void Worker::StopWhenClosed(int attempts_left) {
  bool open = false;
  for (const Slot& slot : slots_) open = open || slot.client->open();
  if (!open || attempts_left == 0) {
    loop_->Stop();
    return;
  }
  loop_->AddTimer(kClosePollMs, [this, attempts_left] { StopWhenClosed(attempts_left - 1); });
}

void Worker::CollectResult() {
  for (const auto& publisher : publishers_) result_.publishers.push_back(publisher->result());
  for (const auto& tally : tallies_) result_.subscribers.push_back(tally->Result());
}

}  // namespace estuary::bench
