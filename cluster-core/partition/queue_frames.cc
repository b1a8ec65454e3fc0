#include "cluster-core/partition/queue_frames.h"

#include "base/bytes.h"

namespace estuary::partition {
namespace {

// The least a pushed message or an acked offset can take on the wire: the
// counts are checked against these before anything is reserved.
constexpr size_t kPushedMessageMinBytes = 8 + 4;
constexpr size_t kAckedOffsetBytes = 8;

}  // namespace

std::string Encode(const QueuePullFrame& frame) {
  base::LittleEndianWriter out;
  out.Bytes(frame.queue);
  out.U64(frame.epoch);
  out.U32(frame.credit);
  return out.Take();
}

std::optional<QueuePullFrame> DecodeQueuePull(std::string_view body) {
  base::LittleEndianReader in(body);
  QueuePullFrame frame;
  frame.queue = std::string(in.Bytes());
  frame.epoch = in.U64();
  frame.credit = in.U32();
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string Encode(const QueuePushFrame& frame) {
  base::LittleEndianWriter out;
  out.Bytes(frame.queue);
  out.U64(frame.epoch);
  out.U32(static_cast<uint32_t>(frame.messages.size()));
  for (const QueuedMessage& message : frame.messages) {
    out.U64(message.offset);
    out.Bytes(message.record);
  }
  return out.Take();
}

std::optional<QueuePushFrame> DecodeQueuePush(std::string_view body) {
  base::LittleEndianReader in(body);
  QueuePushFrame frame;
  frame.queue = std::string(in.Bytes());
  frame.epoch = in.U64();
  const uint32_t count = in.Count(kPushedMessageMinBytes);
  frame.messages.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    QueuedMessage message;
    message.offset = in.U64();
    message.record = std::string(in.Bytes());
    frame.messages.push_back(std::move(message));
  }
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string Encode(const QueueAckFrame& frame) {
  base::LittleEndianWriter out;
  out.Bytes(frame.queue);
  out.U64(frame.epoch);
  out.U32(static_cast<uint32_t>(frame.offsets.size()));
  for (uint64_t offset : frame.offsets) out.U64(offset);
  return out.Take();
}

std::optional<QueueAckFrame> DecodeQueueAck(std::string_view body) {
  base::LittleEndianReader in(body);
  QueueAckFrame frame;
  frame.queue = std::string(in.Bytes());
  frame.epoch = in.U64();
  const uint32_t count = in.Count(kAckedOffsetBytes);
  frame.offsets.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) frame.offsets.push_back(in.U64());
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string Encode(const QueueRejectFrame& frame) {
  base::LittleEndianWriter out;
  out.Bytes(frame.queue);
  out.U32(frame.node);
  out.U8(static_cast<uint8_t>(frame.reason));
  return out.Take();
}

std::optional<QueueRejectFrame> DecodeQueueReject(std::string_view body) {
  base::LittleEndianReader in(body);
  QueueRejectFrame frame;
  frame.queue = std::string(in.Bytes());
  const uint32_t node = in.U32();
  if (node > 0xFFFF) in.Fail();
  frame.node = static_cast<NodeId>(node);
  const uint8_t reason = in.U8();
  if (reason > kMaxQueueRejectReason) in.Fail();
  frame.reason = static_cast<QueueRejectReason>(reason);
  if (!in.done()) return std::nullopt;
  return frame;
}

}  // namespace estuary::partition
