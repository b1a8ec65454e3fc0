#include "tools/bench/fake_amqp_broker.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <set>
#include <string>

namespace estuary::bench::testing {

// Every connection and the routing between them. Loop thread only.
class FakeAmqpBroker::Hub {
 public:
  Hub(const FakeAmqpBrokerConfig& config, std::atomic<uint64_t>& transfers)
      : config_(config), transfers_(transfers) {}
  ~Hub() {
    for (Connection& connection : connections_) {
      connection.tcp->SetHandlers({});  // they point into this hub
      connection.tcp->Abort();
      pn_connection_driver_destroy(&connection.driver);
    }
  }

  void Accept(io::UvLoop& loop, int fd) {
    auto tcp = io::TcpConnection::Adopt(loop, fd);
    if (!tcp) return;
    Connection& connection = connections_.emplace_back();
    connection.tcp = tcp;
    if (pn_connection_driver_init(&connection.driver, nullptr, nullptr) != 0) std::abort();
    pn_transport_set_server(connection.driver.transport);
    if (config_.sasl) pn_sasl_allowed_mechs(pn_sasl(connection.driver.transport), "ANONYMOUS");
    Connection* c = &connection;
    io::TcpConnection::Handlers handlers;
    handlers.on_data = [this, c](std::string_view bytes) { OnData(*c, bytes); };
    handlers.on_close = [this, c](int) { OnClosed(*c); };
    tcp->SetHandlers(std::move(handlers));
    tcp->StartReading();
  }

 private:
  struct Connection {
    std::shared_ptr<io::TcpConnection> tcp;
    pn_connection_driver_t driver{};
    bool closed = false;
    bool processing = false;
  };
  // A receiving client's link: the broker's sender and its backlog.
  struct Subscription {
    Connection* connection;
    pn_link_t* link;
    std::string address;
    std::deque<std::string> backlog;
    uint64_t next_tag = 0;
  };

  void OnData(Connection& c, std::string_view bytes) {
    while (!bytes.empty() && !c.closed) {
      pn_rwbytes_t buffer = pn_connection_driver_read_buffer(&c.driver);
      if (buffer.size == 0) {
        Process(c);
        buffer = pn_connection_driver_read_buffer(&c.driver);
        if (buffer.size == 0) break;
      }
      const size_t n = std::min(buffer.size, bytes.size());
      std::memcpy(buffer.start, bytes.data(), n);
      pn_connection_driver_read_done(&c.driver, n);
      bytes.remove_prefix(n);
    }
    Process(c);
  }

  void OnClosed(Connection& c) {
    c.closed = true;
    std::erase_if(subscriptions_, [&](const auto& s) { return s->connection == &c; });
    dirty_.erase(&c);
  }

  void Process(Connection& c) {
    if (c.closed || c.processing) return;
    c.processing = true;
    for (;;) {
      while (pn_event_t* event = pn_connection_driver_next_event(&c.driver)) Handle(c, event);
      const pn_bytes_t out = pn_connection_driver_write_buffer(&c.driver);
      if (out.size == 0) break;
      c.tcp->Write(std::string_view(out.start, out.size));
      pn_connection_driver_write_done(&c.driver, out.size);
    }
    if (pn_connection_driver_finished(&c.driver)) c.tcp->Close();
    c.processing = false;
    // Deliveries forwarded to other connections are written now.
    while (!dirty_.empty()) {
      Connection* other = *dirty_.begin();
      dirty_.erase(dirty_.begin());
      Process(*other);
    }
  }

  void Handle(Connection& c, pn_event_t* event) {
    switch (pn_event_type(event)) {
      case PN_CONNECTION_REMOTE_OPEN:
        pn_connection_set_container(c.driver.connection, "fake-amqp-broker");
        pn_connection_open(pn_event_connection(event));
        break;
      case PN_SESSION_REMOTE_OPEN:
        pn_session_open(pn_event_session(event));
        break;
      case PN_LINK_REMOTE_OPEN:
        OnAttach(c, pn_event_link(event));
        break;
      case PN_LINK_FLOW:
        if (pn_link_is_sender(pn_event_link(event))) Drain(FindSubscription(pn_event_link(event)));
        break;
      case PN_DELIVERY:
        OnDelivery(pn_event_delivery(event));
        break;
      case PN_LINK_REMOTE_CLOSE:
      case PN_LINK_REMOTE_DETACH: {
        pn_link_t* link = pn_event_link(event);
        std::erase_if(subscriptions_, [&](const auto& s) { return s->link == link; });
        pn_link_close(link);
        break;
      }
      case PN_SESSION_REMOTE_CLOSE:
        pn_session_close(pn_event_session(event));
        break;
      case PN_CONNECTION_REMOTE_CLOSE:
        pn_connection_close(pn_event_connection(event));
        break;
      default:
        break;
    }
  }

  void OnAttach(Connection& c, pn_link_t* link) {
    pn_terminus_copy(pn_link_source(link), pn_link_remote_source(link));
    pn_terminus_copy(pn_link_target(link), pn_link_remote_target(link));
    pn_link_set_snd_settle_mode(link, pn_link_remote_snd_settle_mode(link));
    pn_link_set_rcv_settle_mode(link, pn_link_remote_rcv_settle_mode(link));
    pn_terminus_t* node = pn_link_is_sender(link) ? pn_link_remote_source(link) : pn_link_remote_target(link);
    const char* address = pn_terminus_get_address(node);
    const std::string name = address ? address : "";
    if (!config_.refuse_address.empty() && name == config_.refuse_address) {
      // The refusal the spec describes (2.6.3): attach with a null terminus,
      // then detach with the error.
      pn_terminus_set_type(pn_link_is_sender(link) ? pn_link_source(link) : pn_link_target(link), PN_UNSPECIFIED);
      pn_link_open(link);
      pn_condition_set_name(pn_link_condition(link), "amqp:not-found");
      pn_condition_set_description(pn_link_condition(link), ("no node " + name).c_str());
      pn_link_close(link);
      return;
    }
    pn_link_open(link);
    if (pn_link_is_receiver(link)) {
      pn_link_flow(link, static_cast<int>(config_.sender_credit));
    } else {
      subscriptions_.push_back(std::make_unique<Subscription>(Subscription{&c, link, name, {}, 0}));
    }
  }

  void OnDelivery(pn_delivery_t* delivery) {
    pn_link_t* link = pn_delivery_link(delivery);
    if (pn_link_is_sender(link)) {  // a receiving client's disposition
      if (pn_delivery_updated(delivery)) pn_delivery_settle(delivery);
      return;
    }
    if (!pn_delivery_readable(delivery) || pn_delivery_partial(delivery)) return;
    std::string bytes(pn_delivery_pending(delivery), '\0');
    const ssize_t n = pn_link_recv(link, bytes.data(), bytes.size());
    bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
    pn_link_advance(link);
    ++transfers_;
    const bool rejected = config_.reject_unsettled && !pn_delivery_settled(delivery);
    if (!pn_delivery_settled(delivery)) pn_delivery_update(delivery, rejected ? PN_REJECTED : PN_ACCEPTED);
    pn_delivery_settle(delivery);
    const int credit = pn_link_credit(link);
    if (credit <= static_cast<int>(config_.sender_credit / 2)) {
      pn_link_flow(link, static_cast<int>(config_.sender_credit) - credit);
    }
    if (rejected) return;
    const char* target = pn_terminus_get_address(pn_link_remote_target(link));
    for (const auto& subscription : subscriptions_) {
      if (!target || subscription->address != target) continue;
      subscription->backlog.push_back(bytes);
      Drain(subscription.get());
    }
  }

  void Drain(Subscription* s) {
    if (s == nullptr) return;
    while (!s->backlog.empty() && pn_link_credit(s->link) > 0) {
      const uint64_t tag = s->next_tag++;
      pn_delivery_t* delivery = pn_delivery(s->link, pn_dtag(reinterpret_cast<const char*>(&tag), sizeof tag));
      pn_link_send(s->link, s->backlog.front().data(), s->backlog.front().size());
      pn_link_advance(s->link);
      if (pn_link_snd_settle_mode(s->link) == PN_SND_SETTLED) pn_delivery_settle(delivery);
      s->backlog.pop_front();
    }
    dirty_.insert(s->connection);
  }

  Subscription* FindSubscription(pn_link_t* link) {
    for (const auto& s : subscriptions_) {
      if (s->link == link) return s.get();
    }
    return nullptr;
  }

  const FakeAmqpBrokerConfig& config_;
  std::atomic<uint64_t>& transfers_;
  std::list<Connection> connections_;  // stable addresses; drivers freed with the hub
  std::vector<std::unique_ptr<Subscription>> subscriptions_;
  std::set<Connection*> dirty_;
};

FakeAmqpBroker::FakeAmqpBroker(FakeAmqpBrokerConfig config) : config_(std::move(config)) {
  thread_ = std::thread([this] {
    io::UvLoop loop;
    Hub hub(config_, transfers_);
    auto listener = io::TcpListener::Listen(loop, {"127.0.0.1", 0}, [&](int fd) { hub.Accept(loop, fd); });
    if (!listener) std::abort();
    port_ = (*listener)->port();
    loop_ = &loop;
    listening_.set_value();
    loop.Run();
    (*listener)->Close();
  });
  listening_.get_future().wait();
}

FakeAmqpBroker::~FakeAmqpBroker() {
  loop_->mailbox().Send([this] { loop_->Stop(); });
  thread_.join();
}

}  // namespace estuary::bench::testing
