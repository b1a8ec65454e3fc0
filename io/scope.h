#pragma once
// Scope: "is my owner still alive?" for callbacks handed to a Loop (Post,
// AddTimer) or to anything else that calls back later (a raft proposal, a
// partition read). The owner holds a Scope as a member; Guard(fn) returns a
// callable that runs fn only while that Scope exists, and does nothing once
// the owner is destroyed:
//
//   loop_.AddTimer(ms, scope_.Guard([this] { Retry(); }));
//   partitions_->Read(p, query, scope_.Guard([this](PartitionResult r) { ... }));
//
// Cost: a guarded callable is fn plus one std::weak_ptr, and calling it is
// one expired() check, the same as the hand-written pattern it replaces.
// Destroying the Scope does not cancel timers: a guarded timer still fires
// and returns at once. The Scope keeps no Loop& and no timer ids, so it
// costs nothing per timer; an owner that must stop a timer while it lives,
// or wants it off the loop at destruction, calls Loop::CancelTimer as before.
//
// Threading: single-threaded like the loop. A guarded callable must run on
// the owner's thread (the thread that destroys the owner), so that the check
// and the call cannot race with the destruction. Guard itself may be called
// on another thread only while the owner is known to be alive there (it
// copies a weak reference, as copying a std::weak_ptr would); the callable
// is then posted to the owner's thread (ClusterAgent's cross-shard port).
#include <memory>
#include <utility>

namespace estuary::io {

// A callable that forwards to fn while its Scope lives; copyable and movable
// when fn is. fn's result is discarded: callbacks return void.
template <typename Fn>
class Guarded {
 public:
  Guarded(std::weak_ptr<const int> alive, Fn fn) : alive_(std::move(alive)), fn_(std::move(fn)) {}

  template <typename... Args>
  void operator()(Args&&... args) {
    if (alive_.expired()) return;
    fn_(std::forward<Args>(args)...);
  }
  template <typename... Args>
  void operator()(Args&&... args) const {
    if (alive_.expired()) return;
    fn_(std::forward<Args>(args)...);
  }

 private:
  std::weak_ptr<const int> alive_;
  Fn fn_;
};

class Scope {
 public:
  Scope() = default;
  // Not copyable or movable: a guarded callback names this owner, and a
  // moved-to owner would be a different object.
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  template <typename Fn>
  Guarded<Fn> Guard(Fn fn) const {
    return Guarded<Fn>(token_, std::move(fn));
  }

 private:
  std::shared_ptr<const int> token_ = std::make_shared<const int>(0);
};

}  // namespace estuary::io
