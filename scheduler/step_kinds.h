// Note [Step kinds]
// ~~~~~~~~~~~~~~~~~
// The step kinds an iteration detector has locked on (iteration_detector.h):
// each period it confirmed, kept by its identities, so that when the stream
// comes back to it after something else (an evaluation step, another
// shape bucket, the other half of an alternating pair) it is named again
// from a few operations instead of learned again over two whole steps.
//
// A kind is its identity sequence, phase by phase (phase 0 is the identity
// after the one that completed its first lock), an index from identity to
// phase, and a serial that names it for good (the lock the access log and
// the plans are keyed by). The same period found again at another offset
// (the stream relocked one step later, half-way into it) is the same kind:
// adopt() finds it by rotation.
//
// Recognition: while the detector is unlocked, every identity it sees is
// looked up in each kind's index; a hit starts a recogniser (kind, next
// phase), each later identity must be the kind's next one, and after
// `recognise` in a row (or the whole period, if shorter) the kind is named
// at that phase. A few recognisers run at once; one that misses is dropped.
//
// Bounded: at most kMaxKinds kinds, each costing 24 bytes an identity of
// its period (the sequence, and an index of twice as many 32-bit slots,
// rounded up to a power of two); a new kind past that takes the place of
// the one seen longest ago, and a kind not seen for `max_age` identities is
// dropped when next looked at. Memory is taken when a kind is made (a lock:
// a few times a run), never on an identity that follows a period.
//
// The access log keys its recordings and the positions it hands the
// scheduler by the kind's serial, so the scheduler keeps a trigger table
// per kind and, when the stream is in a kind other than the table in force,
// puts that kind's table in force. Not done yet: a step that matches no
// kind is not kept as a candidate kind (a bucket becomes a kind only once
// it has run twice in a row); a run of kinds whose super-period no single
// identity marks (train, train, evaluate, where the evaluation's identities
// are all the training step's) is followed kind by kind; and following is
// not tolerant of an inserted launch (it breaks the lock; the kind is named
// again a few operations later).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace vgpumem::scheduler {

class StepKinds {
 public:
  static constexpr std::size_t kMaxKinds = 8;
  static constexpr std::size_t kRecognisers = 4;

  struct Options {
    std::size_t recognise = 8;                  // identities in a row that name a kind
    std::uint64_t max_age = std::uint64_t{1} << 24;  // identities a kind may go unseen
  };
  // Where a kind was named: its serial, its period, and the phase of the
  // identity that named it.
  struct Named {
    std::uint64_t serial = 0;  // 0: none
    const std::uint64_t* sequence = nullptr;
    std::size_t period = 0, phase = 0;
  };

  explicit StepKinds(Options options) : options_(options) {}
  StepKinds() : StepKinds(Options{}) {}

  // The kind whose sequence is `sequence` (a period just locked, phase 0
  // first), made if no kind is that sequence at some rotation. `now`: the
  // identities observed so far. `phase` of the result: the phase at which
  // `sequence`'s last identity lies in the kind. `made`: set if new.
  Named adopt(std::span<const std::uint64_t> sequence, std::uint64_t now, bool* made);
  // The next identity of an unlocked stream: a kind it names, else none.
  Named recognise(std::uint64_t identity, std::uint64_t now);
  // The stream left the kind `serial` (or is in it still) at `now`.
  void seen(std::uint64_t serial, std::uint64_t now);
  // Drops every recogniser (the stream locked).
  void stop_recognising() { recognisers_.fill(Recogniser{}); }
  // The kind `serial` has had a whole iteration timed (the planner has it).
  void timed(std::uint64_t serial);
  bool was_timed(std::uint64_t serial) const;
  // Whether the identity recognise() saw last ends a kind never timed (is
  // its last phase): the next one may start it, and is worth timing.
  bool untimed_may_start() const { return untimed_may_start_; }

  std::size_t size() const;
  std::uint64_t made() const { return made_; }
  std::uint64_t named() const { return named_; }  // recognitions
  std::uint64_t aged_out() const { return aged_out_; }
  bool knows(std::uint64_t serial) const { return slot_of(serial) != nullptr; }

 private:
  struct Kind {
    std::uint64_t serial = 0;  // 0: a free slot
    std::vector<std::uint64_t> sequence;
    std::vector<std::uint32_t> index;  // phase + 1 of an identity (its first), 0: empty
    std::uint64_t last_seen = 0;
    bool timed = false;
  };
  struct Recogniser {
    const Kind* kind = nullptr;  // null: free
    std::size_t next = 0, matched = 0;
  };

  // The phase of `identity` in `kind` (its first), or -1.
  static std::ptrdiff_t phase_of(const Kind& kind, std::uint64_t identity);
  static void build_index(Kind& kind);
  // Whether `sequence` is `kind`'s rotated by `offset` (sequence[0] at kind phase `offset`).
  static bool rotated(const Kind& kind, std::span<const std::uint64_t> sequence, std::size_t offset);
  const Kind* slot_of(std::uint64_t serial) const;
  // A slot for a new kind: free, aged out, or the one seen longest ago.
  Kind& free_slot(std::uint64_t now);
  void age(std::uint64_t now);

  Options options_;
  std::array<Kind, kMaxKinds> kinds_{};
  std::array<Recogniser, kRecognisers> recognisers_{};
  std::uint64_t next_serial_ = 1;
  std::uint64_t made_ = 0, named_ = 0, aged_out_ = 0;
  bool untimed_may_start_ = false;
};

}  // namespace vgpumem::scheduler
