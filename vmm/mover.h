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
