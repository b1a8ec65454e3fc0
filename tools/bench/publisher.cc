#include "tools/bench/publisher.h"

#include <algorithm>

#include "tools/bench/payload.h"

namespace estuary::bench {
namespace {

// Messages sent in one go before yielding to the loop, so readers on the
// same loop (subscribers, acknowledgements) are served between bursts.
constexpr uint64_t kMaxBurst = 512;

}  // namespace

Publisher::Publisher(io::UvLoop& loop, const Options& options, Setup setup, WorkerResult& result,
                     LiveCounters& live, std::function<void()> on_stopped)
    : loop_(loop),
      options_(options),
      setup_(std::move(setup)),
      result_(result),
      live_(live),
      on_stopped_(std::move(on_stopped)),
      payload_(options.payload_size, 'x'),
      window_(options.inflight) {
  fields_.topic = setup_.topic;
  fields_.qos = static_cast<uint8_t>(options.qos);
}

Publisher::~Publisher() {
  if (timer_ != 0) loop_.CancelTimer(timer_);
}

void Publisher::Begin(int64_t start_ns) {
  window_.set_capacity(std::min<uint32_t>(options_.inflight, client_->server_receive_maximum()));
  if (options_.paced()) {
    const double rate = options_.rate / options_.publishers;
    // Stagger publishers across one interval so they do not send in step.
    const double offset = 1e9 / rate * setup_.index / options_.publishers;
    pacer_.emplace(rate, start_ns + static_cast<int64_t>(offset));
  }
  sending_ = true;
  const int64_t now = MonotonicNowNs();
  Arm(start_ns > now ? (start_ns - now + 999'999) / 1'000'000 : 0);
}

void Publisher::Stop(int64_t now_ns) {
  if (!sending_) return;
  sending_ = false;
  result_.publish_end_ns = std::max(result_.publish_end_ns, now_ns);
  if (timer_ != 0) loop_.CancelTimer(timer_);
  timer_ = 0;
  if (on_stopped_) on_stopped_();
}

// QoS 1/2 (AMQP unsettled): the in-flight window; always the client's own
// bound (socket queue, AMQP link credit).
bool Publisher::Blocked() const {
  return (options_.qos > 0 && window_.full()) || client_->blocked();
}

void Publisher::Pump() {
  if (!sending_) return;
  if (!client_->ready()) {  // the connection failed: the coordinator ends the run
    Stop(MonotonicNowNs());
    return;
  }
  const uint64_t allowed = pacer_ ? std::min(pacer_->Due(MonotonicNowNs()), kMaxBurst) : kMaxBurst;
  uint64_t sent = 0;
  while (sent < allowed && !Blocked()) {
    if (options_.counted() && sequence_ == options_.count) break;
    SendOne();
    ++sent;
  }
  if (pacer_) pacer_->Take(sent);
  result_.sent += sent;
  live_.sent.fetch_add(sent, std::memory_order_relaxed);
  live_.expected.fetch_add(sent * setup_.coverage, std::memory_order_relaxed);
  if (options_.counted() && sequence_ == options_.count) {
    Stop(MonotonicNowNs());
    return;
  }
  // Blocked: an acknowledgement or the drain event pumps again. Otherwise
  // a paced publisher sleeps until its next message is due, and one that
  // hit the burst limit goes on in the next loop iteration.
  if (Blocked()) return;
  Arm(pacer_ ? pacer_->DelayMs(MonotonicNowNs()) : 0);
}

void Publisher::SendOne() {
  const int64_t now = MonotonicNowNs();
  if (options_.qos > 0) {
    fields_.packet_id = *window_.Acquire(now);
    live_.inflight.fetch_add(1, std::memory_order_relaxed);
  }
  WritePayloadHeader({options_.run_id, setup_.index, sequence_, now}, payload_);
  client_->Publish(fields_, payload_);
  ++sequence_;
}

void Publisher::OnAck(uint16_t packet_id, bool ok) {
  const bool was_blocked = window_.full();
  const std::optional<int64_t> sent_ns = window_.Release(packet_id);
  if (!sent_ns) return;  // not ours (or acknowledged twice)
  live_.inflight.fetch_sub(1, std::memory_order_relaxed);
  if (ok) {
    ++result_.acked;
    result_.ack_latency.Record(static_cast<uint64_t>(std::max<int64_t>(0, MonotonicNowNs() - *sent_ns)));
  } else {
    ++result_.rejected;
  }
  if (was_blocked) Pump();
}

void Publisher::Arm(int64_t delay_ms) {
  if (timer_ != 0) loop_.CancelTimer(timer_);
  timer_ = loop_.AddTimer(delay_ms, [this] {
    timer_ = 0;
    Pump();
  });
}

}  // namespace estuary::bench
