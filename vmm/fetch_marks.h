// The reads of host buffers on one device's copy-in stream, numbered in the
// order that stream runs them, each with an event recorded after it.
//
// Why: a unit that came back leaves its host buffer to the store while the
// copy that reads it may still be queued. The next save that takes the
// buffer must not overwrite it before that copy has read it — but only that
// copy: ordering the save after everything the copy-in stream holds (as a
// whole-stream mark does) makes every save wait for every queued prefetch,
// and on a step where the link is busy both ways the copy-out engine then
// idles behind the copy-in engine. With a number per read, a save waits for
// the one read of its buffer, and not at all once that read is known done
// (HostStore::take prefers such buffers).
//
// Events are reused: one that has fired is recorded again by a later read
// (a stream that waited on it earlier waited on its earlier record, as
// cuStreamWaitEvent specifies). Guarded by the pager's lock.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "vmm/driver_ops.h"

namespace vgpumem::vmm {

class FetchMarks {
 public:
  // Numbers a read just enqueued on `stream` and records an event after it.
  // Without an event the read still gets its number; whoever must wait for
  // it then waits for the whole stream (event_for answers null).
  std::uint64_t mark(const DriverOps& driver, CUstream stream);
  // Advances done() past every read whose event has fired (in order: the
  // stream runs them in turn), one query per read found done and one more.
  void poll(const DriverOps& driver);
  // Every read up to this number has completed.
  std::uint64_t done() const { return done_; }
  // The event to wait on for read `serial`: its own, or null when it has
  // none to give (done already: nothing to wait for; no event: wait for
  // the stream).
  CUevent event_for(std::uint64_t serial) const;
  // The stream was drained (its context is going): every read is done and
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
