#include "cluster-core/links/frame.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/bytes.h"

namespace estuary::cluster::wire {
namespace {

constexpr size_t kMaxAddressBytes = 255;
constexpr std::string_view kMacLabel = "estuary-link-auth-v1";

}  // namespace

void AppendFrame(std::string& out, uint8_t type, std::string_view body) {
  char header[kHeaderBytes];
  base::StoreBig<uint32_t>(header, static_cast<uint32_t>(body.size() + 1));
  header[4] = static_cast<char>(type);
  out.append(header, kHeaderBytes);
  out.append(body);
}

std::string EncodeHello(const Hello& hello) {
  base::BigEndianWriter out;
  out.U32(hello.magic);
  out.U8(hello.major);
  out.U8(hello.minor);
  out.U16(hello.node);
  std::string_view address = hello.address;
  if (address.size() > kMaxAddressBytes) address = address.substr(0, kMaxAddressBytes);
  out.Bytes16(address);
  out.Raw(std::string_view(reinterpret_cast<const char*>(hello.nonce.data()), hello.nonce.size()));
  return out.Take();
}

// Bytes after the nonce are ignored: a later minor version may add fields.
std::optional<Hello> DecodeHello(std::string_view body) {
  constexpr size_t kFixed = 4 + 1 + 1 + 2 + 2;
  if (body.size() < kFixed) return std::nullopt;
  Hello hello;
  hello.magic = base::LoadBig<uint32_t>(body.data());
  hello.major = static_cast<uint8_t>(body[4]);
  hello.minor = static_cast<uint8_t>(body[5]);
  hello.node = base::LoadBig<uint16_t>(body.data() + 6);
  size_t address_size = base::LoadBig<uint16_t>(body.data() + 8);
  if (address_size > kMaxAddressBytes || body.size() < kFixed + address_size + kNonceBytes) return std::nullopt;
  hello.address.assign(body.substr(kFixed, address_size));
  std::memcpy(hello.nonce.data(), body.data() + kFixed + address_size, kNonceBytes);
  return hello;
}

Mac ComputeMac(std::string_view secret, Role role, const Nonce& dialer_nonce, const Nonce& acceptor_nonce,
               NodeId dialer, NodeId acceptor) {
  std::string input(kMacLabel);
  input.push_back(static_cast<char>(role));
  input.append(reinterpret_cast<const char*>(dialer_nonce.data()), dialer_nonce.size());
  input.append(reinterpret_cast<const char*>(acceptor_nonce.data()), acceptor_nonce.size());
  base::AppendBig<uint16_t>(input, dialer);
  base::AppendBig<uint16_t>(input, acceptor);
  Mac mac{};
  unsigned int length = 0;
  const unsigned char* done =
      HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &length);
  if (done == nullptr || length != kMacBytes) std::abort();  // OpenSSL without SHA-256: cannot run
  return mac;
}

bool MacEquals(const Mac& a, std::string_view b) {
  if (b.size() != a.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Nonce RandomNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) std::abort();  // no entropy: cannot run
  return nonce;
}

FrameReader::Status FrameReader::Parse(std::string_view in, Frame& frame, size_t& size) const {
  if (in.size() < 4) return Status::kNeedMore;
  const uint32_t length = base::LoadBig<uint32_t>(in.data());
  if (length == 0) return Status::kEmptyFrame;
  if (length > max_frame_) return Status::kOversize;
  if (in.size() < 4 + static_cast<size_t>(length)) return Status::kNeedMore;
  frame.type = static_cast<uint8_t>(in[4]);
  frame.body = in.substr(kHeaderBytes, length - 1);
  size = 4 + static_cast<size_t>(length);
  return Status::kFrame;
}

FrameReader::Status FrameReader::TopUp(std::string_view& in) {
  auto move = [&](size_t n) {
    n = std::min(n, in.size());
    buffer_.append(in.data(), n);
    in.remove_prefix(n);
  };
  if (buffered() < 4) move(4 - buffered());
  if (buffered() < 4) return Status::kNeedMore;
  const uint32_t length = base::LoadBig<uint32_t>(buffer_.data() + consumed_);
  if (length == 0) return Status::kEmptyFrame;
  if (length > max_frame_) return Status::kOversize;
  const size_t whole = 4 + static_cast<size_t>(length);
  if (buffered() < whole) move(whole - buffered());
  return buffered() < whole ? Status::kNeedMore : Status::kFrame;
}

void FrameReader::Compact() {
  if (consumed_ == 0) return;
  buffer_.erase(0, consumed_);
  consumed_ = 0;
  // One multi-MiB frame must not pin its buffer on an idle link.
  if (buffer_.empty() && buffer_.capacity() > (1u << 20)) std::string().swap(buffer_);
}

void FrameReader::Feed(std::string_view bytes) {
  Compact();
  buffer_.append(bytes);
}

FrameReader::Status FrameReader::Next(Frame& frame) {
  size_t size = 0;
  const Status status = Parse(std::string_view(buffer_).substr(consumed_), frame, size);
  if (status == Status::kFrame) consumed_ += size;  // the view stays valid until the next Feed() or Read()
  return status;
}

}  // namespace estuary::cluster::wire
