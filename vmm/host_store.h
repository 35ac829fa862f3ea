// Pinned host memory that holds offloaded units, bounded by
// VGPUMEM_HOST_LIMIT. Buffers are kept by size and reused: pinning memory is
// slow, and the same sizes come back every training iteration. A request
// with no free buffer of its own size takes the smallest free one up to
// twice its size before it pins: under PyTorch on an H200 the launch thread
// spent a fifth of its paging time pinning on demand (docs/results.md),
// with more than twice the bytes pinned that were ever out at once. One free
// buffer of the size last pinned on demand is kept ready: the reclaimer pins
// it ahead (spare_wanted, then add_spare), so a run of offloads of one size
// pins on the launch path once. Guarded by the pager's lock; the pinning
// itself in between runs without it.
//
// A buffer given back while a copy stream may still read it (a fetch's copy
// to the device) remembers that stream's device and the read's number on it
// (CopyMarks): an offload on the same device may take it at once, its copy
// ordered after that one read (take says which; the pager makes its
// copy-out stream wait for it), and take prefers buffers whose read is
// known done, which need no wait at all. Another device's copy stream is
// not ordered after it, so such a buffer serves another device only once
// its own device's copy streams are drained (`drain`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "vmm/driver_ops.h"
#include "vmm/host_path_stats.h"

// Note [Host buffers and the reads they wait for]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Pinned host buffers for offloaded units, reused by size
// (a request with none of its size free takes the smallest free buffer up to
// twice its size before it pins one; a buffer always goes back under the
// size it was pinned with), bounded by `VGPUMEM_HOST_LIMIT`, with one spare
// of the size last pinned on demand kept ready. A buffer a fetch's copy may still read serves an
// offload on the same device at once — its copy-out stream then waits for
// that one read, numbered among the copy-in stream's reads with an event
// each (`fetch_marks`, a `CopyMarks`), and the store hands out first the buffers whose
// read is known done, which need no wait — but another device's only
// after that device's copy streams are drained: two devices paging once
// overwrote each other's buffers this way. (Until 2026-11-25 a save into
// such a buffer waited for *everything* the copy-in stream held: on a
// link-bound step every save then waited for every queued prefetch, and
// the copy-out engine idled behind the copy-in engine 14 % of ResNet-50's
// step at half its peak. Tests `ScheduledMovesTest.ASaveIntoAHostBufferAPrefetchStillReadsWaitsForThatRead`
// and `…ASaveWaitsOnlyForTheReadOfItsOwnHostBuffer` fail without the wait
// and with the whole-stream wait.)

namespace vgpumem::vmm {

class HostStore {
 public:
  static constexpr int kIdle = -1;  // no copy stream reads the buffer any more

  // `drain(device)`: waits until every copy on `device`'s copy stream is done.
  // `stats`: where its pinning is counted (null: nowhere).
  HostStore(const DriverOps& driver, std::optional<std::uint64_t> limit, std::function<void(int)> drain = {},
            HostPathStats* stats = nullptr)
      : driver_(driver), limit_(limit), drain_(std::move(drain)), stats_(stats) {}

  // A pinned buffer of `bytes` for a copy on `device`'s copy stream, or
  // nullptr when the limit or the driver refuses (`error` says which).
  // `reads_done`: the number up to which reads on `device`'s copy-in stream
  // have completed. `read`, if given, gets the number of the read on that
  // stream that may still be reading the buffer (0: none; the caller orders
  // its copy after that read). A buffer no read holds back goes first.
  void* take(std::uint64_t bytes, int device, CUresult* error, std::uint64_t reads_done = 0,
             std::uint64_t* read = nullptr);
  // `read_by`: the device whose copy stream may still read or write it, or
  // kIdle; `read`: the number of the read on its copy-in stream (0: none,
  // only its copy-out stream, whose copies run in turn). `bytes` is what the
  // caller took; the buffer goes back under the size it was pinned with.
  void give_back(void* buffer, std::uint64_t bytes, int read_by = kIdle, std::uint64_t read = 0) {
    const auto pinned = pinned_size_.find(buffer);
    free_.emplace(pinned != pinned_size_.end() ? pinned->second : bytes,
                  Free{buffer, read_by, read_by == kIdle ? 0 : read});
  }
  // A free buffer up to this many times a request's size may serve it.
  static constexpr std::uint64_t kLargerServes = 2;

  // The size of a buffer worth pinning ahead, if any: the size last pinned
  // on demand, when none of it is free and the limit has room for two.
  std::optional<std::uint64_t> spare_wanted() const;
  // Adds a buffer pinned ahead; unpins it instead if the limit has no room
  // for it any more.
  void add_spare(void* buffer, std::uint64_t bytes);
  std::uint64_t pinned_ahead() const { return pinned_ahead_; }

  std::uint64_t pinned_bytes() const { return pinned_; }
  std::uint64_t pinned_peak() const { return peak_; }

 private:
  struct Free {
    void* buffer;
    int read_by;
    std::uint64_t read;  // on read_by's copy-in stream; 0: none
  };
  bool release_one_free();
  void drain(int device);

  const DriverOps& driver_;
  std::optional<std::uint64_t> limit_;
  std::function<void(int)> drain_;
  HostPathStats* stats_;
  std::multimap<std::uint64_t, Free> free_;  // bytes -> buffer
  std::map<void*, std::uint64_t> pinned_size_;  // every buffer pinned and not unpinned -> its size
  std::uint64_t pinned_ = 0, peak_ = 0;
  std::uint64_t last_on_demand_ = 0;  // size of the last buffer take() had to pin
  std::uint64_t pinned_ahead_ = 0;    // buffers add_spare kept, counted
};

}  // namespace vgpumem::vmm
