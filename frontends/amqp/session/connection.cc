#include "frontends/amqp/session/connection.h"

#include <proton/connection.hpp>
#include <proton/error_condition.hpp>
#include <proton/session.hpp>
#include <proton/transport.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "frontends/amqp/session/c_access.h"
#include "io/log_budget.h"
#include "frontends/amqp/session/links.h"

namespace estuary::amqp {
namespace {
// The connect-timeout log line: at most this many at once per shard thread,
// then this many a second (io::LogBudget).
constexpr double kTimeoutLinesBurst = 10;
constexpr double kTimeoutLinesPerSecond = 1;

using core::ShardMetrics;

}  // namespace

std::string DurableSessionId(std::string_view container_id, std::string_view link_name) {
  // The container-id's length makes the split unambiguous ("a/b" + "c" vs "a" + "b/c").
  std::string id(1, '\0');
  id += "amqp/";
  id += std::to_string(container_id.size());
  id += ':';
  id += container_id;
  id += '/';
  id += link_name;
  return id;
}

AmqpConnection::AmqpConnection(core::ShardBroker& broker, io::Stream& stream, AmqpSettings settings)
    : broker_(&broker), stream_(&stream), settings_(std::move(settings)) {
  sasl_.authenticator = settings_.authenticator;
  sasl_.external_identity = settings_.certificate_identity;
  const core::BrokerLimits& limits = broker_->config().limits;
  const int64_t now = broker_->loop().NowMs();
  if (limits.max_publish_rate != 0) {
    publish_messages_ = base::TokenBucket(limits.max_publish_rate, limits.max_publish_rate, now);
  }
  if (limits.max_publish_bytes_rate != 0) {
    publish_bytes_ = base::TokenBucket(double(limits.max_publish_bytes_rate), double(limits.max_publish_bytes_rate), now);
  }
  publish_limited_ = limits.max_publish_rate != 0 || limits.max_publish_bytes_rate != 0;
}

AmqpConnection::~AmqpConnection() {
  if (tick_timer_ != 0) broker_->loop().CancelTimer(tick_timer_);
  CancelConnectTimer();
  if (throttle_timer_ != 0) broker_->loop().CancelTimer(throttle_timer_);
  Teardown();
}

void AmqpConnection::Start() {
  sasl_.peer_address = stream_->peer_address();
  proton::connection_options options;
  options.handler(*this)
      .container_id(settings_.container_id)
      .max_frame_size(settings_.max_frame_size)
      .max_sessions(settings_.max_sessions)
      .idle_timeout(proton::duration(settings_.idle_timeout_ms))
      .sasl_enabled(true)
      .sasl_allow_insecure_mechs(true);
  driver_.accept(options);
  pn_transport_t* transport = CObject::Of(driver_.transport());
  // A client may skip SASL; AnswerOpen then asks the authenticator about
  // an anonymous client.
  pn_transport_require_auth(transport, false);
  InstallSasl(transport, &sasl_);
  collector_ = pn_connection_collector(CObject::Of(driver_.connection()));
  ArmConnectTimer();
  Process();
}

void AmqpConnection::ArmConnectTimer() {
  if (settings_.connect_timeout_ms == 0) return;
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  connect_timer_ = broker_->loop().AddTimer(settings_.connect_timeout_ms, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->connect_timer_ = 0;
    if (self->state_ != State::kOpening || self->handed_off_) return;
    // Before the open there is no AMQP close to send (and during SASL no
    // AMQP layer at all): the socket is closed.
    // Any peer can cause this line: bounded (the metric counts each).
    thread_local io::LogBudget budget(kTimeoutLinesPerSecond, kTimeoutLinesBurst);
    uint64_t skipped = 0;
    if (budget.Take(self->broker_->loop().NowMs(), skipped)) {
      spdlog::info("amqp: address={} closed: {} within the connect timeout ({} ms, {} bytes received){}",
                   self->sasl_.peer_address,
                   self->open_arrived_ ? "open refused and the connection not closed" : "SASL and open not finished",
                   self->settings_.connect_timeout_ms, self->bytes_received_,
                   skipped == 0 ? std::string() : fmt::format("; {} more not logged since", skipped));
    }
    if (self->settings_.connect_timed_out) self->settings_.connect_timed_out();
    self->CloseStream();
  });
}

void AmqpConnection::CancelConnectTimer() {
  if (connect_timer_ != 0) broker_->loop().CancelTimer(connect_timer_);
  connect_timer_ = 0;
}

void AmqpConnection::OnBytes(std::string_view bytes) {
  if (state_ == State::kClosed || handed_off_) return;
  ShardMetrics::Add(broker_->metrics().bytes_in, bytes.size());
  if (state_ == State::kOpening) bytes_received_ += bytes.size();
  while (!bytes.empty()) {
    proton::io::mutable_buffer buffer = driver_.read_buffer();
    if (buffer.size == 0) break;  // the transport stopped reading (closing)
    const size_t n = std::min(buffer.size, bytes.size());
    std::memcpy(buffer.data, bytes.data(), n);
    attach_tap_.Feed(bytes.substr(0, n));  // before Proton handles an attach in it
    driver_.read_done(n);
    bytes.remove_prefix(n);
    Process();
    if (state_ == State::kClosed) return;
    if (handed_off_) {
      pending_input_.append(bytes);  // for the new shard, after the open
      return;
    }
  }
}

void AmqpConnection::OnStreamClosed() {
  if (state_ == State::kClosed) return;
  spdlog::debug("amqp: client={} address={} network connection lost", ClientWord(), sasl_.peer_address);
  driver_.disconnected(proton::error_condition("amqp:connection:framing-error", "connection lost"));
  Process();
  CloseStream();
}

void AmqpConnection::OnWritable() {
  if (state_ == State::kClosed) return;
  UpdateReading();
  PumpAll();
  Process();
}

void AmqpConnection::Shutdown(std::string_view description) {
  if (state_ == State::kClosed) return;
  proton::connection connection = driver_.connection();
  if (state_ == State::kOpening) {
    CloseStream();
    return;
  }
  connection.close(proton::error_condition(kConnectionForced, std::string(description)));
  Process();
}

void AmqpConnection::Resume(core::ShardBroker& broker, io::Stream& stream) {
  broker_ = &broker;
  stream_ = &stream;
  handed_off_ = false;
  AnswerOpen();
  if (state_ == State::kOpening) ArmConnectTimer();  // refused here: bounded as on the first shard
  auto deferred = std::move(deferred_);
  deferred_.clear();
  for (auto& work : deferred) work();
  Process();
  std::string input = std::move(pending_input_);
  pending_input_.clear();
  if (!input.empty()) OnBytes(input);
}

// --- driving the driver ------------------------------------------------------

void AmqpConnection::Process() {
  if (processing_ || state_ == State::kClosed || handed_off_) return;
  processing_ = true;
  bool alive = true;
  int64_t deadline = 0;
  for (;;) {
    TakeOutcomes();
    alive = driver_.dispatch();
    RenameDecodeFailure();
    if (handed_off_) break;
    CheckOversized();
    WriteOut();
    deadline = driver_.tick(proton::timestamp(broker_->loop().NowMs())).milliseconds();
    if (!driver_.has_events()) break;
  }
  processing_ = false;
  if (handed_off_) {
    if (tick_timer_ != 0) broker_->loop().CancelTimer(tick_timer_);
    tick_timer_ = 0;
    tick_deadline_ms_ = 0;
    return;
  }
  if (!alive) {
    CloseStream();
    return;
  }
  ArmTick(deadline);
  UpdateReading();
}

void AmqpConnection::RenameDecodeFailure() {
  // A transfer Proton cannot decode throws inside dispatch(), which only
  // records the condition "exception" on the transport and goes on. The
  // connection cannot continue (that link's delivery is stuck unread):
  // close it with the standard condition (§2.8.15) instead.
  pn_condition_t* condition = pn_transport_condition(CObject::Of(driver_.transport()));
  const char* name = pn_condition_get_name(condition);
  if (name == nullptr || std::strcmp(name, "exception") != 0) return;
  const char* what = pn_condition_get_description(condition);
  const std::string description = what != nullptr ? what : "undecodable transfer";
  spdlog::debug("amqp: client={} address={} {}", ClientWord(), sasl_.peer_address, description);
  pn_condition_clear(condition);
  ShardMetrics::Add(broker_->metrics().protocol_errors);
  driver_.connection().close(proton::error_condition(kDecodeError, description));
}

void AmqpConnection::ScheduleProcess() {
  if (process_posted_ || state_ == State::kClosed) return;
  process_posted_ = true;
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->loop().Post([weak] {
    if (auto self = weak.lock()) {
      self->process_posted_ = false;
      self->Process();
    }
  });
}

void AmqpConnection::WriteOut() {
  size_t written = 0;
  for (;;) {
    proton::io::const_buffer buffer = driver_.write_buffer();
    if (buffer.size == 0) break;
    // The driver's buffer may move on the next dispatch: copy it out now
    // (through the announcer, which adds our unsettled maps to attaches).
    announcer_.Write(std::string_view(reinterpret_cast<const char*>(buffer.data), buffer.size), stream_->output());
    written += buffer.size;
    driver_.write_done(buffer.size);
  }
  if (written > 0) {
    ShardMetrics::Add(broker_->metrics().bytes_out, written);
    stream_->Flush();
  }
}

void AmqpConnection::ArmTick(int64_t deadline_ms) {
  if (deadline_ms == 0) return;
  // A timer due no later already runs Process, which re-arms: deadlines
  // move later with every frame, so this saves a timer per batch.
  if (tick_timer_ != 0 && tick_deadline_ms_ <= deadline_ms) return;
  if (tick_timer_ != 0) broker_->loop().CancelTimer(tick_timer_);
  tick_timer_ = 0;
  tick_deadline_ms_ = deadline_ms;
  const int64_t delay = std::max<int64_t>(0, deadline_ms - broker_->loop().NowMs());
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  tick_timer_ = broker_->loop().AddTimer(delay, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->tick_timer_ = 0;
    self->tick_deadline_ms_ = 0;
    self->Process();
  });
}

void AmqpConnection::UpdateReading() {
  if (state_ == State::kClosed) return;
  const bool want = throttle_timer_ == 0 && stream_->queued_bytes() <= kOutputHighWatermark;
  if (want == reading_) return;
  reading_ = want;
  if (want) {
    stream_->ResumeReading();
  } else {
    stream_->PauseReading();  // a client that does not read its frames gets no more of ours
  }
}

void AmqpConnection::SpendPublishBudget(size_t bytes) {
  // Proton has decoded the whole read already, so a read's transfers are
  // all spent (the budget may go into debt); the next read waits for it.
  publish_messages_.Spend(1);
  publish_bytes_.Spend(double(bytes));
  if (throttle_timer_ != 0) return;  // it checks the budget again when it fires
  if (ArmThrottle()) ShardMetrics::Add(broker_->metrics().publish_throttled);
}

bool AmqpConnection::ArmThrottle() {
  const int64_t now = broker_->loop().NowMs();
  if (publish_messages_.Available(now) && publish_bytes_.Available(now)) {
    UpdateReading();
    return false;
  }
  constexpr double kAnyBudget = 1e-6;
  const int64_t wait_ms =
      std::max(publish_messages_.MsUntil(now, kAnyBudget), publish_bytes_.MsUntil(now, kAnyBudget));
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  throttle_timer_ = broker_->loop().AddTimer(std::max<int64_t>(wait_ms, 1), [weak] {
    auto self = weak.lock();
    if (!self || self->state_ == State::kClosed) return;
    self->throttle_timer_ = 0;
    self->ArmThrottle();  // what was spent after the timer was armed may still be owed
  });
  UpdateReading();
  return true;
}

void AmqpConnection::CloseStream() {
  if (state_ == State::kClosed) return;
  WriteOut();
  state_ = State::kClosed;
  if (tick_timer_ != 0) broker_->loop().CancelTimer(tick_timer_);
  tick_timer_ = 0;
  CancelConnectTimer();
  if (throttle_timer_ != 0) broker_->loop().CancelTimer(throttle_timer_);
  throttle_timer_ = 0;
  Teardown();
  stream_->Close();
}

void AmqpConnection::Teardown() {
  // Durable subscriptions stay (their sessions outlive the link); others go.
  std::vector<pn_link_t*> links;
  for (auto& entry : outgoing_) links.push_back(entry.first);
  for (pn_link_t* link : links) DetachOutgoing(link, false);
  incoming_.clear();
  if (flow_id_ != 0) {
    broker_->UnregisterFlow(flow_id_);
    flow_id_ = 0;
  }
}

void AmqpConnection::Defer(std::function<void()> work) { deferred_.push_back(std::move(work)); }

// --- connection --------------------------------------------------------------

void AmqpConnection::on_connection_open(proton::connection& connection) {
  open_arrived_ = true;
  container_id_ = connection.container_id();
  if (settings_.route_open && settings_.route_open(container_id_)) {
    // The timer is on this shard's loop; the new shard arms its own if it
    // refuses the open (Resume).
    CancelConnectTimer();
    handed_off_ = true;  // Process stops; the shard moves us
    return;
  }
  AnswerOpen();
}

bool AmqpConnection::CheckAuthorized() {
  if (sasl_.decision) return *sasl_.decision == core::AuthDecision::kAllow;
  // No SASL layer: an anonymous client, if the authenticator lets it in.
  core::AllowAllAuthenticator allow_all;
  core::Authenticator& authenticator = settings_.authenticator ? *settings_.authenticator : allow_all;
  return authenticator.Authenticate(core::Credentials{container_id_, std::nullopt, std::nullopt,
                                                      sasl_.peer_address}) == core::AuthDecision::kAllow;
}

void AmqpConnection::AnswerOpen() {
  proton::connection connection = driver_.connection();
  pn_connection_open(CObject::Of(connection));
  if (!CheckAuthorized()) {
    ShardMetrics::Add(broker_->metrics().protocol_errors);
    connection.close(proton::error_condition(kUnauthorizedAccess, "authentication required"));
    return;
  }
  if (settings_.admit_connection && !settings_.admit_connection()) {
    ShardMetrics::Add(broker_->metrics().protocol_errors);
    connection.close(proton::error_condition(kResourceLimitExceeded, "too many connections"));
    return;
  }
  state_ = State::kOpen;
  // Only an open that was let in meets the deadline: a refused one stays
  // pending until the client closes, or the timer does.
  CancelConnectTimer();
  if (settings_.authorizer != nullptr) {
    // The SASL PLAIN or EXTERNAL user; ANONYMOUS or no SASL layer is an
    // anonymous client.
    const bool named = sasl_.decision && sasl_.mechanism != "ANONYMOUS";  // PLAIN, EXTERNAL, SCRAM-SHA-256
    access_ = settings_.authorizer->ForClient(
        {container_id_, named ? std::optional<std::string>(sasl_.user) : std::nullopt});
  }
  flow_id_ = broker_->RegisterFlow(weak_from_this());
  spdlog::debug("amqp: client={} address={} open (user '{}')", ClientWord(), sasl_.peer_address, sasl_.user);
}

void AmqpConnection::on_connection_close(proton::connection&) {
  // The adapter answers the close; the driver finishes once it is written.
  Teardown();
}

void AmqpConnection::on_transport_close(proton::transport&) { Teardown(); }

void AmqpConnection::on_transport_error(proton::transport& transport) {
  spdlog::debug("amqp: client={} address={} transport error: {}", ClientWord(), sasl_.peer_address,
                transport.error().what());
  ShardMetrics::Add(broker_->metrics().protocol_errors);
}

void AmqpConnection::on_connection_error(proton::connection& connection) {
  spdlog::debug("amqp: client={} address={} connection error: {}", ClientWord(), sasl_.peer_address,
                connection.error().what());
}

void AmqpConnection::on_error(const proton::error_condition& condition) {
  // The default throws; errors here end the link or connection instead.
  spdlog::debug("amqp: client={} address={} {}", ClientWord(), sasl_.peer_address, condition.what());
}

void AmqpConnection::on_session_open(proton::session& session) {
  if (handed_off_) {
    Defer([this, session]() mutable { on_session_open(session); });
    return;
  }
  if (state_ != State::kOpen) return;
  if (!session.active()) session.open();
}

void AmqpConnection::PauseIngress() { ++ingress_pauses_; }

void AmqpConnection::ResumeIngress() {
  if (ingress_pauses_ == 0 || --ingress_pauses_ > 0) return;
  // Not from inside the caller (a subscriber's delivery loop): next turn.
  std::weak_ptr<AmqpConnection> weak = weak_from_this();
  broker_->loop().Post([weak] {
    auto self = weak.lock();
    if (!self || self->state_ != State::kOpen || self->ingress_pauses_ > 0) return;
    for (auto& entry : self->incoming_) self->TopUpCredit(*entry.second);
    self->Process();
  });
}

}  // namespace estuary::amqp
