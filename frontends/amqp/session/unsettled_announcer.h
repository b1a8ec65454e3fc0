#pragma once
// UnsettledAnnouncer: puts our `unsettled` map into the attach frames we
// send for durable links (AMQP 1.0 §2.7.3 field 7, §2.6.13), which Proton-C
// 0.37 always encodes as null (pni_process_link_setup; there is no
// pn_link_set_unsettled), and sets `resume` (§2.7.5 field 8) on the
// transfers that resume a delivery the client still holds, which Proton-C
// always sends false (pni_process_tpwork_sender; no pn_delivery_set_resume).
//
// It sits between the driver's output and the stream: it follows the frame
// boundaries (protocol headers, SASL and AMQP frames), passes every byte
// through unchanged except the attach frame of a link it was told about,
// which it re-encodes with the map (delivery tag -> null state: "unsettled
// here, no state to report") in place of field 7, and then that link's
// first transfer of each tag to resume, re-encoded with resume true. Bytes
// are held back only while a frame header or a frame to rewrite is
// incomplete; frames are inspected only while something is announced.
//
// Threading: part of one AmqpConnection, on its shard's thread.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace estuary::amqp {

class UnsettledAnnouncer {
 public:
  // The next attach we send for a sending link named `link_name` carries
  // `tags` as its unsettled map; then the first transfer on that link with
  // a tag in `resume` is sent with resume true.
  void Announce(const std::string& link_name, std::vector<std::string> tags, std::set<std::string> resume = {});
  // Bytes from the driver, exactly as it wrote them; what to send goes to `out`.
  void Write(std::string_view bytes, std::string& out);

  // The attach performative `body` (from its descriptor on) with field 7
  // replaced by `tags` as a map; empty if `body` is not one we can rewrite.
  // Public for tests.
  static std::string RewriteAttach(std::string_view body, const std::vector<std::string>& tags);
  // The transfer performative and payload `body` with resume (field 8)
  // true; empty if it cannot.
  static std::string RewriteResume(std::string_view body);
  // The link name and handle of an attach performative if it is a sender's (role false).
  static bool SenderAttachName(std::string_view body, std::string* name, uint32_t* handle);
  // The handle and delivery tag of a transfer performative (tag empty if absent).
  static bool TransferTag(std::string_view body, uint32_t* handle, std::string* tag);

 private:
  enum class Phase : uint8_t { kStart, kPeek, kCapture, kPass, kOff };
  // Whole frames at the start of `bytes` (and the start of a last, partial
  // one): the length to pass through unchanged.
  size_t PassWholeFrames(std::string_view bytes);
  void OnEightBytes(std::string& out);
  void OnPeek(std::string& out);
  void OnFrame(std::string& out);
  void Flush(std::string& out, Phase next, uint64_t pass = 0);

  Phase phase_ = Phase::kStart;
  std::string buffer_;
  size_t emitted_ = 0;  // bytes of buffer_ already written out (nothing announced then)
  size_t want_ = 8;
  uint64_t remaining_ = 0;  // kPass: bytes still to pass through
  uint32_t frame_size_ = 0;
  size_t body_offset_ = 0;
  struct Announcement {
    std::vector<std::string> unsettled;
    std::set<std::string> resume;
  };
  std::unordered_map<std::string, Announcement> pending_;  // by link name, until its attach
  // (channel << 32 | handle) -> tags whose next transfer resumes.
  std::unordered_map<uint64_t, std::set<std::string>> resuming_;
};

}  // namespace estuary::amqp
