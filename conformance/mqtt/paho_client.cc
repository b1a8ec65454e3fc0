#include "conformance/mqtt/paho_client.h"

namespace estuary::conformance {
namespace {

// Throws paho::exception if the token failed, and a timeout_error if it did
// not complete in time, so a test fails instead of hanging.
void WaitFor(const paho::token_ptr& token, const char* what) {
  if (!token->wait_for(PahoClient::kWait)) {
    throw paho::exception(MQTTASYNC_FAILURE, std::string("no answer in time to ") + what);
  }
}

}  // namespace

PahoClient::PahoClient(const std::string& uri, const std::string& client_id, int mqtt_version)
    : client_id_(client_id),
      version_(mqtt_version),
      client_(uri, client_id, paho::create_options(mqtt_version), nullptr) {
  client_.set_message_callback([this](paho::const_message_ptr message) { OnMessage(std::move(message)); });
  client_.set_connection_lost_handler([this](const std::string&) { OnGone(std::nullopt); });
  client_.set_disconnected_handler(
      [this](const paho::properties&, paho::ReasonCode reason) { OnGone(static_cast<int>(reason)); });
}

PahoClient::~PahoClient() {
  try {
    if (client_.is_connected()) client_.disconnect()->wait_for(kWait);
  } catch (const paho::exception&) {
    // Already gone: nothing to clean up.
  }
  client_.disable_callbacks();  // they point at members about to die
}

paho::connect_response PahoClient::Connect(const ConnectOptions& options) {
  return FinishConnect(StartConnect(options));
}

paho::connect_response PahoClient::FinishConnect(const paho::token_ptr& token) {
  WaitFor(token, "CONNECT");
  return token->get_connect_response();
}

paho::token_ptr PahoClient::StartConnect(const ConnectOptions& options) {
  paho::connect_options connect;
  connect.set_mqtt_version(version_);
  if (version_ == MQTTVERSION_5) {
    connect.set_clean_start(options.clean);
    connect.set_properties(options.properties);
  } else {
    connect.set_clean_session(options.clean);
  }
  connect.set_keep_alive_interval(options.keep_alive_s);
  connect.set_connect_timeout(5);
  connect.set_automatic_reconnect(false);
  if (options.will) connect.set_will(*options.will);
  if (options.ssl) connect.set_ssl(*options.ssl);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone_ = false;
    disconnect_reason_.reset();
  }
  return client_.connect(connect);
}

std::vector<paho::ReasonCode> PahoClient::Subscribe(const std::string& filter, int qos,
                                                    const paho::subscribe_options& options,
                                                    const paho::properties& properties) {
  auto token = client_.subscribe(filter, qos, options, properties);
  WaitFor(token, "SUBSCRIBE");
  return token->get_subscribe_response().get_reason_codes();
}

std::vector<paho::ReasonCode> PahoClient::Unsubscribe(const std::vector<std::string>& filters) {
  auto token = client_.unsubscribe(paho::string_collection::create(filters));
  WaitFor(token, "UNSUBSCRIBE");
  return token->get_unsubscribe_response().get_reason_codes();
}

void PahoClient::Publish(const std::string& topic, const std::string& payload, int qos, bool retain,
                         const paho::properties& properties) {
  Publish(paho::message::create(topic, payload, qos, retain, properties));
}

void PahoClient::Publish(const paho::message_ptr& message) {
  auto token = client_.publish(message);
  WaitFor(token, "PUBLISH");
}

paho::const_message_ptr PahoClient::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [this] { return !messages_.empty(); })) return nullptr;
  auto message = std::move(messages_.front());
  messages_.pop_front();
  return message;
}

std::vector<paho::const_message_ptr> PahoClient::Take(size_t count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<paho::const_message_ptr> taken;
  std::unique_lock<std::mutex> lock(mutex_);
  while (taken.size() < count) {
    if (!changed_.wait_until(lock, deadline, [this] { return !messages_.empty(); })) break;
    taken.push_back(std::move(messages_.front()));
    messages_.pop_front();
  }
  return taken;
}

void PahoClient::Disconnect(paho::ReasonCode reason) {
  paho::disconnect_options options;
  if (version_ == MQTTVERSION_5) options.set_reason_code(reason);
  WaitFor(client_.disconnect(options), "DISCONNECT");
}

bool PahoClient::WaitDisconnected(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return gone_; });
}

std::optional<int> PahoClient::server_disconnect_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disconnect_reason_;
}

void PahoClient::OnMessage(paho::const_message_ptr message) {
  std::lock_guard<std::mutex> lock(mutex_);
  messages_.push_back(std::move(message));
  changed_.notify_all();
}

void PahoClient::OnGone(std::optional<int> reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  gone_ = true;
  if (reason) disconnect_reason_ = reason;
  changed_.notify_all();
}

paho::properties Props(std::initializer_list<paho::property> list) { return paho::properties(list); }

std::vector<std::string> UserProperties(const paho::properties& properties) {
  std::vector<std::string> out;
  const size_t count = properties.count(paho::property::USER_PROPERTY);
  for (size_t i = 0; i < count; ++i) {
    auto pair = paho::get<paho::string_pair>(properties, paho::property::USER_PROPERTY, i);
    out.push_back(std::get<0>(pair) + "=" + std::get<1>(pair));
  }
  return out;
}

std::vector<uint32_t> SubscriptionIds(const paho::properties& properties) {
  std::vector<uint32_t> out;
  const size_t count = properties.count(paho::property::SUBSCRIPTION_IDENTIFIER);
  for (size_t i = 0; i < count; ++i) {
    out.push_back(paho::get<uint32_t>(properties, paho::property::SUBSCRIPTION_IDENTIFIER, i));
  }
  return out;
}

}  // namespace estuary::conformance
