#pragma once
// AmqpClient: one Qpid Proton C++ client connection for conformance tests.
// A proton::container runs on its own thread; the test thread asks for
// actions (open a link, send, grant credit, settle, detach, close), which
// run on the container thread, and reads what happened (opens, errors,
// messages, outcomes) from an event queue with a deadline. Proton objects
// never leave the container thread; events carry copies.
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/work_queue.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace estuary::conformance {

struct AmqpEvent {
  enum class Kind {
    kConnectionOpen,
    kConnectionClose,   // the server closed the connection (condition, if any)
    kTransportError,    // the transport failed (SASL failure, idle timeout, ...)
    kReceiverOpen,
    kSenderOpen,
    kLinkClose,         // the server detached or closed a link (condition, if any)
    kMessage,
    kAccepted,
    kRejected,
    kReleased,
    kDrainFinished,
  };
  Kind kind;
  std::string link;        // link name, where there is one
  std::string condition;   // error condition name, or empty
  std::string description;
  std::string address;     // kReceiverOpen: the source address the server answered with
  proton::message message; // kMessage
  uint64_t delivery = 0;   // kMessage: id for Settle()
  bool settled = false;    // kMessage: arrived pre-settled
  uint32_t delivery_count = 0;
  int rcv_settle_mode = 0;  // kSenderOpen, kReceiverOpen: the server's (0 first, 1 second)
};

struct AmqpClientOptions {
  std::string container_id{};   // empty: Proton picks one
  std::string user{};           // with `password`: SASL PLAIN
  std::string password{};
  std::string mechanisms{};     // SASL mechanisms allowed (empty: Proton's default)
  bool sasl = true;             // false: no SASL layer at all
  std::chrono::milliseconds idle_timeout{0};
  uint32_t max_frame_size = 0;  // 0: Proton's default
};

struct LinkOptions {
  bool presettled = false;        // snd-settle-mode settled (at most once)
  bool exactly_once = false;      // rcv-settle-mode second
  bool durable = false;           // receiver: durable terminus, expiry-policy never
  bool dynamic = false;           // receiver: dynamic source
  int credit = 100;               // receiver: credit granted on attach (0: none)
};

class AmqpClient : public proton::messaging_handler {
 public:
  static constexpr std::chrono::seconds kWait{5};

  AmqpClient(const std::string& host, uint16_t port, AmqpClientOptions options = {});
  ~AmqpClient() override;
  AmqpClient(const AmqpClient&) = delete;
  AmqpClient& operator=(const AmqpClient&) = delete;

  // Waits for the server's open; false (and the error in `error`) if the
  // connection failed first.
  bool WaitOpen(std::string* error = nullptr, std::chrono::milliseconds timeout = kWait);

  void OpenReceiver(const std::string& name, const std::string& source, LinkOptions options = {});
  void OpenSender(const std::string& name, const std::string& target, LinkOptions options = {});
  // Sends on a sender link (queued by Proton until there is credit).
  void Send(const std::string& link, proton::message message);
  void Send(const std::string& link, const std::string& to, const std::string& body);
  // Sends `bytes` as a transfer's payload as they are (not a message encoding).
  void SendRawTransfer(const std::string& link, const std::string& bytes);
  void AddCredit(const std::string& link, int credit);
  void Drain(const std::string& link);
  enum class Outcome { kAccept, kReject, kRelease, kModifyUndeliverable };
  void Settle(uint64_t delivery, Outcome outcome);
  void Detach(const std::string& link);
  void CloseLink(const std::string& link);
  void Close();
  // Runs `fn` on the container thread and waits for it.
  void RunSync(std::function<void()> fn);

  // The first event of `kind` (and `link`, unless empty), removed from the
  // queue; nullopt after `timeout`.
  std::optional<AmqpEvent> Wait(AmqpEvent::Kind kind, const std::string& link = "",
                                std::chrono::milliseconds timeout = kWait);
  // Up to `count` messages on `link`, waiting at most `timeout` overall.
  std::vector<AmqpEvent> TakeMessages(const std::string& link, size_t count,
                                      std::chrono::milliseconds timeout = kWait);
  // Events of `kind` seen so far on `link` (not removed).
  size_t Count(AmqpEvent::Kind kind, const std::string& link = "");
  // The remote container-id, idle-timeout (ms) and max-frame-size from the server's open.
  std::string remote_container_id();

 private:
  void Post(std::function<void()> fn);
  void Push(AmqpEvent event);

  // proton::messaging_handler (container thread)
  void on_container_start(proton::container& container) override;
  void on_connection_open(proton::connection& connection) override;
  void on_connection_close(proton::connection& connection) override;
  void on_transport_error(proton::transport& transport) override;
  void on_error(const proton::error_condition& condition) override;
  void on_receiver_open(proton::receiver& receiver) override;
  void on_sender_open(proton::sender& sender) override;
  void on_receiver_close(proton::receiver& receiver) override;
  void on_sender_close(proton::sender& sender) override;
  void on_receiver_detach(proton::receiver& receiver) override;
  void on_sender_detach(proton::sender& sender) override;
  void on_message(proton::delivery& delivery, proton::message& message) override;
  void on_tracker_accept(proton::tracker& tracker) override;
  void on_tracker_reject(proton::tracker& tracker) override;
  void on_tracker_release(proton::tracker& tracker) override;
  void on_receiver_drain_finish(proton::receiver& receiver) override;

  std::string url_;
  AmqpClientOptions options_;
  proton::container container_;
  std::thread thread_;
  // Container thread only.
  proton::connection connection_;
  std::map<std::string, proton::sender> senders_;
  std::map<std::string, proton::receiver> receivers_;
  std::map<uint64_t, proton::delivery> unsettled_;
  uint64_t next_delivery_ = 0;
  // Shared.
  std::mutex mutex_;
  proton::work_queue* work_queue_ = nullptr;  // set once the connection exists
  std::condition_variable changed_;
  std::deque<AmqpEvent> events_;
  std::map<std::pair<AmqpEvent::Kind, std::string>, size_t> counts_;
  std::string remote_container_id_;
};

}  // namespace estuary::conformance
