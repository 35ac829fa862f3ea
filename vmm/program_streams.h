// The non-blocking streams the program made, so that cuMemFree can wait for
// the program's work without waiting for the pager's own copies.
//
// A free must leave no work of the program's still running (a kernel may
// reach the memory by a pointer no hook saw, and the program may count on
// the free as a barrier, as it is without vgpumem). A context synchronise
// does that, but it also waits for every copy the pager has queued on its
// own streams: offloads and prefetches made ahead for later operations,
// which the freed memory does not need. The program's work is reached
// without them: an event recorded on a context's legacy default stream
// waits for every blocking stream there (per-thread default streams too),
// and each non-blocking stream is waited for by itself. The pager's copy
// streams are non-blocking and never listed here.
//
// That needs every non-blocking stream the program holds: each is listed as
// cuStreamCreate or cuStreamCreateWithPriority returns it. A stream made by
// a call this does not follow (a green context's) loses track for good, and
// the free goes back to synchronising whole contexts.
//
// Not thread-safe: the pager calls it under its lock.
#pragma once

#include <cuda.h>

#include <vector>

// Note [The program's streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The non-blocking streams the program made,
// listed as `cuStreamCreate` and `cuStreamCreateWithPriority` return them
// and dropped as they (or their context) go: what `cuMemFree` waits for
// besides the legacy streams (Note [cuMemFree waits for the program's work]).

namespace vgpumem::vmm {

class ProgramStreams {
 public:
  // The program made `stream` in `context` (on `device`), with `flags`:
  // listed if it is non-blocking.
  void created(CUstream stream, unsigned flags, CUcontext context, int device);
  // The program made a stream this cannot list.
  void lost_track() { complete_ = false; }
  void destroyed(CUstream stream);
  void context_destroyed(CUcontext context);

  // Whether every non-blocking stream the program holds is listed.
  bool complete() const { return complete_; }
  // Each listed stream on `device` (and each whose device is not known).
  template <typename Visit>
  void for_each_on(int device, Visit&& visit) const {
    for (const Listed& listed : streams_) {
      if (listed.device == device || listed.device < 0) visit(listed.stream);
    }
  }
  std::size_t size() const { return streams_.size(); }

 private:
  struct Listed {
    CUstream stream = nullptr;
    CUcontext context = nullptr;
    int device = -1;
  };
  std::vector<Listed> streams_;
  bool complete_ = true;
};

}  // namespace vgpumem::vmm
