// libFuzzer: the WebSocket opening handshake parser and the frame path
// (io/ws/). The first byte picks the target and, for frames, how the rest
// is cut into reads; anything may come in, nothing may crash or grow
// without bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "io/ws/websocket_handshake.h"
#include "io/ws/websocket_session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((selector & 1) == 0) {
    auto policy = (selector & 2) ? estuary::io::AmqpWebSocketPolicy() : estuary::io::MqttWebSocketPolicy();
    auto upgrade = estuary::io::ParseWebSocketUpgrade(input, policy);
    if (upgrade.consumed > input.size()) __builtin_trap();
    return 0;
  }
  estuary::io::WebSocketSession session(4096);
  const size_t step = 1 + (selector >> 1);
  std::string payload;
  std::string out;
  while (!input.empty()) {
    const size_t n = std::min(step, input.size());
    const bool open = session.Receive(input.substr(0, n), payload);
    input.remove_prefix(n);
    session.TakeOutput(out);
    if (payload.size() > size) __builtin_trap();  // payload never exceeds what came in
    if (!open) break;
    if (!payload.empty()) session.Send(payload);
    payload.clear();
  }
  return 0;
}
