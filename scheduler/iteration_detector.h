// Finds the training iteration in the stream of execution identities (one
// 64-bit identity per launch or copy: the kernel, and its parameters with
// paged addresses replaced by unit ordinals), online, as it arrives.
//
// A candidate period q comes from the distance between an identity and its
// last occurrence; it is kept while every new identity equals the one q
// before it, and locks once that has held for q identities in a row and at
// least `min_confirm` (two whole iterations seen alike; the floor keeps a
// stream drawn from a few identities from locking on chance runs). While
// locked, an identity that differs from the one a period back breaks the
// lock (an evaluation step, a new shape, a checkpoint): the detector learns
// again. A lock that breaks before it has held for two periods was a part of
// the iteration, not all of it (the micro-steps of gradient accumulation
// before the optimizer step): that period must then repeat for longer than
// it did before it can lock again, so the whole step wins.
//
// observe() takes no lock, and allocates only where a lock makes a new
// step kind (a few times a run; never while a period holds): a fixed table
// of last occurrences (set-associative), a ring of recent identities, a few
// candidates. While settled in a lock it compares with the kind's sequence
// alone and leaves the table be; the break brings the table up to date from
// the ring (at most a period's worth, once). One detector serves one
// stream.
//
// Every period it locks on is kept as a step kind (step_kinds.h), named by
// a serial that stays the same each time the stream comes back to it: the
// lock the access log and the plans are keyed by. While unlocked, the
// detector also tries to recognise a known kind from a few operations, at
// any phase, and locks on it at once: after an evaluation step, training's
// kind is followed again within a few operations instead of two steps. A
// recognised lock is not yet trusted to be the whole step (it may be the
// micro-step of gradient accumulation, named again): until it has held for
// two periods the detector keeps its table and its candidates, so that a
// longer period still takes over; then it settles into the steady state.
// A random stream makes no kind, so nothing is recognised in it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduler/step_kinds.h"

// Note [Iteration detector]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Iteration detector (`scheduler/iteration_detector.{h,cpp}`, tests in
// `tests/unit/iteration_detector_test.cpp`): finds the period of the stream
// of execution identities online. A candidate period is the distance from
// an identity to its last occurrence (a fixed table); it locks once every
// identity has equalled the one a period back for a whole period and at
// least `min_confirm` (64) identities, so a stream drawn from a few kernels
// does not lock on a chance run. While locked, a differing identity breaks
// the lock (an evaluation step, a new shape) and learning starts again;
// every period it locked on is kept as a step kind (`step_kinds.h`) and
// recognised from a few operations when the stream comes back to it. A
// lock that breaks within two periods was part of the step (gradient
// accumulation's micro-steps): that period must then repeat for longer than
// it held before, so the whole step wins. `observe()` allocates only where
// a lock makes a new kind.
// While locked it compares each identity with the one a period back in its
// ring and leaves the table alone (a random line of a megabyte a launch, a
// cache miss each); the break replays the last period from the ring into
// the table, which leaves every identity where it last was, since the
// stream held its period until then (at most 32,768 entries, once a break,
// on the launch that breaks it).

namespace vgpumem::scheduler {

class IterationDetector {
 public:
  struct Options {
    std::size_t max_period = std::size_t{1} << 15;  // longest iteration found, in identities
    std::size_t min_confirm = 64;                    // identities a period must hold for, at least
    StepKinds::Options kinds;                        // recognition length, how long a kind is kept
  };
  enum class Event : std::uint8_t { none, locked, broken };

  explicit IterationDetector(Options options);
  IterationDetector() : IterationDetector(Options{}) {}

  // The next identity of the stream; says whether it locked or broke a period
  // (locked: also a known kind recognised, or a longer period that took
  // over from a recognised one; kind() says which).
  // Inline where the stream holds its period, every launch of a steady
  // state: a dozen instructions, less than the call would cost.
  Event observe(std::uint64_t identity) {
    const std::uint64_t index = seen_++;
    ring_[index & ring_mask_] = identity;
    if (settled_) {  // the steady state: the table is not touched
      const std::size_t next = phase_ + 1 == period_ ? 0 : phase_ + 1;
      if (sequence_[next] == identity) {
        ++held_;
        phase_ = next;
        return Event::none;
      }
    }
    return observe_otherwise(identity, index);
  }

  bool locked() const { return period_ != 0; }
  // The iteration's length in identities; 0 while not locked.
  std::size_t period() const { return period_; }
  // Where the last identity lies in the iteration (0 .. period - 1), the
  // kind's phase: the identity that completed the kind's first lock ended
  // an iteration, so the one after it is 0, and so it stays each time the
  // stream comes back to the kind. (Which launch truly starts a step is for
  // the phase detector.)
  // (Kept as it goes, not divided out: the launch path asks for it on every operation.)
  std::size_t phase() const { return locked() ? phase_ : 0; }
  // Whole iterations seen alike since the lock.
  std::uint64_t iterations() const { return locked() ? (seen_ - 1 - locked_at_) / period_ : 0; }
  std::uint64_t observed() const { return seen_; }
  std::uint64_t locks() const { return locks_; }
  std::uint64_t breaks() const { return breaks_; }
  // The kind locked on (its serial: the same each time the stream comes
  // back to it); 0 while not locked.
  std::uint64_t kind() const { return locked() ? kind_ : 0; }
  // Whether the last lock made its kind (else it came back to a known one).
  bool new_kind() const { return new_kind_; }
  // Locks that came back to a known kind (recognised, or found again).
  std::uint64_t returns() const { return returns_; }
  const StepKinds& kinds() const { return kinds_; }
  // The kind `serial` has had a whole iteration timed (StepKinds::timed).
  void kind_timed(std::uint64_t serial) { kinds_.timed(serial); }
  // Unlocked, and the last identity ends a kind never timed: the next may
  // start it (StepKinds::untimed_may_start).
  bool untimed_kind_may_start() const { return !locked() && kinds_.untimed_may_start(); }

 private:
  struct Candidate {
    std::size_t period = 0;  // 0: free slot
    std::size_t matches = 0;
  };
  struct Suspect {  // a period whose lock broke early, and how long it had held
    std::size_t period = 0;
    std::size_t held = 0;
  };
  static constexpr std::size_t kCandidates = 8;
  static constexpr std::size_t kSuspects = 4;

  std::uint64_t back(std::size_t distance) const { return ring_[(seen_ - 1 - distance) & ring_mask_]; }
  // observe() for an identity that breaks the lock, with none, or with a
  // recognised lock not yet settled.
  Event observe_otherwise(std::uint64_t identity, std::uint64_t index);
  // Notes the identity in the table and follows the candidates with it.
  Event learn(std::uint64_t identity, std::uint64_t index);
  // Locks on `kind` at `index` (its phase there as named).
  void enter(const StepKinds::Named& kind, std::uint64_t index);
  void consider(std::size_t period);
  std::size_t needed(std::size_t period) const;
  // Notes `identity` at `index` in the table; returns where it last was (+1; 0: not there).
  std::uint64_t remember(std::uint64_t identity, std::uint64_t index);
  void catch_up(std::uint64_t index);
  Event follow_candidates(std::uint64_t identity);
  Event break_lock(std::uint64_t identity, std::uint64_t index);

  Options options_;
  std::vector<std::uint64_t> ring_;    // the last identities, a power of two of them
  std::size_t ring_mask_ = 0;
  struct Last {  // an identity and where it last arrived (+1; 0: never)
    std::uint64_t key = 0, at = 0;
  };
  // Identities whose hashes share a set share its four ways, the one that
  // arrived longest ago giving way: a lone collision must not make the
  // detector forget where an identity last was (the period would then be
  // found late). One cache line a set.
  struct alignas(64) Set {
    std::array<Last, 4> ways;
  };
  std::vector<Set> last_;
  std::size_t set_mask_ = 0;
  std::array<Candidate, kCandidates> candidates_{};
  std::array<Suspect, kSuspects> suspects_{};
  std::size_t next_suspect_ = 0;
  std::uint64_t seen_ = 0;
  std::size_t period_ = 0;
  std::uint64_t locked_at_ = 0;  // index where the kind's phase was last period - 1 before the lock
  std::uint64_t lock_index_ = 0;    // index of the identity that locked
  std::uint64_t frozen_from_ = 0;   // the table is kept up to this index (settled since)
  std::size_t phase_ = 0;        // (seen_ + period_ - 2 - locked_at_) % period_ while locked
  std::size_t held_ = 0;         // identities matched since the lock's candidate started
  bool settled_ = false;         // locked, and the steady state: the table and the candidates left be
  const std::uint64_t* sequence_ = nullptr;  // the kind's identities by phase, while locked
  std::uint64_t kind_ = 0;
  bool new_kind_ = false;
  std::uint64_t locks_ = 0, breaks_ = 0, returns_ = 0;
  StepKinds kinds_;
  std::vector<std::uint64_t> last_period_;  // the period just locked, in order (made into a kind)
};

}  // namespace vgpumem::scheduler
