#include "frontends/amqp/session/unsettled_announcer.h"

#include <proton/codec.h>

#include <algorithm>
#include <memory>

#include "base/bytes.h"
#include "frontends/amqp/session/frame_scan.h"

namespace estuary::amqp {
namespace {

using frames::kHeaderSize;
using frames::kNoValue;
using frames::SkipValue;

constexpr size_t kUnsettledField = 7;  // §2.7.3
constexpr size_t kResumeField = 8;     // §2.7.5
constexpr uint64_t kTransferCode = 0x14;
constexpr uint64_t kDetachCode = 0x16;

bool IsDetachDescriptor(std::string_view d) {
  return d.size() >= 3 && d[0] == 0x00 && static_cast<unsigned char>(d[1]) == 0x53 &&
         static_cast<unsigned char>(d[2]) == kDetachCode;
}

bool IsTransferDescriptor(std::string_view d) {
  return d.size() >= 3 && d[0] == 0x00 && static_cast<unsigned char>(d[1]) == 0x53 &&
         static_cast<unsigned char>(d[2]) == kTransferCode;
}

// A uint (§1.6.5: 0x70 uint, 0x52 smalluint, 0x43 uint0) at `at`.
bool ReadUint(std::string_view b, size_t at, uint32_t* value) {
  const auto code = static_cast<unsigned char>(b[at]);
  if (code == 0x43) {
    *value = 0;
  } else if (code == 0x52) {
    *value = static_cast<unsigned char>(b[at + 1]);
  } else if (code == 0x70) {
    *value = base::LoadBig<uint32_t>(b.data() + at + 1);
  } else {
    return false;
  }
  return true;
}

// The attach's field list: where each field starts, and where the list ends.
struct Fields {
  size_t list_at = 0;  // the list's constructor
  std::vector<size_t> starts;
  size_t end = 0;
};

bool ParseFields(std::string_view body, Fields* fields) {
  if (body.size() < 3 || body[0] != 0x00) return false;
  const size_t list_at = SkipValue(body, 1);  // past the descriptor
  if (list_at == kNoValue || list_at >= body.size()) return false;
  const auto code = static_cast<unsigned char>(body[list_at]);
  size_t at = 0;
  uint32_t count = 0;
  if (code == 0x45) {  // list0
    at = list_at + 1;
  } else if (code == 0xc0 && list_at + 3 <= body.size()) {
    count = static_cast<unsigned char>(body[list_at + 2]);
    at = list_at + 3;
  } else if (code == 0xd0 && list_at + 9 <= body.size()) {
    count = base::LoadBig<uint32_t>(body.data() + list_at + 5);
    at = list_at + 9;
  } else {
    return false;
  }
  fields->list_at = list_at;
  for (uint32_t i = 0; i < count; ++i) {
    fields->starts.push_back(at);
    at = SkipValue(body, at);
    if (at == kNoValue) return false;
  }
  fields->end = at;
  return true;
}

std::string EncodeMap(const std::vector<std::string>& tags) {
  std::unique_ptr<pn_data_t, void (*)(pn_data_t*)> data(pn_data(0), pn_data_free);
  pn_data_put_map(data.get());
  pn_data_enter(data.get());
  for (const auto& tag : tags) {
    pn_data_put_binary(data.get(), pn_bytes(tag.size(), tag.data()));
    pn_data_put_null(data.get());  // §2.6.13: unsettled here, no state to tell
  }
  pn_data_exit(data.get());
  std::string out(static_cast<size_t>(std::max<ssize_t>(0, pn_data_encoded_size(data.get()))), '\0');
  const ssize_t n = pn_data_encode(data.get(), out.data(), out.size());
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

bool UnsettledAnnouncer::SenderAttachName(std::string_view body, std::string* name, uint32_t* handle) {
  Fields fields;
  if (!frames::IsAttachDescriptor(body) || !ParseFields(body, &fields) || fields.starts.size() < 3) return false;
  if (!ReadUint(body, fields.starts[1], handle)) return false;
  const size_t at = fields.starts[0];
  const auto code = static_cast<unsigned char>(body[at]);
  if (code == 0xa1) {
    *name = std::string(body.substr(at + 2, static_cast<unsigned char>(body[at + 1])));
  } else if (code == 0xb1) {
    *name = std::string(body.substr(at + 5, base::LoadBig<uint32_t>(body.data() + at + 1)));
  } else {
    return false;
  }
  const size_t role = fields.starts[2];
  const auto role_code = static_cast<unsigned char>(body[role]);
  const bool receiver = role_code == 0x41 || (role_code == 0x56 && body[role + 1] != 0);
  return !receiver;
}

namespace {

// `body` (a performative and what follows it) with field `index` of its
// list replaced by the encoded `value`, as a list32.
std::string ReplaceField(std::string_view body, size_t index, std::string_view value) {
  Fields fields;
  if (!ParseFields(body, &fields)) return {};
  const size_t count = fields.starts.size();
  const size_t new_count = std::max(count, index + 1);
  std::string list;
  for (size_t i = 0; i < new_count; ++i) {
    if (i == index) {
      list += value;
    } else if (i < count) {
      const size_t end = i + 1 < count ? fields.starts[i + 1] : fields.end;
      list.append(body.substr(fields.starts[i], end - fields.starts[i]));
    } else {
      list += '\x40';  // null
    }
  }
  std::string out(body.substr(0, fields.list_at));
  out += '\xd0';  // list32: size (of count and fields), count, fields
  base::AppendBig<uint32_t>(out, static_cast<uint32_t>(4 + list.size()));
  base::AppendBig<uint32_t>(out, static_cast<uint32_t>(new_count));
  out += list;
  out.append(body.substr(fields.end));  // a transfer's payload
  return out;
}

}  // namespace

std::string UnsettledAnnouncer::RewriteAttach(std::string_view body, const std::vector<std::string>& tags) {
  if (!frames::IsAttachDescriptor(body)) return {};
  return ReplaceField(body, kUnsettledField, EncodeMap(tags));
}

std::string UnsettledAnnouncer::RewriteResume(std::string_view body) {
  if (!IsTransferDescriptor(body)) return {};
  return ReplaceField(body, kResumeField, "\x41");  // true
}

bool UnsettledAnnouncer::TransferTag(std::string_view body, uint32_t* handle, std::string* tag) {
  Fields fields;
  if (!IsTransferDescriptor(body) || !ParseFields(body, &fields) || fields.starts.empty()) return false;
  if (!ReadUint(body, fields.starts[0], handle)) return false;
  tag->clear();
  if (fields.starts.size() < 3) return true;
  const size_t at = fields.starts[2];
  const auto code = static_cast<unsigned char>(body[at]);
  if (code == 0xa0) {
    *tag = std::string(body.substr(at + 2, static_cast<unsigned char>(body[at + 1])));
  } else if (code == 0xb0) {
    *tag = std::string(body.substr(at + 5, base::LoadBig<uint32_t>(body.data() + at + 1)));
  }
  return true;
}

void UnsettledAnnouncer::Announce(const std::string& link_name, std::vector<std::string> tags,
                                  std::set<std::string> resume) {
  pending_[link_name] = Announcement{std::move(tags), std::move(resume)};
}

size_t UnsettledAnnouncer::PassWholeFrames(std::string_view bytes) {
  size_t at = 0;
  while (bytes.size() - at >= kHeaderSize) {
    if (bytes.compare(at, 4, "AMQP") == 0) break;  // a protocol header: the slow path
    const uint32_t size = base::LoadBig<uint32_t>(bytes.data() + at);
    const size_t doff = size_t{static_cast<unsigned char>(bytes[at + 4])} * 4;
    if (size < kHeaderSize || doff < kHeaderSize || doff > size) break;  // the slow path gives up
    if (size > bytes.size() - at) {  // the frame goes on in the next write
      phase_ = Phase::kPass;
      remaining_ = size - (bytes.size() - at);
      return bytes.size();
    }
    at += size;
  }
  return at;
}

void UnsettledAnnouncer::Write(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    if (phase_ == Phase::kStart && buffer_.empty() && pending_.empty() && resuming_.empty()) {
      // Nothing to rewrite: follow the frames in place, copy them in one go.
      const size_t n = PassWholeFrames(bytes);
      out.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      if (n > 0) continue;
    }
    if (phase_ == Phase::kOff) {
      out.append(bytes);
      return;
    }
    if (phase_ == Phase::kPass) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size()));
      out.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      remaining_ -= n;
      if (remaining_ == 0) phase_ = Phase::kStart;
      continue;
    }
    const size_t n = std::min(want_ - buffer_.size(), bytes.size());
    buffer_.append(bytes.data(), n);
    bytes.remove_prefix(n);
    if (phase_ == Phase::kStart && pending_.empty() && resuming_.empty()) {
      // Nothing to rewrite: a split frame header is followed, not held back.
      out.append(buffer_, emitted_);
      emitted_ = buffer_.size();
    }
    if (buffer_.size() < want_) continue;
    switch (phase_) {
      case Phase::kStart: OnEightBytes(out); break;
      case Phase::kPeek: OnPeek(out); break;
      case Phase::kCapture: OnFrame(out); break;
      default: break;
    }
  }
}

void UnsettledAnnouncer::Flush(std::string& out, Phase next, uint64_t pass) {
  out.append(buffer_, emitted_);
  buffer_.clear();
  emitted_ = 0;
  phase_ = next;
  want_ = kHeaderSize;
  remaining_ = pass;
  if (phase_ == Phase::kPass && pass == 0) phase_ = Phase::kStart;
}

void UnsettledAnnouncer::OnEightBytes(std::string& out) {
  if (buffer_.compare(0, 4, "AMQP") == 0) {
    Flush(out, buffer_[4] == 0 || buffer_[4] == 3 ? Phase::kStart : Phase::kOff);
    return;
  }
  frame_size_ = base::LoadBig<uint32_t>(buffer_.data());
  body_offset_ = size_t{static_cast<unsigned char>(buffer_[4])} * 4;
  if (frame_size_ < kHeaderSize || body_offset_ < kHeaderSize || body_offset_ > frame_size_) {
    Flush(out, Phase::kOff);
    return;
  }
  if (buffer_[5] != 0 || frame_size_ == kHeaderSize || (pending_.empty() && resuming_.empty()) || emitted_ > 0) {
    Flush(out, Phase::kPass, frame_size_ - kHeaderSize);
    return;
  }
  phase_ = Phase::kPeek;
  want_ = std::min<size_t>(frame_size_, body_offset_ + 3);
  if (buffer_.size() >= want_) OnPeek(out);
}

void UnsettledAnnouncer::OnPeek(std::string& out) {
  const std::string_view start = std::string_view(buffer_).substr(std::min(body_offset_, buffer_.size()));
  const bool wanted = frames::IsAttachDescriptor(start) ||
                      ((IsTransferDescriptor(start) || IsDetachDescriptor(start)) && !resuming_.empty());
  if (!wanted || frame_size_ > frames::kMaxAttachFrame) {
    Flush(out, Phase::kPass, frame_size_ - buffer_.size());
    return;
  }
  phase_ = Phase::kCapture;
  want_ = frame_size_;
  if (buffer_.size() >= want_) OnFrame(out);
}

void UnsettledAnnouncer::OnFrame(std::string& out) {
  const std::string_view body = std::string_view(buffer_).substr(body_offset_);
  const uint64_t channel = (uint64_t{static_cast<unsigned char>(buffer_[6])} << 8 |
                            static_cast<unsigned char>(buffer_[7])) << 32;
  std::string rewritten;
  std::string name;
  uint32_t handle = 0;
  if (SenderAttachName(body, &name, &handle)) {
    resuming_.erase(channel | handle);  // a new link on that handle
    auto it = pending_.find(name);
    if (it != pending_.end()) {
      rewritten = RewriteAttach(body, it->second.unsettled);
      if (!it->second.resume.empty()) resuming_[channel | handle] = std::move(it->second.resume);
      pending_.erase(it);
    }
  } else if (Fields fields; IsDetachDescriptor(body) && ParseFields(body, &fields) && !fields.starts.empty()) {
    if (ReadUint(body, fields.starts[0], &handle)) resuming_.erase(channel | handle);  // its resumes are moot
  } else if (std::string tag; TransferTag(body, &handle, &tag)) {
    auto it = resuming_.find(channel | handle);
    if (it != resuming_.end() && it->second.erase(tag) == 1) {
      rewritten = RewriteResume(body);
      if (it->second.empty()) resuming_.erase(it);
    }
  }
  if (rewritten.empty()) {
    Flush(out, Phase::kStart);
    return;
  }
  base::AppendBig<uint32_t>(out, static_cast<uint32_t>(body_offset_ + rewritten.size()));
  out.append(buffer_, 4, body_offset_ - 4);  // doff, type, channel, extended header
  out += rewritten;
  buffer_.clear();
  Flush(out, Phase::kStart);
}

}  // namespace estuary::amqp
