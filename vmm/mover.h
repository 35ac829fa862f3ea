// The mover: one thread of the pager's that makes the plan's moves, so that
// the program's threads do not.
//
// A plan's triggers fire on the thread that issues the operation they
// follow (scheduler::Scheduler::accessed). Made there, an offload's events
// and copy and, worse, a prefetch's mapping (a cuMemMap per physical
// handle and a cuMemSetAccess, 5-90 µs each behind the driver's one lock on
// an H200 under training) hold up the program's next launch: on the H200
// the launch thread, not the link, set the length of a step
// (docs/results.md). Posted here instead, they are made by this thread, in
// the order posted, while the program goes on issuing work.
//
// Correctness does not depend on when a move is made. Each is the offload or
// fetch the launch path makes on demand, under the pager's lock; an offload
// orders its copy after whatever the unit's streams have enqueued by then
// (a later use included), and a unit not back in time is fetched by the
// launch that needs it, or waited for if the mover holds it that moment. A
// late move costs time, never a byte.
//
// Posting takes no lock and allocates nothing: a slot of a bounded ring
// (Vyukov's multi-producer queue: a sequence number per slot, one atomic
// add to claim it) and, when the thread sleeps, a futex wake. A full ring
// refuses the move, and the caller makes it itself.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

// Note [The mover]
// ~~~~~~~~~~~~~~~~
// The mover (`vmm/mover.*`, `Pager::move_ahead`, `VGPUMEM_MOVER`) is one
// thread per process that makes the learned schedule's moves. A trigger fires
// on the program's thread that issued the operation it follows; made there,
// an offload's events and copy and a prefetch's mapping — a `cuMemMap` per
// physical handle and a `cuMemSetAccess`, tens of microseconds each behind
// the driver's one lock on an H200 under training (`gpu-paging-costs.md`) —
// held up the program's next launch, and on the H200 the launch thread, not
// the link, set the step's length. Now the launch path posts each move to a
// bounded ring (Vyukov's multi-producer queue: a sequence number per slot,
// one compare-and-swap to claim one; no lock, no allocation) and goes on; the
// mover, asleep on a futex while the ring is empty, takes the moves in the
// order posted and makes each one as `offload_unit` or `prefetch_unit` would,
// under the pager's lock, in relaxed capture mode as the reclaimer. A full
// ring refuses and the posting thread makes that move itself.
//
// Nothing depends on when a move is made. An offload orders its copy after
// whatever the unit's streams have enqueued by the time it is made (a later
// use of the unit included). A launch that finds a unit on the host with a
// prefetch of it still queued (`Unit::fetches_queued`) waits for that
// prefetch (an atomic wait, outside the pager's lock) rather than fetch it
// twice; a prefetch the mover could not make leaves the unit to the launch,
// which fetches it as on demand. A late move costs time, never a byte; a move of a unit
// freed meanwhile is refused (`Unit::retired`), and one whose unit was reused
// by a new allocation moves that allocation, which is as safe as any
// eviction. The offload's launch grace counts the posting thread's operation
// as enqueued (`Mover::Move::enqueued_bit`), as it would on that thread.
//
//
// The trace's `paging.mover` gives moves posted and made, moves the ring
// refused, the mover's busy time and the longest a move waited in the ring.
// It is stopped at exit before the reclaimer; in a forked child it does not
// exist and a plan's moves are made where they fire. Tests:
// `MoverThread.*` (the ring: order per poster, two posters concurrently,
// full, stop, a throwing move), `MoverTest.ThePlansMovesMakeNoDriverCallOnTheThreadThatFiresThem`
// (with `VGPUMEM_MOVER=off` as its control),
// `MoverTest.RandomMovesAgainstTwoThreadsWritesAndFreesLoseNothing` (two
// program threads' asynchronous writes, frees and reallocations against
// random moves of either's units; every byte, and the simulator's physical
// peak under the cap at every instant, `vgpusimPhysicalPeak`).

namespace vgpumem::vmm {

struct Unit;

class Mover {
 public:
  struct Move {
    Unit* unit = nullptr;
    bool offload = false;       // else a prefetch
    bool inside_grace = false;  // an offload of a plan made with the launch grace cut
    // The posting thread's LaunchThread::enqueued_bit: its operation just
    // enqueued, which the launch grace counts as done.
    std::uint64_t enqueued_bit = 0;
    // The simulated driver's clock on the posting thread (DriverOps::
    // host_time_ns), carried to the mover's before the move; 0 on hardware.
    std::uint64_t posted_ns = 0;
  };
  // `make` is called on the mover's thread, once per move, in posting order;
  // `drop` (if any) on the stopping thread for each move stop() leaves
  // unmade. `capacity`: moves the ring holds (a power of two).
  explicit Mover(std::function<void(const Move&)> make, std::size_t capacity = 4096,
                 std::function<void(const Move&)> drop = {});
  ~Mover() { stop(); }
  Mover(const Mover&) = delete;
  Mover& operator=(const Mover&) = delete;

  // Queues a move; false when the ring is full (or the mover stopped).
  // Lock-free and allocation-free; any thread.
  bool post(const Move& move) noexcept;
  // Returns once every move posted before the call has been made (or the
  // mover stopped).
  void drain();
  // Ends the thread after the move in hand; moves still queued are dropped
  // (given to `drop`).
  void stop();

  struct Counts {
    std::uint64_t posted = 0;      // moves queued
    std::uint64_t made = 0;        // moves made (whatever `make` decided)
    std::uint64_t ring_full = 0;   // moves refused for want of a slot
    std::uint64_t busy_ns = 0;     // wall time spent making moves
    std::uint64_t lag_ns_max = 0;  // longest wall time a move waited in the ring
  };
  Counts counts() const;

 private:
  struct Slot {
    std::atomic<std::uint64_t> sequence{0};
    Move move;
    std::uint64_t posted_at = 0;  // steady clock, ns: the lag
  };
  void run();
  bool take(Move* move, std::uint64_t* posted_at);

  std::function<void(const Move&)> make_;
  std::function<void(const Move&)> drop_;
  const std::size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<std::uint64_t> tail_{0};  // next slot to claim (producers)
  alignas(64) std::uint64_t head_ = 0;              // next slot to take (the thread's own)
  // Bumped by every post and by stop(); the thread sleeps on it (a futex)
  // while the ring is empty.
  alignas(64) std::atomic<std::uint32_t> signal_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> made_{0}, ring_full_{0}, busy_ns_{0}, lag_ns_max_{0};
  std::atomic<std::uint32_t> draining_{0};  // threads in drain(): the thread wakes them as moves are made
  std::thread thread_;
};

}  // namespace vgpumem::vmm
