#include "frontends/amqp/session/attach_tap.h"

#include <proton/codec.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "base/bytes.h"
#include "frontends/amqp/session/frame_scan.h"

namespace estuary::amqp {
namespace {

using frames::IsAttachDescriptor;
using frames::kDescriptorBytes;
using frames::kHeaderSize;
using frames::kMaxAttachFrame;

struct DataDeleter {
  void operator()(pn_data_t* data) const { pn_data_free(data); }
};

// The descriptor of the described value the cursor is on, as its code.
uint64_t DescriptorCode(pn_data_t* data) {
  if (pn_data_type(data) == PN_ULONG) return pn_data_get_ulong(data);
  if (pn_data_type(data) == PN_SYMBOL) {
    const pn_bytes_t symbol = pn_data_get_symbol(data);
    const std::string_view name(symbol.start, symbol.size);
    if (name == "amqp:accepted:list") return 0x24;
    if (name == "amqp:rejected:list") return 0x25;
    if (name == "amqp:released:list") return 0x26;
    if (name == "amqp:modified:list") return 0x27;
  }
  return 0;
}

// A delivery-state (§3.4) the cursor is on; leaves the cursor there.
RemoteDeliveryState ParseState(pn_data_t* data) {
  if (pn_data_type(data) != PN_DESCRIBED) return RemoteDeliveryState::kNone;
  RemoteDeliveryState state = RemoteDeliveryState::kNone;
  pn_data_enter(data);
  if (pn_data_next(data)) {
    switch (DescriptorCode(data)) {
      case 0x24: state = RemoteDeliveryState::kAccepted; break;
      case 0x25: state = RemoteDeliveryState::kRejected; break;
      case 0x26: state = RemoteDeliveryState::kReleased; break;
      case 0x27: {
        state = RemoteDeliveryState::kModified;
        // modified: [delivery-failed, undeliverable-here, message-annotations]
        if (pn_data_next(data) && pn_data_type(data) == PN_LIST) {
          pn_data_enter(data);
          if (pn_data_next(data) && pn_data_next(data) && pn_data_type(data) == PN_BOOL &&
              pn_data_get_bool(data)) {
            state = RemoteDeliveryState::kModifiedUndeliverable;
          }
          pn_data_exit(data);
        }
        break;
      }
      default: break;  // received (0x23) or unknown: not terminal
    }
  }
  pn_data_exit(data);
  return state;
}

UnsettledMap ParseUnsettled(pn_data_t* data) {
  UnsettledMap map;
  pn_data_enter(data);
  while (pn_data_next(data)) {
    std::string tag;
    const bool keyed = pn_data_type(data) == PN_BINARY;
    if (keyed) {
      const pn_bytes_t bytes = pn_data_get_binary(data);
      tag.assign(bytes.start, bytes.size);
    }
    if (!pn_data_next(data)) break;
    if (keyed) map[tag] = ParseState(data);
  }
  pn_data_exit(data);
  return map;
}

}  // namespace

size_t AttachTap::SkipFrames(std::string_view bytes) {
  size_t at = 0;
  while (bytes.size() - at >= kHeaderSize) {
    if (bytes.compare(at, 4, "AMQP") == 0) break;  // a protocol header: the slow path
    const uint32_t size = base::LoadBig<uint32_t>(bytes.data() + at);
    const size_t doff = size_t{static_cast<unsigned char>(bytes[at + 4])} * 4;
    if (size < kHeaderSize || doff < kHeaderSize || doff > size) break;  // the slow path gives up
    if (bytes[at + 5] == 0 && size > kHeaderSize) {  // an AMQP frame: is it an attach?
      const size_t peek = std::min<size_t>(size, doff + kDescriptorBytes);
      if (bytes.size() - at < peek) break;
      if (IsAttachDescriptor(bytes.substr(at + doff, peek - doff))) break;
    }
    if (size > bytes.size() - at) {  // the frame goes on in the next bytes
      phase_ = Phase::kSkip;
      remaining_ = size - (bytes.size() - at);
      return bytes.size();
    }
    at += size;
  }
  return at;
}

void AttachTap::Feed(std::string_view bytes) {
  while (!bytes.empty() && phase_ != Phase::kOff) {
    if (phase_ == Phase::kStart && buffer_.empty()) {
      // Frames that are not attaches are skipped in place, without a copy.
      const size_t n = SkipFrames(bytes);
      bytes.remove_prefix(n);
      if (n > 0) continue;
    }
    if (phase_ == Phase::kSkip) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size()));
      bytes.remove_prefix(n);
      remaining_ -= n;
      if (remaining_ == 0) phase_ = Phase::kStart;
      continue;
    }
    const size_t n = std::min(want_ - buffer_.size(), bytes.size());
    buffer_.append(bytes.data(), n);
    bytes.remove_prefix(n);
    if (buffer_.size() < want_) continue;
    switch (phase_) {
      case Phase::kStart: OnEightBytes(); break;
      case Phase::kPeek: OnPeek(); break;
      case Phase::kCapture:
        OnAttachBody(std::string_view(buffer_).substr(body_offset_));
        Next(Phase::kStart);
        break;
      default: break;
    }
  }
}

void AttachTap::Next(Phase phase, uint64_t skip) {
  buffer_.clear();
  phase_ = phase;
  want_ = kHeaderSize;
  remaining_ = skip;
  if (phase_ == Phase::kSkip && skip == 0) phase_ = Phase::kStart;
}

void AttachTap::OnEightBytes() {
  if (buffer_.compare(0, 4, "AMQP") == 0) {
    // A protocol header: SASL (3) or AMQP (0) go on; TLS (2) hides the rest.
    Next(buffer_[4] == 0 || buffer_[4] == 3 ? Phase::kStart : Phase::kOff);
    return;
  }
  frame_size_ = base::LoadBig<uint32_t>(buffer_.data());
  body_offset_ = size_t{static_cast<unsigned char>(buffer_[4])} * 4;
  if (frame_size_ < kHeaderSize || body_offset_ < kHeaderSize || body_offset_ > frame_size_) {
    Next(Phase::kOff);  // not a frame we can follow
    return;
  }
  if (buffer_[5] != 0 || frame_size_ == kHeaderSize) {  // SASL, or an empty frame
    Next(Phase::kSkip, frame_size_ - kHeaderSize);
    return;
  }
  phase_ = Phase::kPeek;
  want_ = std::min<size_t>(frame_size_, body_offset_ + kDescriptorBytes);
  if (buffer_.size() >= want_) OnPeek();
}

void AttachTap::OnPeek() {
  const std::string_view descriptor =
      body_offset_ < buffer_.size() ? std::string_view(buffer_).substr(body_offset_) : std::string_view();
  if (!IsAttachDescriptor(descriptor) || frame_size_ > kMaxAttachFrame) {
    Next(Phase::kSkip, frame_size_ - buffer_.size());
    return;
  }
  if (buffer_.size() == frame_size_) {
    OnAttachBody(descriptor);
    Next(Phase::kStart);
    return;
  }
  phase_ = Phase::kCapture;
  want_ = frame_size_;
}

void AttachTap::OnAttachBody(std::string_view body) {
  std::unique_ptr<pn_data_t, DataDeleter> data(pn_data(0));
  if (pn_data_decode(data.get(), body.data(), body.size()) < 0) return;
  pn_data_t* d = data.get();
  pn_data_rewind(d);
  if (!pn_data_next(d) || pn_data_type(d) != PN_DESCRIBED) return;
  pn_data_enter(d);
  if (!pn_data_next(d) || !pn_data_next(d) || pn_data_type(d) != PN_LIST) return;
  pn_data_enter(d);
  std::string name;
  bool receiver = false;
  std::optional<UnsettledMap> unsettled;
  // attach: name, handle, role, snd-settle-mode, rcv-settle-mode, source,
  // target, unsettled, ... (§2.7.3)
  for (int field = 0; field <= 7 && pn_data_next(d); ++field) {
    if (field == 0 && pn_data_type(d) == PN_STRING) {
      const pn_bytes_t bytes = pn_data_get_string(d);
      name.assign(bytes.start, bytes.size);
    } else if (field == 2 && pn_data_type(d) == PN_BOOL) {
      receiver = pn_data_get_bool(d);  // role: true is receiver
    } else if (field == 7 && pn_data_type(d) == PN_MAP) {
      unsettled = ParseUnsettled(d);
    }
  }
  if (!receiver) return;
  if (unsettled) {
    attaches_[name] = std::move(*unsettled);
  } else {
    attaches_.erase(name);
  }
}

std::optional<UnsettledMap> AttachTap::Take(const std::string& link_name) {
  auto it = attaches_.find(link_name);
  if (it == attaches_.end()) return std::nullopt;
  UnsettledMap map = std::move(it->second);
  attaches_.erase(it);
  return map;
}

}  // namespace estuary::amqp
