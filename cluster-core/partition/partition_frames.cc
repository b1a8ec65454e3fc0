#include "cluster-core/partition/partition_frames.h"

#include "base/bytes.h"

#include <utility>

namespace estuary::partition {

std::string Encode(const ProposeFrame& frame) {
  base::LittleEndianWriter out;
  out.U64(frame.request);
  out.U32(frame.partition);
  out.U64(frame.id.producer);
  out.U64(frame.id.sequence);
  out.Bytes(frame.data);
  return out.Take();
}

std::optional<ProposeFrame> DecodePropose(std::string_view body) {
  base::LittleEndianReader in(body);
  ProposeFrame frame;
  frame.request = in.U64();
  frame.partition = in.U32();
  frame.id.producer = in.U64();
  frame.id.sequence = in.U64();
  frame.data = std::string(in.Bytes());
  if (!in.done()) return std::nullopt;
  return frame;
}

std::string Encode(const ProposedFrame& frame) {
  base::LittleEndianWriter out;
  out.U64(frame.request);
  out.U8(static_cast<uint8_t>(frame.status));
  out.U64(frame.index);
  out.U32(frame.leader);
  out.U8(frame.result ? 1 : 0);
  out.Bytes(frame.result ? *frame.result : std::string());
  return out.Take();
}

std::optional<ProposedFrame> DecodeProposed(std::string_view body) {
  base::LittleEndianReader in(body);
  ProposedFrame frame;
  frame.request = in.U64();
  const uint8_t status = in.U8();
  if (status > static_cast<uint8_t>(meta::ProposeStatus::kRejected)) in.Fail();
  frame.status = static_cast<meta::ProposeStatus>(status);
  frame.index = in.U64();
  const uint32_t leader = in.U32();
  if (leader > 0xFFFF) in.Fail();
  frame.leader = static_cast<NodeId>(leader);
  const bool has_result = in.Bool();
  std::string result(in.Bytes());
  if (!in.done()) return std::nullopt;
  if (has_result) frame.result = std::move(result);
  return frame;
}

}  // namespace estuary::partition
