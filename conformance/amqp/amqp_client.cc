#include "conformance/amqp/amqp_client.h"

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/error_condition.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender_options.hpp>
#include <proton/source_options.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <proton/returned.hpp>

#include <future>

namespace estuary::conformance {
struct LinkTag {};
}  // namespace estuary::conformance

// The C link behind a Proton C++ link (proton::returned<U> is a friend of
// every wrapper; the C++ API has no rcv-settle-mode second).
template <>
class proton::returned<estuary::conformance::LinkTag> {
 public:
  static pn_link_t* Of(const proton::link& link) {
    return static_cast<const internal::object<pn_link_t>&>(link).pn_object();
  }
  static pn_delivery_t* Of(const proton::transfer& transfer) {
    return static_cast<const internal::object<pn_delivery_t>&>(transfer).pn_object();
  }
};

namespace estuary::conformance {
namespace {

pn_link_t* LinkOf(const proton::link& link) { return proton::returned<LinkTag>::Of(link); }

}  // namespace

AmqpClient::AmqpClient(const std::string& host, uint16_t port, AmqpClientOptions options)
    : url_(host + ":" + std::to_string(port)), options_(std::move(options)), container_(*this) {
  container_.auto_stop(false);
  thread_ = std::thread([this] { container_.run(); });
}

AmqpClient::~AmqpClient() {
  container_.stop();
  thread_.join();
}

void AmqpClient::on_container_start(proton::container& container) {
  proton::connection_options options;
  if (!options_.container_id.empty()) options.container_id(options_.container_id);
  if (!options_.sasl) {
    options.sasl_enabled(false);
  } else {
    options.sasl_enabled(true).sasl_allow_insecure_mechs(true);
    if (!options_.user.empty()) options.user(options_.user).password(options_.password);
    if (!options_.mechanisms.empty()) options.sasl_allowed_mechs(options_.mechanisms);
  }
  if (options_.idle_timeout.count() > 0) options.idle_timeout(proton::duration(options_.idle_timeout.count()));
  if (options_.max_frame_size > 0) options.max_frame_size(options_.max_frame_size);
  connection_ = container.connect(url_, options);
  std::lock_guard lock(mutex_);
  work_queue_ = &connection_.work_queue();
  changed_.notify_all();
}

void AmqpClient::Post(std::function<void()> fn) {
  // The connection's work queue is the thread-safe way in, and it wakes
  // the container thread (container::schedule from another thread does not).
  proton::work_queue* queue = nullptr;
  {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kWait, [this] { return work_queue_ != nullptr; });
    queue = work_queue_;
  }
  if (queue != nullptr) queue->add(std::move(fn));
}

void AmqpClient::RunSync(std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  Post([fn = std::move(fn), done] {
    fn();
    done->set_value();
  });
  future.wait_for(kWait);
}

void AmqpClient::Push(AmqpEvent event) {
  std::lock_guard lock(mutex_);
  ++counts_[{event.kind, event.link}];
  events_.push_back(std::move(event));
  changed_.notify_all();
}

std::optional<AmqpEvent> AmqpClient::Wait(AmqpEvent::Kind kind, const std::string& link,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto it = events_.begin(); it != events_.end(); ++it) {
      if (it->kind == kind && (link.empty() || it->link == link)) {
        AmqpEvent event = std::move(*it);
        events_.erase(it);
        return event;
      }
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      // One last look: the event may have come with the timeout.
      for (auto it = events_.begin(); it != events_.end(); ++it) {
        if (it->kind == kind && (link.empty() || it->link == link)) {
          AmqpEvent event = std::move(*it);
          events_.erase(it);
          return event;
        }
      }
      return std::nullopt;
    }
  }
}

std::vector<AmqpEvent> AmqpClient::TakeMessages(const std::string& link, size_t count,
                                                std::chrono::milliseconds timeout) {
  std::vector<AmqpEvent> out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < count) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    auto event = Wait(AmqpEvent::Kind::kMessage, link, left);
    if (!event) break;
    out.push_back(std::move(*event));
  }
  return out;
}

size_t AmqpClient::Count(AmqpEvent::Kind kind, const std::string& link) {
  std::lock_guard lock(mutex_);
  auto it = counts_.find({kind, link});
  return it == counts_.end() ? 0 : it->second;
}

std::string AmqpClient::remote_container_id() {
  std::lock_guard lock(mutex_);
  return remote_container_id_;
}

bool AmqpClient::WaitOpen(std::string* error, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  for (;;) {
    for (const auto& event : events_) {
      if (event.kind == AmqpEvent::Kind::kConnectionOpen) return true;
      if (event.kind == AmqpEvent::Kind::kTransportError || event.kind == AmqpEvent::Kind::kConnectionClose) {
        if (error) *error = event.condition + ": " + event.description;
        return false;
      }
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (error) *error = "timed out";
      return false;
    }
  }
}

void AmqpClient::OpenReceiver(const std::string& name, const std::string& source, LinkOptions options) {
  Post([this, name, source, options] {
    proton::source_options src;
    if (options.dynamic) {
      src.dynamic(true);
    } else {
      src.address(source);
    }
    if (options.durable) {
      src.durability_mode(proton::source::UNSETTLED_STATE).expiry_policy(proton::source::NEVER);
    }
    proton::receiver_options opts;
    opts.name(name).source(src).credit_window(0).auto_accept(false);
    if (options.presettled) opts.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    proton::receiver receiver = connection_.open_receiver(options.dynamic ? "" : source, opts);
    // Proton C++ has no exactly-once mode: ask for rcv-settle-mode second on
    // the C link before the attach is written.
    if (options.exactly_once) pn_link_set_rcv_settle_mode(LinkOf(receiver), PN_RCV_SECOND);
    receivers_[name] = receiver;
    if (options.credit > 0) receiver.add_credit(options.credit);
  });
}

void AmqpClient::OpenSender(const std::string& name, const std::string& target, LinkOptions options) {
  Post([this, name, target, options] {
    proton::sender_options opts;
    opts.name(name).target(proton::target_options().address(target));
    if (options.presettled) opts.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    proton::sender sender = connection_.open_sender(target, opts);
    if (options.exactly_once) pn_link_set_rcv_settle_mode(LinkOf(sender), PN_RCV_SECOND);
    senders_[name] = sender;
  });
}

void AmqpClient::Send(const std::string& link, proton::message message) {
  Post([this, link, message]() mutable {
    auto it = senders_.find(link);
    if (it != senders_.end()) it->second.send(message);
  });
}

void AmqpClient::Send(const std::string& link, const std::string& to, const std::string& body) {
  proton::message message;
  if (!to.empty()) message.to(to);
  message.body(proton::binary(body));
  Send(link, std::move(message));
}

void AmqpClient::SendRawTransfer(const std::string& link, const std::string& bytes) {
  Post([this, link, bytes] {
    auto it = senders_.find(link);
    if (it == senders_.end()) return;
    pn_link_t* c_link = LinkOf(it->second);
    pn_delivery(c_link, pn_dtag("raw", 3));
    pn_link_send(c_link, bytes.data(), bytes.size());
    pn_link_advance(c_link);
  });
}

void AmqpClient::AddCredit(const std::string& link, int credit) {
  Post([this, link, credit] {
    auto it = receivers_.find(link);
    if (it != receivers_.end()) it->second.add_credit(credit);
  });
}

void AmqpClient::Drain(const std::string& link) {
  Post([this, link] {
    auto it = receivers_.find(link);
    if (it != receivers_.end()) it->second.drain();
  });
}

void AmqpClient::Settle(uint64_t delivery, Outcome outcome) {
  Post([this, delivery, outcome] {
    auto it = unsettled_.find(delivery);
    if (it == unsettled_.end()) return;
    switch (outcome) {
      case Outcome::kAccept: it->second.accept(); break;
      case Outcome::kReject: it->second.reject(); break;
      case Outcome::kRelease: it->second.release(); break;
      case Outcome::kModifyUndeliverable: it->second.modify(); break;
    }
    unsettled_.erase(it);
  });
}

void AmqpClient::Detach(const std::string& link) {
  Post([this, link] {
    if (auto it = receivers_.find(link); it != receivers_.end()) it->second.detach();
    if (auto it = senders_.find(link); it != senders_.end()) it->second.detach();
  });
}

void AmqpClient::CloseLink(const std::string& link) {
  Post([this, link] {
    if (auto it = receivers_.find(link); it != receivers_.end()) it->second.close();
    if (auto it = senders_.find(link); it != senders_.end()) it->second.close();
  });
}

void AmqpClient::Close() {
  Post([this] { connection_.close(); });
}

// --- container thread ----------------------------------------------------------

void AmqpClient::on_connection_open(proton::connection& connection) {
  {
    std::lock_guard lock(mutex_);
    remote_container_id_ = connection.container_id();
  }
  Push({AmqpEvent::Kind::kConnectionOpen, "", "", "", "", {}, 0, false, 0, 0});
}

void AmqpClient::on_connection_close(proton::connection& connection) {
  const proton::error_condition error = connection.error();
  Push({AmqpEvent::Kind::kConnectionClose, "", error.name(), error.description(), "", {}, 0, false, 0, 0});
}

void AmqpClient::on_transport_error(proton::transport& transport) {
  const proton::error_condition error = transport.error();
  Push({AmqpEvent::Kind::kTransportError, "", error.name(), error.description(), "", {}, 0, false, 0, 0});
}

void AmqpClient::on_error(const proton::error_condition&) {}  // reported by the specific callbacks

void AmqpClient::on_receiver_open(proton::receiver& receiver) {
  AmqpEvent event{AmqpEvent::Kind::kReceiverOpen, receiver.name(), "", "", receiver.source().address(), {}, 0, false, 0, 0};
  event.rcv_settle_mode = static_cast<int>(pn_link_remote_rcv_settle_mode(LinkOf(receiver)));
  Push(std::move(event));
}

void AmqpClient::on_sender_open(proton::sender& sender) {
  AmqpEvent event{AmqpEvent::Kind::kSenderOpen, sender.name(), "", "", sender.target().address(), {}, 0, false, 0, 0};
  event.rcv_settle_mode = static_cast<int>(pn_link_remote_rcv_settle_mode(LinkOf(sender)));
  Push(std::move(event));
}

void AmqpClient::on_receiver_close(proton::receiver& receiver) {
  const proton::error_condition error = receiver.error();
  Push({AmqpEvent::Kind::kLinkClose, receiver.name(), error.name(), error.description(), "", {}, 0, false, 0, 0});
}

void AmqpClient::on_sender_close(proton::sender& sender) {
  const proton::error_condition error = sender.error();
  Push({AmqpEvent::Kind::kLinkClose, sender.name(), error.name(), error.description(), "", {}, 0, false, 0, 0});
}

void AmqpClient::on_receiver_detach(proton::receiver& receiver) { on_receiver_close(receiver); }

void AmqpClient::on_sender_detach(proton::sender& sender) { on_sender_close(sender); }

void AmqpClient::on_message(proton::delivery& delivery, proton::message& message) {
  AmqpEvent event{AmqpEvent::Kind::kMessage, delivery.receiver().name(), "", "", "", message, 0, false, 0, 0};
  event.settled = delivery.settled();
  event.delivery_count = message.delivery_count();
  if (!event.settled) {
    event.delivery = ++next_delivery_;
    unsettled_[event.delivery] = delivery;
  }
  Push(std::move(event));
}

void AmqpClient::on_tracker_accept(proton::tracker& tracker) {
  Push({AmqpEvent::Kind::kAccepted, tracker.sender().name(), "", "", "", {}, 0, false, 0, 0});
}

void AmqpClient::on_tracker_reject(proton::tracker& tracker) {
  // The rejected outcome's error, from the C object (the C++ API hides it).
  pn_condition_t* error = pn_disposition_condition(pn_delivery_remote(proton::returned<LinkTag>::Of(tracker)));
  const char* name = pn_condition_get_name(error);
  const char* description = pn_condition_get_description(error);
  Push({AmqpEvent::Kind::kRejected, tracker.sender().name(), name ? name : "", description ? description : "", "",
        {}, 0, false, 0, 0});
}

void AmqpClient::on_tracker_release(proton::tracker& tracker) {
  Push({AmqpEvent::Kind::kReleased, tracker.sender().name(), "", "", "", {}, 0, false, 0, 0});
}

void AmqpClient::on_receiver_drain_finish(proton::receiver& receiver) {
  Push({AmqpEvent::Kind::kDrainFinished, receiver.name(), "", "", "", {}, 0, false, 0, 0});
}

}  // namespace estuary::conformance
