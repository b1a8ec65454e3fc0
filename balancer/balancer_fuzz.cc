// libFuzzer target for the bytes estuary-lb and estuaryd read from outside
// the process before any protocol: the PROXY v2 header (estuaryd, from a
// balancer), the first MQTT bytes (estuary-lb, from any client) and the
// pair's heartbeat datagram (plain and sealed), and a node's /api/load
// answer (the probes read it from the network). Each must answer without
// crashing, and what the PROXY decoder accepts must encode back to the
// same addresses.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "balancer/connect_peek.h"
#include "balancer/heartbeat_auth.h"
#include "balancer/load_report.h"
#include "balancer/pair_state.h"
#include "balancer/proxy_protocol.h"

namespace {

void CheckProxy(std::string_view bytes) {
  using namespace estuary::proxy;
  DecodeResult result = Decode(bytes);
  if (result.status != DecodeStatus::kComplete || result.header.local || result.header.source.ip.empty()) return;
  if (result.header.size > bytes.size() || result.header.size > kMaxHeaderBytes) std::abort();
  auto again = Encode(result.header.source, result.header.destination);
  if (!again) std::abort();
  DecodeResult round = Decode(*again);
  if (round.status != DecodeStatus::kComplete || round.header.source != result.header.source ||
      round.header.destination != result.header.destination) {
    std::fprintf(stderr, "balancer_fuzz: PROXY v2 round trip changed the addresses\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckProxy(bytes);
  estuary::balancer::PeekConnect(bytes, 4096);
  (void)estuary::balancer::DecodeHeartbeat(bytes);
  // The authenticated path (--pair-secret-file) reads the same datagram.
  static estuary::balancer::HeartbeatAuth auth("fuzz", "fuzz-boot");
  (void)auth.Open(bytes, 0);
  if (auto report = estuary::balancer::ParseLoadReport(bytes)) {
    (void)estuary::balancer::Score(*report, 0, estuary::balancer::ScoreWeights{});
  }
  return 0;
}
