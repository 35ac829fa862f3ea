// What the scheduler may ask of the pager (Note [The
// scheduler's interface to the pager], below): move one unit ahead of need, and time operations.
// Nothing here is needed for correctness: whatever the scheduler does or
// fails to do, the launch path makes every operation's units resident
// before it runs (on demand), so a plan can only be early, late or wasted,
// never wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include <cuda.h>

// Note [The scheduler's interface to the pager]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The scheduler's interface to the pager (`vmm/pager_control.h`,
// `vmm/scheduled_moves.cpp`): `offload_unit` (after what its users have
// enqueued, on the copy-out stream), `prefetch_unit` (on the copy-in
// stream, room made as on demand; the unit then counts as just used, so
// the next room is not made of what has just come back for a use soon), a
// unit's facts, the paging budget (the
// cap less what the program holds outside the pager), and timing marks.
// The marks come from a pool (`vmm/mark_pool.{h,cpp}`): events per context,
// made the first time a timed iteration needs them and recorded again by
// every later one; giving one back is a push under the pool's own lock, no
// driver call and not the pager's lock. A context's spare events are
// destroyed with it.
// The scheduler never calls the driver.

namespace vgpumem::vmm {

struct Unit;

// Two timing marks of work on `device`: how long from the first to the second?
struct ElapsedQuery {
  int device = 0;
  CUevent from = nullptr, to = nullptr;
};

struct UnitFacts {
  bool live = false;  // a paged allocation holds it (not freed, not a handle's only mapping)
  int device = 0;
  std::uint64_t bytes = 0;
  bool resident = false;
  bool movable = false;  // neither pinned nor shared nor held by a launch right now
};

// The plan's moves asked of move_ahead() so far, by how they ended.
struct MoveCounts {
  std::uint64_t offloads = 0, prefetches = 0;  // made
  std::uint64_t refused = 0;                   // not made: offload_unit or prefetch_unit said no
};

// Running totals of paging's host work (vmm/host_path_stats.h): the access
// log notes them at each step's end, so that a step's own share is known
// (the whole run's counts hold the warm-up before any plan).
struct HostPathCounts {
  std::uint64_t program_paging_ns = 0;  // the program's threads paging (slow path, moves made inline)
  std::uint64_t program_vmm_calls = 0;  // VMM calls made on the program's threads
  std::uint64_t moved_bytes = 0;        // offloaded + fetched
  std::uint64_t fetches_on_demand = 0, fetches_planned = 0;
  // Now, on the clock paging's host time is told on (the simulated driver's
  // clock of the calling thread where there is one, else the host's): two
  // readings on one thread time what it did between them, a step say.
  std::uint64_t clock_ns = 0;
};

class PagerControl {
 public:
  virtual ~PagerControl() = default;

  // The moves a plan makes once one operation is issued: room first (the
  // offloads, any of which may take units still inside their launch grace
  // if `inside_grace`), then what comes back. The pager hands them to its
  // mover thread (vmm/mover.h), so that the calling thread, the program's,
  // goes on at once; made there in order, soon after, each as offload_unit
  // or prefetch_unit would make it now. This default makes them on the
  // calling thread. Called on the launch path: allocates nothing.
  virtual void move_ahead(std::span<Unit* const> offloads, std::span<Unit* const> prefetches,
                          bool inside_grace) noexcept {
    for (Unit* unit : offloads) count_move(true, offload_unit(unit, inside_grace));
    for (Unit* unit : prefetches) count_move(false, prefetch_unit(unit));
  }
  // How the moves asked of move_ahead so far ended (those still queued on a
  // mover not yet counted).
  MoveCounts moves_made() const {
    return {offloads_made_.load(std::memory_order_relaxed), prefetches_made_.load(std::memory_order_relaxed),
            moves_refused_.load(std::memory_order_relaxed)};
  }

  // Paging's host work so far; all zero where not counted (a stand-in
  // pager). Atomic loads only: asked on the launch path, once a step.
  virtual HostPathCounts host_path_counts() const noexcept { return {}; }

  // Starts copying `unit` to the host after all work the streams that used it
  // have enqueued so far; its chunks serve others once the copy is done (in
  // stream order). Returns without waiting. False when it cannot go now: not
  // resident, pinned, held by a launch between its check and its enqueue,
  // inside its launch grace (unless `inside_grace`: a plan made with the
  // grace cut, where no plan fits outside it; never under the torture
  // check), or a capture or the host limit in the way.
  virtual bool offload_unit(Unit* unit, bool inside_grace) = 0;
  // Starts bringing `unit` back on the copy stream; work that names it waits
  // for its arrival, no longer. Room is made as on demand (in the victim
  // policy's order); the unit then counts as used now. False when it cannot
  // come now (it stays on the host, and its next use fetches it).
  virtual bool prefetch_unit(Unit* unit) = 0;
  virtual UnitFacts facts(const Unit* unit) const = 0;
  // The bytes of `device`'s cap paged units may use: the cap less what the
  // program holds outside the pager.
  virtual std::uint64_t paging_budget(int device) const = 0;
  // The link's rate as measured on the pager's own copies so far, bytes a
  // nanosecond (GB/s), to the host or to the device; 0 before any.
  virtual double link_bytes_per_ns(bool to_host) const = 0;
  // The driver work a move has cost so far, on average, in ns: a fetch's
  // (its mapping, before its copy) or a save's (its unmapping, after it);
  // 0 before any, or where none is measured.
  virtual double driver_ns_per_move(bool /*save*/) const { return 0; }

  // Timing: an event recorded on `stream` now (in the calling thread's
  // context), null if none could be; the nanoseconds between marks of work
  // on a device, many pairs at once (waits for a second mark not yet
  // reached; -1 where unknown); and giving one back. Any thread may ask the
  // last two. In one call because a recorded step asks thousands of pairs
  // while the program keeps the driver busy: one context switch for the
  // lot, and no wait for a mark already passed.
  virtual CUevent mark(CUstream stream) = 0;
  virtual void elapsed_ns(std::span<const ElapsedQuery> queries, std::span<std::int64_t> nanoseconds) = 0;
  virtual void release_mark(int device, CUevent mark) = 0;

 protected:
  void count_move(bool offload, bool made) noexcept {
    (!made ? moves_refused_ : offload ? offloads_made_ : prefetches_made_).fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> offloads_made_{0}, prefetches_made_{0}, moves_refused_{0};
};

}  // namespace vgpumem::vmm
