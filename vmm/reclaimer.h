// The pager's background thread: the work that would otherwise stall a
// launch, done ahead of it. It waits for offloads to reach the host and
// unmaps their ranges, creates physical chunks while the cap has room, and
// pins a host buffer for the next offload (Pager::reclaim). It sleeps until
// woken, so an idle process costs nothing.
//
// The thread itself knows nothing of paging: it runs `work` once per wake-up
// (wake-ups that arrive while it runs are folded into one more pass). It runs
// with every asynchronous signal blocked, so signals sent to the process go
// to the program's own threads; a pass that throws is dropped, never fatal.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

// Note [The reclaimer]
// ~~~~~~~~~~~~~~~~~~~~
// The reclaimer (`vmm/reclaimer.*`, `Pager::reclaim`) is one thread per
// process that sleeps until the pager wakes it (after an offload, or when the
// free chunks run low) and then does the slow work that would otherwise fall
// on a program's thread:
//
// 1. *Unmaps finished offloads.* It records an event of its own (blocking
//    sync, no timing) behind everything on each copy stream, waits for it
//    without the pager's lock, then unmaps every unit whose copy is done.
// 2. *Creates chunks ahead*: while a device has fewer than 8 free chunks
//    (`PagerOptions::spare_chunks`) and the cap has room, one more whole block
//    (`Pager::create_chunks_ahead`), charged to the cap like any chunk, so an allocation or fetch
//    under the cap maps chunks that exist. Created under the pager's lock (a
//    slow path may wait one `cuMemCreate`; launches never do), so that once
//    `make_room` has given room to the program's own unpaged memory it can
//    stop this for good, with nothing in flight to take the room back.
// 3. *Pins the next host buffer*: one more of the size the last offload had
//    to pin on demand, if the host limit has room for it and one more.
// 4. *Times stalls* (`Pager::time_stalls`), last: it takes the stall timers
//    the launch path left (an event recorded on the program's stream before
//    each wait for a unit and one after) and waits, without the pager's lock,
//    for each second event, to add the wait's GPU time to `stall_ns`.
//
// It runs in relaxed capture mode and records only on the pager's copy
// streams (the stall timers' events were recorded by the launch path; it only
// waits for them), so it never invalidates a capture the program has open
// (gpu-facts §8.9). A
// refusal (chunk or pinned memory) is logged once and that kind of work stops;
// the on-demand path still works. It is stopped at exit before the driver's
// own teardown. In a forked child it does not exist, and the child never
// pages (every hook passes straight through there). It runs with asynchronous
// signals blocked; a pass that throws (out of memory) is dropped, and the next
// wake-up tries again.

namespace vgpumem::vmm {

class Reclaimer {
 public:
  explicit Reclaimer(std::function<void()> work);
  ~Reclaimer() { stop(); }
  Reclaimer(const Reclaimer&) = delete;
  Reclaimer& operator=(const Reclaimer&) = delete;

  // Asks for one more pass; never blocks on the pass itself.
  void wake();
  // Finishes the pass in progress, if any, and ends the thread.
  void stop();

 private:
  void run();

  std::function<void()> work_;
  std::mutex mutex_;
  std::condition_variable woken_;
  bool pending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vgpumem::vmm
