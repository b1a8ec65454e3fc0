// libFuzzer target for the membership admin API's request parsing
// (membership_admin.h, ParseMembershipRequest). The input's first byte picks
// the method (GET, HEAD, POST, DELETE, PUT or an odd one); the rest is the
// request target as an HTTP client sends it. Checks: nothing crashes; a
// refusal is 400 or 405 with a JSON body whose error is short printable
// ASCII; a join's address is HOST:PORT in ASCII and a removal's node is
// 1-65535; a join with that address, percent-encoded, parses back to it.
// Any breach aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cluster-core/membership/membership_admin.h"

namespace {

using estuary::cluster::MembershipRequest;
using estuary::cluster::ParseMembershipRequest;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "membership_admin_fuzz: %s\n", what);
  std::abort();
}

// Every byte escaped: the strictest a client could encode.
std::string EncodeAll(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out += '%';
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

void CheckRefusal(const estuary::io::HttpResponse& response) {
  if (response.status != 400 && response.status != 405) Fail("a refusal that is not 400 or 405");
  if (!nlohmann::json::accept(response.body)) Fail("a refusal that is not JSON");
  const nlohmann::json body = nlohmann::json::parse(response.body);
  if (!body.contains("error") || !body["error"].is_string()) Fail("a refusal without an error");
  const std::string error = body["error"];
  if (error.empty() || error.size() > 300) Fail("error empty or long");
  for (const char c : error) {
    if (c < 0x20 || c > 0x7e) Fail("error not printable ASCII");
  }
}

void CheckAccepted(const MembershipRequest& request) {
  using Kind = MembershipRequest::Kind;
  if (request.kind == Kind::kRemove && request.node == 0) Fail("node 0 removed");
  if (request.kind != Kind::kJoin) return;
  for (const char c : request.address) {
    if (c <= 0x20 || c > 0x7e) Fail("a join address that is not plain ASCII");
  }
  if (request.address.find(':') == std::string::npos) Fail("a join address without a port");
  auto again = ParseMembershipRequest("POST", "/api/cluster/join?address=" + EncodeAll(request.address));
  if (!again || again->kind != Kind::kJoin || again->address != request.address) Fail("address round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr const char* kMethods[] = {"GET", "HEAD", "POST", "DELETE", "PUT", "post"};
  const char* method = kMethods[data[0] % std::size(kMethods)];
  const std::string_view target(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto request = ParseMembershipRequest(method, target);
  if (request) {
    CheckAccepted(*request);
  } else {
    CheckRefusal(request.error());
  }
  return 0;
}
