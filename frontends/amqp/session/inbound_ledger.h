#pragma once
// InboundLedger: the exactly-once state of client senders that attached
// with rcv-settle-mode second (AMQP 1.0 §2.7.3, §3.4, docs/amqp.md
// "Exactly-once links"). For each such link, by container-id and link
// name, the delivery tags the broker has taken and the outcome it gave
// each (pending until the broker's on_safe runs, then accepted or
// rejected), kept until the client settles that delivery. A transfer that
// arrives again with a kept tag, on the same link or on the link recovered
// by a later attach of the same name (§2.6.13, §3.4.6), is not published
// again: it is answered with the kept outcome.
//
// Bounded: at most `max_per_link` tags per link (the connection refuses a
// transfer past it with amqp:resource-limit-exceeded and ends the link),
// and at most `max_suspended` links detached with tags still kept; past
// that, the links detached longest ago are forgotten (counted by
// forgotten_links()), and a resend on one of them would be published again.
//
// With a data dir (set_persistence) every decided outcome is written to the
// shard's store under an `a` key (docs/storage.md) and deleted when the
// client settles or the link ends, so a restart or a kill -9 recovers the
// kept tags as suspended links (Restore). The connection answers an
// outcome only once its write is durable. Not replicated: a recovery on
// another node starts with none (docs/amqp.md says what that costs).
//
// Threading: one per shard, on its thread; connections hold it by
// shared_ptr (AmqpConnection::BindInboundLedger). stats() may be read from
// any thread (the node's /metrics).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace estuary::amqp {

class AmqpConnection;

// What the broker answered (or will answer) a transfer with.
struct InboundOutcome {
  enum class Kind : uint8_t { kPending, kAccepted, kRejected };
  Kind kind = Kind::kPending;
  std::string condition;  // kRejected: the error condition (§2.8.14)
  std::string description;
};

// One link's kept tags. `holder` is the connection the link is attached
// on now (empty while suspended): an outcome decided for a resend it holds
// is reported to it (AmqpConnection::AnswerKept).
class InboundLedger;
struct InboundLinkRecord {
  InboundLedger* ledger = nullptr;  // outlives the record: links hold the ledger too
  std::string key;
  std::map<std::string, InboundOutcome> tags;  // delivery tag -> outcome
  std::weak_ptr<AmqpConnection> holder;
  bool attached = false;
  uint64_t generation = 0;  // of the latest attach: a link detaching with an older one is not the holder
  std::list<InboundLinkRecord*>::iterator suspended_at;  // valid while suspended
};

class InboundLedger {
 public:
  static constexpr size_t kDefaultMaxPerLink = 4096;
  static constexpr size_t kDefaultMaxSuspended = 1024;
  explicit InboundLedger(size_t max_per_link = kDefaultMaxPerLink, size_t max_suspended = kDefaultMaxSuspended)
      : max_per_link_(max_per_link), max_suspended_(max_suspended) {}
  InboundLedger(const InboundLedger&) = delete;
  InboundLedger& operator=(const InboundLedger&) = delete;

  // The record of link `link_name` of `container_id`, kept from an earlier
  // attach (recovered) or new; attached to `holder` until Detach.
  std::shared_ptr<InboundLinkRecord> Attach(std::string_view container_id, std::string_view link_name,
                                            std::weak_ptr<AmqpConnection> holder);
  // The link that attached as `generation` detached (suspended: kept while
  // it holds tags, within the bound) or closed (`closed`: forgotten,
  // §2.6.6). Nothing happens if a later attach holds the record now.
  void Detach(const std::shared_ptr<InboundLinkRecord>& record, uint64_t generation, bool closed);

  // Where decided outcomes go (see above); unset, they stay in memory.
  struct Persistence {
    std::function<void(std::string key, std::string value)> put;
    std::function<void(std::string key)> erase;
  };
  void set_persistence(Persistence persistence) { persistence_ = std::move(persistence); }
  // Recovery, before any attach: one stored outcome; false if it does not decode.
  bool Restore(std::string_view key, std::string_view value);
  // Every change to a record's tags goes through these (and is written).
  void Keep(InboundLinkRecord& record, const std::string& tag, InboundOutcome outcome);
  void Drop(InboundLinkRecord& record, const std::string& tag);
  // The key prefix of the stored outcomes.
  static constexpr char kKeyTag = 'a';

  size_t max_per_link() const { return max_per_link_; }
  // Tags kept for the link (tests, the admin API); 0 for a link not known.
  size_t Kept(std::string_view container_id, std::string_view link_name) const;
  size_t links() const { return records_.size(); }
  size_t suspended() const { return suspended_.size(); }
  uint64_t forgotten_links() const { return stats_.forgotten_links.load(std::memory_order_relaxed); }
  // A transfer answered from a kept tag, not published again.
  void CountResend() { stats_.resends_answered.fetch_add(1, std::memory_order_relaxed); }
  uint64_t resends_answered() const { return stats_.resends_answered.load(std::memory_order_relaxed); }

  // What /metrics shows (docs/monitoring: estuary_amqp_exactly_once_*),
  // written on the shard's thread, read from any (relaxed).
  struct Stats {
    std::atomic<uint64_t> kept_tags{0};        // gauge: tags kept, every link
    std::atomic<uint64_t> links{0};            // gauge: links with a record
    std::atomic<uint64_t> suspended{0};        // gauge: detached links kept for a recovery
    std::atomic<uint64_t> resends_answered{0}; // counter
    std::atomic<uint64_t> forgotten_links{0};  // counter: suspended links dropped past the bound
  };
  const Stats& stats() const { return stats_; }

 private:
  void PublishSizes();
  void Forget(InboundLinkRecord* record);
  void DropAll(InboundLinkRecord& record);
  std::string StoreKey(const InboundLinkRecord& record, const std::string& tag) const;
  Persistence persistence_;
  size_t max_per_link_;
  size_t max_suspended_;
  std::unordered_map<std::string, std::shared_ptr<InboundLinkRecord>> records_;
  std::list<InboundLinkRecord*> suspended_;  // oldest detach first
  Stats stats_;
};

}  // namespace estuary::amqp
