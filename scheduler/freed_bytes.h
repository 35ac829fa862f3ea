// The device memory paged units may use, as simulate() (plan_timing.cpp)
// follows it through a plan: the pager's chunk pool, in bytes. Its own file
// for its tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>

namespace vgpumem::scheduler {

// The device memory paged units may use, in issue order, as the pager's
// chunk pool holds it: an offload gives its bytes back once its save is
// done (a chunk is reused only after the copy that empties it), and a
// prefetch takes the earliest freed first, its copy waiting for the save
// of what it takes. Bytes owed (everything is resident at the start, until
// the first offloads) are paid back before any is free.
class FreedBytes {
 public:
  explicit FreedBytes(std::uint64_t budget, std::uint64_t total)
      : unlimited_(budget == std::numeric_limits<std::uint64_t>::max()),
        spare_(static_cast<double>(budget) - static_cast<double>(total)) {}

  void give_back(double bytes, double saved_at) {
    if (unlimited_) return;
    if (spare_ < 0) {
      const double paid = std::min(bytes, -spare_);
      spare_ += paid;
      bytes -= paid;
    }
    if (bytes > 0) freed_.push_back({saved_at, bytes});
  }
  // When `bytes` taken now can be written: -infinity if at once. Where the
  // plan asks for more than is free (the first step, before its offloads
  // have paid back what was resident at the start; a plan that does not
  // fit), on demand would evict: not modelled, taken at once — but owed, so
  // that the next offloads pay it back before their bytes are free. (Taken
  // for nothing, the bytes were once free twice: a step that took some
  // while the start's debt was still being paid found that much more room
  // in every step after, which the pager never has. VGG-16 at half its
  // peak was predicted 139 ms, and ran 176.)
  double take(double bytes) {
    double ready = -std::numeric_limits<double>::infinity();
    if (unlimited_) return ready;
    const double spare = std::min(bytes, std::max(spare_, 0.0));
    spare_ -= spare;
    bytes -= spare;
    while (bytes > 0 && !freed_.empty()) {
      Freed& front = freed_.front();
      const double used = std::min(bytes, front.bytes);
      ready = std::max(ready, front.at);
      front.bytes -= used;
      bytes -= used;
      if (front.bytes <= 0) freed_.pop_front();
    }
    if (bytes > 0) spare_ -= bytes;
    return ready;
  }

 private:
  struct Freed {
    double at, bytes;
  };
  const bool unlimited_;
  double spare_;
  std::deque<Freed> freed_;  // in save order: the copy-out engine runs them in turn
};

}  // namespace vgpumem::scheduler
