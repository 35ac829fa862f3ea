// The producer-to-consumer grace: a unit an operation names is no victim
// while the next K operations on that stream are prepared (K = 1: only the
// one right after it).
//
// Why: some tables of device pointers are built on the device. PyTorch's
// batched linear algebra writes a cuBLAS pointer array with `arange(start =
// data_ptr)`, `_grouped_mm` runs a prepare kernel that writes A/B/output
// pointer arrays; the next kernel, named only the table, follows them. The
// producer's parameters name the target buffers (that is how it computes
// their addresses); the consumer's do not. Offloading a target between the two
// launches would make the consumer read whatever the pager mapped there next.
// The grace keeps what the last few operations of a stream named on the device
// through the following ones, which covers the producer-consumer pairs of
// those libraries (docs/configuration.md, VGPUMEM_GRACE_LAUNCHES). A table
// reused much later is not covered: strict mode turns such a read into a
// fault.
//
// A scheduled offload may go as the K-th operation after the one that named
// the unit is enqueued (its copy waits for that operation): protects() is
// told which stream's operation the asking thread has just enqueued.
//
// Counting: one counter per stream bit (StreamRegistry), advanced by every
// operation that names paged memory on that stream; a unit keeps one stamp,
// (the stream's bit, the count of the last operation that named it). Both are
// relaxed atomics: the launch path takes no lock and allocates nothing here,
// and the victim choice (under the pager's lock) only needs a recent view.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

#include "vmm/grace_kind.h"
#include "vmm/unit.h"

// Note [The blanket launch grace]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The producer-to-consumer grace's counter, and under
// `VGPUMEM_GRACE=blanket` the whole rule (`VGPUMEM_GRACE_LAUNCHES`): a
// counter per stream bit, advanced by each operation that names paged
// memory; each unit it names is stamped (stream, count). The victim choice passes over a unit whose stream has counted at
// most K operations since, and takes one only when nothing else can go; torture
// leaves it alone. A plan's offload, issued as the feed hears of an
// operation, counts that operation as done (it is enqueued): a unit named K
// operations before it may go right behind it. It covers tables of device pointers that one kernel writes
// and the next reads. See
// docs/configuration.md#vgpumem_grace_launches.

namespace vgpumem::vmm {

class LaunchGrace {
 public:
  static constexpr unsigned kStreams = 64;  // one counter per stream bit

  // `operations`: K; 0 turns the grace off.
  explicit LaunchGrace(std::uint32_t operations) : operations_(operations) {}

  std::uint32_t operations() const { return operations_; }

  // Counts one operation on the stream of `bit` (one bit set) and returns the
  // stamp to leave on every unit it names.
  std::uint64_t count(std::uint64_t bit) {
    const unsigned stream = stream_of(bit);
    const std::uint64_t sequence = counters_[stream].operations.fetch_add(1, std::memory_order_relaxed) + 1;
    return (sequence << kStreamBits) | stream;
  }

  // The stream (its counter's index) and number on it a stamp holds.
  static unsigned stream_of_stamp(std::uint64_t stamp) { return static_cast<unsigned>(stamp & (kStreams - 1)); }
  static std::uint64_t sequence_of_stamp(std::uint64_t stamp) { return stamp >> kStreamBits; }

  // Leaves `stamp` on `unit`, writing only when it changes (the unit's line
  // is shared by every thread that uses it).
  static void stamp(Unit& unit, std::uint64_t stamp) {
    if (unit.grace_stamp.load(std::memory_order_relaxed) != stamp) {
      unit.grace_stamp.store(stamp, std::memory_order_relaxed);
    }
  }

  // Whether the operation being prepared now on the stream that last named
  // `unit` is at most K operations after that one. `enqueued_bit`: the
  // stream (one bit) of an operation the asking thread has just enqueued,
  // or 0. Asked then, that operation is done with its preparing and the one
  // the grace still guards is the next: a unit named K operations before it
  // is free to go, right behind it.
  bool protects(const Unit& unit, std::uint64_t enqueued_bit = 0) const {
    const std::uint64_t stamp = unit.grace_stamp.load(std::memory_order_relaxed);
    if (stamp == 0 || operations_ == 0) return false;
    const unsigned stream = static_cast<unsigned>(stamp & (kStreams - 1));
    std::uint64_t now = counters_[stream].operations.load(std::memory_order_relaxed);
    if (enqueued_bit != 0 && stream_of(enqueued_bit) == stream) ++now;
    return now - (stamp >> kStreamBits) <= operations_;
  }

 private:
  static constexpr unsigned kStreamBits = 6;  // log2(kStreams)
  static_assert(kStreams == 1u << kStreamBits);

  // The counter of a stream's bit (one bit set).
  static unsigned stream_of(std::uint64_t bit) { return static_cast<unsigned>(std::countr_zero(bit)) % kStreams; }

  struct alignas(64) Counter {  // a line each: streams run on different threads
    std::atomic<std::uint64_t> operations{0};
  };

  const std::uint32_t operations_;
  std::array<Counter, kStreams> counters_{};
};

}  // namespace vgpumem::vmm
