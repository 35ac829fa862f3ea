// Copies on one of a device's copy streams, numbered in the order that
// stream runs them, each with an event recorded after it. Two uses:
//
// * Reads of host buffers on the copy-in stream. A unit that came back
//   leaves its host buffer to the store while the copy that reads it may
//   still be queued. The next save that takes the buffer must not overwrite
//   it before that copy has read it — but only that copy: ordering the save
//   after everything the copy-in stream holds (as a whole-stream mark does)
//   makes every save wait for every queued prefetch, and on a step where the
//   link is busy both ways the copy-out engine then idles behind the copy-in
//   engine. With a number per read, a save waits for the one read of its
//   buffer, and not at all once that read is known done (HostStore::take
//   prefers such buffers).
// * Pieces of a large save on the copy-out stream (Pager::offload), numbered
//   among the device's saves: a fetch given the chunks of a piece waits for
//   that piece, not for the whole unit's save.
//
// Events are reused: one that has fired is recorded again by a later copy
// (a stream that waited on it earlier waited on its earlier record, as
// cuStreamWaitEvent specifies). Guarded by the pager's lock.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class CopyMarks {
 public:
  // Numbers a copy just enqueued on `stream` and records an event after it.
  // Without an event the copy still gets its number; whoever must wait for
  // it then waits for the whole stream (event_for answers null).
  std::uint64_t mark(const DriverOps& driver, CUstream stream) { return mark_as(driver, stream, issued_ + 1); }
  // The same, numbered by the caller: above every number marked before
  // (numbers the caller gives copies it does not mark may lie between).
  std::uint64_t mark_as(const DriverOps& driver, CUstream stream, std::uint64_t serial);
  // Advances done() past every copy whose event has fired (in order: the
  // stream runs them in turn), one query per copy found done and one more.
  void poll(const DriverOps& driver);
  // Every copy up to this number has completed.
  std::uint64_t done() const { return done_; }
  // The event to wait on for copy `serial`: its own, or null when it has
  // none to give (done already: nothing to wait for; not marked or no
  // event: the caller must order itself some other way).
  CUevent event_for(std::uint64_t serial) const;
  // The stream was drained (its context is going): every copy is done and
  // every event destroyed. Call in the stream's context.
  void retire(const DriverOps& driver);

 private:
  struct Mark {
    std::uint64_t serial;
    CUevent event;
  };
  std::deque<Mark> pending_;     // in serial order
  std::vector<CUevent> idle_;    // fired, to be recorded again
  std::uint64_t issued_ = 0, done_ = 0;
};

}  // namespace vgpumem::vmm
