#include "balancer/proxy_protocol.h"

#include <arpa/inet.h>

#include <cstring>

#include "base/bytes.h"

namespace estuary::proxy {
namespace {

constexpr uint8_t kVersion2 = 0x20;
constexpr uint8_t kCommandLocal = 0x00;
constexpr uint8_t kCommandProxy = 0x01;
constexpr uint8_t kFamilyUnspec = 0x00;
constexpr uint8_t kTcp4 = 0x11;
constexpr uint8_t kTcp6 = 0x21;
constexpr size_t kIpv4Block = 12;
constexpr size_t kIpv6Block = 36;

std::string FormatIp(int family, const void* raw) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, raw, text, sizeof(text));
  return text;
}

DecodeResult Invalid(std::string why) { return {DecodeStatus::kInvalid, {}, std::move(why)}; }

}  // namespace

std::string Address::ToString() const {
  if (ip.find(':') != std::string::npos) return "[" + ip + "]:" + std::to_string(port);
  return ip + ":" + std::to_string(port);
}

Expected<std::string, std::string> Encode(const Address& source, const Address& destination) {
  in_addr source4{}, destination4{};
  in6_addr source6{}, destination6{};
  std::string out(kSignature);
  out.push_back(static_cast<char>(kVersion2 | kCommandProxy));
  if (inet_pton(AF_INET, source.ip.c_str(), &source4) == 1 &&
      inet_pton(AF_INET, destination.ip.c_str(), &destination4) == 1) {
    out.push_back(static_cast<char>(kTcp4));
    base::AppendBig<uint16_t>(out, kIpv4Block);
    out.append(reinterpret_cast<const char*>(&source4), 4);
    out.append(reinterpret_cast<const char*>(&destination4), 4);
  } else if (inet_pton(AF_INET6, source.ip.c_str(), &source6) == 1 &&
             inet_pton(AF_INET6, destination.ip.c_str(), &destination6) == 1) {
    out.push_back(static_cast<char>(kTcp6));
    base::AppendBig<uint16_t>(out, kIpv6Block);
    out.append(reinterpret_cast<const char*>(&source6), 16);
    out.append(reinterpret_cast<const char*>(&destination6), 16);
  } else {
    return MakeError("PROXY v2: addresses " + source.ip + " and " + destination.ip +
                     " are not numeric addresses of one family");
  }
  base::AppendBig<uint16_t>(out, source.port);
  base::AppendBig<uint16_t>(out, destination.port);
  return out;
}

std::string EncodeLocal() {
  std::string out(kSignature);
  out.push_back(static_cast<char>(kVersion2 | kCommandLocal));
  out.push_back(static_cast<char>(kFamilyUnspec));
  base::AppendBig<uint16_t>(out, 0);
  return out;
}

DecodeResult Decode(std::string_view bytes) {
  const size_t prefix = std::min(bytes.size(), kSignature.size());
  if (bytes.substr(0, prefix) != kSignature.substr(0, prefix)) return Invalid("no PROXY v2 signature");
  if (bytes.size() < kFixedBytes) return {};
  const auto version_command = static_cast<uint8_t>(bytes[12]);
  if ((version_command & 0xf0) != kVersion2) return Invalid("PROXY protocol version is not 2");
  const uint8_t command = version_command & 0x0f;
  if (command != kCommandLocal && command != kCommandProxy) return Invalid("unknown PROXY v2 command");
  const auto family = static_cast<uint8_t>(bytes[13]);
  const size_t length = base::LoadBig<uint16_t>(bytes.data() + 14);
  if (kFixedBytes + length > kMaxHeaderBytes) return Invalid("PROXY v2 header too long");
  if (bytes.size() < kFixedBytes + length) return {};
  DecodeResult result{DecodeStatus::kComplete, {}, {}};
  Header& header = result.header;
  header.size = kFixedBytes + length;
  header.local = command == kCommandLocal;
  const std::string_view block = bytes.substr(kFixedBytes, length);
  if (family == kTcp4) {
    if (length < kIpv4Block) return Invalid("PROXY v2 IPv4 address block too short");
    header.source = {FormatIp(AF_INET, block.data()), base::LoadBig<uint16_t>(block.data() + 8)};
    header.destination = {FormatIp(AF_INET, block.data() + 4), base::LoadBig<uint16_t>(block.data() + 10)};
  } else if (family == kTcp6) {
    if (length < kIpv6Block) return Invalid("PROXY v2 IPv6 address block too short");
    header.source = {FormatIp(AF_INET6, block.data()), base::LoadBig<uint16_t>(block.data() + 32)};
    header.destination = {FormatIp(AF_INET6, block.data() + 16), base::LoadBig<uint16_t>(block.data() + 34)};
  } else if (family != kFamilyUnspec || !header.local) {
    // UDP and UNIX families, or PROXY without addresses: not a TCP client.
    if (!header.local) return Invalid("PROXY v2 family is not TCP over IPv4 or IPv6");
  }
  return result;
}

}  // namespace estuary::proxy
