// Timing marks for the scheduler's timed iterations (PagerControl::mark),
// made once and used again: an event per mark, created and destroyed each
// time, cost the launch thread two driver calls more per mark (and, on the
// simulator, its lock twice more). The pool keeps the events it made, spare
// ones per context (an event can only be recorded on a stream of its own
// context), and hands one out for the next mark in that context.
//
// Its lock is its own, held for a push or a pop: only timed operations (the
// first iteration after a lock, then one in timing_every) and the release of
// their marks take it, never the pager's lock and never an untimed launch.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda.h>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class MarkPool {
 public:
  explicit MarkPool(const DriverOps& driver) : driver_(driver) {}
  // Events are not destroyed: the pager outlives the driver at exit.
  MarkPool(const MarkPool&) = delete;
  MarkPool& operator=(const MarkPool&) = delete;

  // A spare event of `context` (current on the calling thread), or one made
  // now when none is spare; null if none could be made.
  CUevent take(CUcontext context);
  // An event take() handed out comes back, to be taken again; true. False
  // for an event the pool did not make (the caller destroys it).
  bool give(CUevent event);
  // `context` is about to be destroyed: its spare events go now, and those
  // still out are dropped when they come back (the driver freed them).
  void forget(CUcontext context);

  std::size_t made() const;

 private:
  struct Spare {
    CUcontext context;
    std::vector<CUevent> events;
  };
  Spare& spare_of(CUcontext context);  // under mutex_

  const DriverOps& driver_;
  mutable std::mutex mutex_;
  std::vector<Spare> spare_;                        // a context's list is kept once made: few contexts
  std::unordered_map<CUevent, CUcontext> owner_;    // every event made and alive; null context: forgotten
};

}  // namespace vgpumem::vmm
