#include "tools/bench/amqp_client.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "tools/bench/amqp_body.h"
#include "tools/bench/payload.h"

namespace estuary::bench {
namespace {

std::string UvError(int status) { return std::string(uv_strerror(status)) + " (" + uv_err_name(status) + ")"; }

int64_t NowMs() { return MonotonicNowNs() / 1'000'000; }

// "amqp:not-found: no such node" from a condition, or `fallback` if unset.
std::string Describe(pn_condition_t* condition, const std::string& fallback) {
  if (condition == nullptr || !pn_condition_is_set(condition)) return fallback;
  std::string text = pn_condition_get_name(condition) ? pn_condition_get_name(condition) : "error";
  const char* description = pn_condition_get_description(condition);
  if (description != nullptr && *description != '\0') text += std::string(": ") + description;
  return text;
}

std::string LinkName(pn_link_t* link) {
  pn_terminus_t* terminus = pn_link_is_sender(link) ? pn_link_target(link) : pn_link_source(link);
  const char* address = pn_terminus_get_address(terminus);
  return std::string(pn_link_is_sender(link) ? "sender to '" : "receiver from '") + (address ? address : "") + "'";
}

}  // namespace

std::shared_ptr<AmqpClient> AmqpClient::Create(io::UvLoop& loop, Config config, Handlers handlers) {
  return std::shared_ptr<AmqpClient>(new AmqpClient(loop, std::move(config), std::move(handlers)));
}

AmqpClient::AmqpClient(io::UvLoop& loop, Config config, Handlers handlers)
    : loop_(loop), config_(std::move(config)), handlers_(std::move(handlers)) {}

AmqpClient::~AmqpClient() {
  if (tick_timer_ != 0) loop_.CancelTimer(tick_timer_);
  if (connection_ && state_ != State::kClosed) connection_->Close();
  if (driver_initialised_) pn_connection_driver_destroy(&driver_);
}

void AmqpClient::Start() {
  state_ = State::kConnecting;
  std::weak_ptr<AmqpClient> weak = weak_from_this();
  connection_ = io::TcpConnection::Connect(loop_, config_.broker, [weak](int status) {
    if (auto self = weak.lock()) self->OnConnected(status);
  });
  io::TcpConnection::Handlers handlers;
  handlers.on_data = [weak](std::string_view bytes) {
    if (auto self = weak.lock()) self->OnData(bytes);
  };
  handlers.on_close = [weak](int status) {
    if (auto self = weak.lock()) self->OnClose(status);
  };
  handlers.on_drain = [weak] {
    auto self = weak.lock();
    if (self && self->state_ == State::kReady && self->handlers_.on_drain) self->handlers_.on_drain();
  };
  connection_->set_watermarks(config_.max_queued_bytes / 2, config_.max_queued_bytes);
  connection_->SetHandlers(std::move(handlers));
}

void AmqpClient::OnConnected(int status) {
  if (state_ != State::kConnecting) return;
  if (status < 0) {
    Fail("cannot connect to " + config_.broker.ToString() + ": " + UvError(status));
    return;
  }
  if (pn_connection_driver_init(&driver_, nullptr, nullptr) != 0) {
    Fail("cannot create a Proton connection driver");
    return;
  }
  driver_initialised_ = true;
  state_ = State::kAttaching;
  connection_->StartReading();
  OpenEndpoints();
  Process();
}

// Everything is opened at once (pipelined): open, begin, the attaches and
// the receivers' first flow go out in the first write.
void AmqpClient::OpenEndpoints() {
  if (config_.sasl_anonymous) pn_sasl_allowed_mechs(pn_sasl(driver_.transport), "ANONYMOUS");
  pn_connection_t* connection = driver_.connection;
  pn_connection_set_container(connection, config_.container_id.c_str());
  pn_connection_set_hostname(connection, config_.broker.host.c_str());
  pn_connection_open(connection);
  pn_session_t* session = pn_session(connection);
  pn_session_open(session);
  const auto send_mode = config_.presettled ? PN_SND_SETTLED : PN_SND_UNSETTLED;
  const auto receive_mode = config_.exactly_once && !config_.presettled ? PN_RCV_SECOND : PN_RCV_FIRST;
  if (!config_.target.empty()) {
    sender_ = pn_sender(session, (config_.container_id + "-sender").c_str());
    pn_terminus_set_address(pn_link_target(sender_), config_.target.c_str());
    pn_terminus_set_address(pn_link_source(sender_), config_.container_id.c_str());
    pn_link_set_snd_settle_mode(sender_, send_mode);
    pn_link_set_rcv_settle_mode(sender_, receive_mode);
    pn_link_open(sender_);
  }
  for (size_t i = 0; i < config_.sources.size(); ++i) {
    pn_link_t* receiver = pn_receiver(session, (config_.container_id + "-receiver-" + std::to_string(i)).c_str());
    pn_terminus_set_address(pn_link_source(receiver), config_.sources[i].c_str());
    pn_terminus_set_address(pn_link_target(receiver), config_.container_id.c_str());
    pn_link_set_snd_settle_mode(receiver, send_mode);
    pn_link_set_rcv_settle_mode(receiver, receive_mode);
    pn_link_open(receiver);
    pn_link_flow(receiver, static_cast<int>(config_.credit));
    receivers_.push_back(receiver);
  }
}

void AmqpClient::OnData(std::string_view bytes) {
  if (!driver_initialised_) return;
  arrival_ns_ = MonotonicNowNs();
  while (!bytes.empty() && state_ != State::kClosed) {
    pn_rwbytes_t buffer = pn_connection_driver_read_buffer(&driver_);
    if (buffer.size == 0) {
      Process();  // events free the driver's input buffer
      buffer = pn_connection_driver_read_buffer(&driver_);
      if (buffer.size == 0) break;  // the transport stopped reading
    }
    const size_t n = std::min(buffer.size, bytes.size());
    std::memcpy(buffer.start, bytes.data(), n);
    pn_connection_driver_read_done(&driver_, n);
    bytes.remove_prefix(n);
  }
  Process();
}

void AmqpClient::OnClose(int status) {
  socket_closed_ = true;
  if (state_ == State::kClosed) return;
  std::string error = "connection to " + config_.broker.ToString() + " closed";
  if (state_ == State::kConnecting) error = "cannot connect to " + config_.broker.ToString();
  if (driver_initialised_) {
    pn_connection_driver_read_close(&driver_);
    error = Describe(pn_connection_remote_condition(driver_.connection),
                     Describe(pn_transport_condition(driver_.transport), error));
  }
  if (status < 0 && status != UV_EOF) error += ": " + UvError(status);
  Fail(error);
}

void AmqpClient::Process() {
  if (!driver_initialised_ || processing_ || state_ == State::kClosed) return;
  processing_ = true;
  for (;;) {
    while (state_ != State::kClosed) {
      pn_event_t* event = pn_connection_driver_next_event(&driver_);
      if (event == nullptr) break;
      Handle(event);
    }
    if (state_ == State::kClosed) break;
    const pn_bytes_t out = pn_connection_driver_write_buffer(&driver_);
    if (out.size == 0) break;
    connection_->Write(std::string_view(out.start, out.size));
    pn_connection_driver_write_done(&driver_, out.size);
  }
  processing_ = false;
  if (state_ != State::kClosed) ArmTick();
}

// Sends made outside the driver's events are written by one Process per
// loop iteration, so a burst of messages becomes one write.
void AmqpClient::ScheduleProcess() {
  if (process_posted_ || processing_) return;
  process_posted_ = true;
  std::weak_ptr<AmqpClient> weak = weak_from_this();
  loop_.Post([weak] {
    auto self = weak.lock();
    if (!self) return;
    self->process_posted_ = false;
    self->Process();
  });
}

// Heartbeats and the broker's idle timeout: the driver says when it next
// needs a tick.
void AmqpClient::ArmTick() {
  const int64_t now = NowMs();
  const int64_t deadline = pn_transport_tick(driver_.transport, now);
  if (deadline == 0 || (tick_timer_ != 0 && tick_deadline_ms_ <= deadline)) return;
  if (tick_timer_ != 0) loop_.CancelTimer(tick_timer_);
  tick_deadline_ms_ = deadline;
  std::weak_ptr<AmqpClient> weak = weak_from_this();
  tick_timer_ = loop_.AddTimer(std::max<int64_t>(0, deadline - now), [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->tick_timer_ = 0;
    self->Process();
  });
}

void AmqpClient::Handle(pn_event_t* event) {
  switch (pn_event_type(event)) {
    case PN_CONNECTION_REMOTE_OPEN:
      connection_opened_ = true;
      MaybeReady();
      break;
    case PN_LINK_REMOTE_OPEN:
      OnLinkRemoteOpen(pn_event_link(event));
      break;
    case PN_LINK_FLOW:
      OnLinkFlow(pn_event_link(event));
      break;
    case PN_DELIVERY: {
      pn_delivery_t* delivery = pn_event_delivery(event);
      if (pn_link_is_receiver(pn_delivery_link(delivery))) {
        OnReceived(delivery);
      } else {
        OnOutcome(delivery);
      }
      break;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
      pn_link_t* link = pn_event_link(event);
      Fail(LinkName(link) + " closed by the broker: " + Describe(pn_link_remote_condition(link), "no reason given"));
      break;
    }
    case PN_SESSION_REMOTE_CLOSE:
      Fail("session ended by the broker: " +
           Describe(pn_session_remote_condition(pn_event_session(event)), "no reason given"));
      break;
    case PN_CONNECTION_REMOTE_CLOSE:
      Fail("connection closed by the broker: " +
           Describe(pn_connection_remote_condition(driver_.connection), "no reason given"));
      break;
    case PN_TRANSPORT_ERROR:
      Fail("AMQP transport error with " + config_.broker.ToString() + ": " +
           Describe(pn_transport_condition(driver_.transport), "unknown"));
      break;
    default:
      break;
  }
}

void AmqpClient::OnLinkRemoteOpen(pn_link_t* link) {
  // A broker refusing an attach answers with a null terminus, then detaches
  // with the reason: wait for that.
  pn_terminus_t* remote = pn_link_is_sender(link) ? pn_link_remote_target(link) : pn_link_remote_source(link);
  if (pn_terminus_get_type(remote) == PN_UNSPECIFIED) return;
  ++links_attached_;
  MaybeReady();
}

void AmqpClient::MaybeReady() {
  const uint32_t wanted = (sender_ ? 1u : 0u) + static_cast<uint32_t>(receivers_.size());
  if (state_ != State::kAttaching || !connection_opened_ || links_attached_ < wanted) return;
  state_ = State::kReady;
  if (handlers_.on_ready) handlers_.on_ready();
}

void AmqpClient::OnLinkFlow(pn_link_t* link) {
  if (link == sender_ && state_ == State::kReady && pn_link_credit(link) > 0 && handlers_.on_drain) {
    handlers_.on_drain();
  }
}

void AmqpClient::OnReceived(pn_delivery_t* delivery) {
  // (pn_delivery_settled: the broker settled it.)
  if (config_.exactly_once && !pn_delivery_readable(delivery) && pn_delivery_settled(delivery)) {
    pn_delivery_settle(delivery);  // mode second: the broker settled after our outcome
    return;
  }
  if (!pn_delivery_readable(delivery) || pn_delivery_partial(delivery)) return;
  pn_link_t* link = pn_delivery_link(delivery);
  received_.resize(pn_delivery_pending(delivery));
  const ssize_t n = pn_link_recv(link, received_.data(), received_.size());
  received_.resize(n > 0 ? static_cast<size_t>(n) : 0);
  pn_link_advance(link);
  const bool second = config_.exactly_once && !pn_delivery_settled(delivery);
  if (!pn_delivery_settled(delivery)) pn_delivery_update(delivery, PN_ACCEPTED);
  if (!second) pn_delivery_settle(delivery);  // mode second: once the broker has settled
  const int credit = pn_link_credit(link);
  if (credit <= static_cast<int>(config_.credit / 2)) pn_link_flow(link, static_cast<int>(config_.credit) - credit);
  // An unreadable body reaches the tally as an empty payload: counted as foreign.
  const std::string_view body = FindBody(received_).value_or(std::string_view());
  if (handlers_.on_message) handlers_.on_message(body, arrival_ns_);
}

void AmqpClient::OnOutcome(pn_delivery_t* delivery) {
  if (!pn_delivery_updated(delivery) && !pn_delivery_settled(delivery)) return;
  const uint64_t outcome = pn_delivery_remote_state(delivery);
  if (outcome == 0 && !pn_delivery_settled(delivery)) return;  // no outcome yet
  const pn_delivery_tag_t tag = pn_delivery_tag(delivery);
  pn_delivery_settle(delivery);
  if (config_.presettled || tag.size != 2) return;
  const auto id = static_cast<uint16_t>(static_cast<uint8_t>(tag.start[0]) << 8 | static_cast<uint8_t>(tag.start[1]));
  if (handlers_.on_publish_done) handlers_.on_publish_done(id, outcome == PN_ACCEPTED);
}

void AmqpClient::Publish(const mqtt::PublishPacket& fields, std::string_view payload) {
  if (state_ != State::kReady || sender_ == nullptr) return;
  if (payload.size() != prefix_size_) {
    prefix_ = DataSectionPrefix(payload.size());
    prefix_size_ = payload.size();
  }
  pn_delivery_t* delivery;
  if (fields.qos == 0 || config_.presettled) {
    const uint64_t tag = presettled_tag_++;
    delivery = pn_delivery(sender_, pn_dtag(reinterpret_cast<const char*>(&tag), sizeof tag));
  } else {
    const char tag[2] = {static_cast<char>(fields.packet_id >> 8), static_cast<char>(fields.packet_id & 0xff)};
    delivery = pn_delivery(sender_, pn_dtag(tag, sizeof tag));
  }
  pn_link_send(sender_, prefix_.data(), prefix_.size());
  pn_link_send(sender_, payload.data(), payload.size());
  pn_link_advance(sender_);
  if (config_.presettled) pn_delivery_settle(delivery);
  ScheduleProcess();
}

void AmqpClient::Disconnect() {
  handlers_ = Handlers{};
  if (!connection_ || state_ == State::kClosed) return;
  if (driver_initialised_ && state_ != State::kConnecting) {
    pn_connection_close(driver_.connection);
    Process();  // writes the close frame
  }
  state_ = State::kClosed;
  if (tick_timer_ != 0) loop_.CancelTimer(tick_timer_);
  tick_timer_ = 0;
  connection_->Close();
}

bool AmqpClient::open() const { return connection_ && !socket_closed_; }

bool AmqpClient::blocked() const {
  if (connection_ && connection_->above_high_watermark()) return true;
  return sender_ != nullptr && pn_link_credit(sender_) <= 0;
}

void AmqpClient::Fail(const std::string& error) {
  const State before = state_;
  state_ = State::kClosed;
  if (tick_timer_ != 0) loop_.CancelTimer(tick_timer_);
  tick_timer_ = 0;
  if (connection_ && before != State::kClosed) connection_->Close();
  auto on_failed = std::move(handlers_.on_failed);
  handlers_.on_failed = nullptr;
  if (on_failed) on_failed(error);
}

}  // namespace estuary::bench
