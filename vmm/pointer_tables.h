// Pointer tables a kernel may follow, unseen by any hook (Note [Pointer
// tables], below).
//
// A batched library kernel is handed the address of a table of pointers
// (cuBLAS's batched GEMM, PyTorch's foreach and FSDP2 copies), and NCCL hands
// its kernels a work FIFO in pinned host memory holding the user buffers.
// Neither the table's nor the FIFO's words are among the launch's own, so
// the registry keeps, for each scanned upload, (destination range → the
// paged granules its words point into), and knows the pinned host buffers
// the program made. A launch whose words point into a registered range, or
// into a recorded host buffer (scanned then, bounded), also holds what those
// words point to, for that launch only: one level of indirection, no pin for
// life, so a caching allocator's segments that hold tables keep paging.
//
// An entry goes when its range is freed, or wholly overwritten by a later
// upload or a memset. A kernel that names the range may rewrite it unseen:
// the entry stays, a superset then. Its targets may be freed since: their
// words then name nothing and are skipped (or name a later allocation,
// which is only brought in needlessly).
//
// Thread-safe. The launch path asks may_follow() per word (two atomic loads
// for host buffers, one for the unit's table count, read by the caller) and
// takes the registry's shared lock only when a word points into a table.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vmm/granule_index.h"

// Note [Pointer tables]
// ~~~~~~~~~~~~~~~~~~~~~
// Pointer tables (`vmm/pointer_tables.{h,cpp}`) replace a former
// pin-for-life rule: a kernel handed the address of a table of pointers (a
// batched GEMM's array, FSDP2's packed copy metadata, NCCL's work FIFO in
// pinned host memory) reaches memory none of its own words names. The
// registry records, for each linear upload, the destination range and the
// paged granules among the words of its first `kScanLimit` (1 MiB) bytes —
// sorted, once each, so a table of thousands of pointers into a few buffers
// costs a few words — and the pinned host buffers the program made.
// `Pager::prepare` marks a launch that needs it during its own word loop: a
// word whose unit holds a table (`Unit::tables`, an atomic count) or that lies
// within the span of the recorded host buffers (two loads; the bounds only widen). Only then
// does `follow_tables` take the registry's shared lock, append the tables'
// granules (and the paged words of each host buffer pointed into, read then,
// bounded) to a thread-local buffer, and add their units to the launch's
// `Access`: they are held and made resident with its own words, so
// `refuse_unfit` and `make_room` treat them alike, and a capture pins them as
// it pins the rest. One level of indirection; a table of tables is not
// followed. An upload replaces every table its range covers and merges with
// one it overlaps in part (a superset); a memset covering a table, or the free
// of the allocation holding it, drops it; a kernel writing the range is
// assumed to keep what it holds. Tables of targets freed since only name
// nothing (skipped) or a later allocation (brought in needlessly). The
// registry's lock is taken by uploads, memsets, frees (under the pager's lock,
// never the other way) and launches that name a table.

namespace vgpumem::vmm {

class PointerTables {
 public:
  // Bytes of an upload, or of a pinned host buffer at a launch, read for
  // pointers: larger uploads are read only this far (FSDP2 puts its
  // pointers first). docs/benchmarks.md measures the cost per MiB.
  static constexpr std::size_t kScanLimit = std::size_t{1} << 20;

  explicit PointerTables(const GranuleIndex& index) : index_(index) {}
  PointerTables(const PointerTables&) = delete;
  PointerTables& operator=(const PointerTables&) = delete;

  // `bytes` from `host` are about to be copied to `destination`: the words
  // among the first kScanLimit bytes that point into paged memory become
  // the table at [destination, destination + bytes), replacing what that
  // range held. A destination that is not paged records nothing.
  void uploaded(std::uint64_t destination, const void* host, std::size_t bytes);
  // [address, address + bytes) was overwritten (a memset) or freed: tables
  // wholly inside it go; one it only covers in part stays (a superset).
  void overwritten(std::uint64_t address, std::uint64_t bytes);

  // Pinned host memory the program made (cuMemHostAlloc, cuMemAllocHost,
  // cuMemHostRegister), which a kernel may read directly; and its end.
  void host_pinned(std::uint64_t address, std::uint64_t bytes);
  void host_released(std::uint64_t address);
  // Whether `word` may point into a recorded host buffer: within the span
  // from the lowest start to the highest end ever recorded. The bounds only
  // widen, so a launch reading them while another thread records a buffer
  // sees a span that holds every buffer recorded before it. Lock-free.
  bool may_point_into_host(std::uint64_t word) const {
    return word >= host_low_.load(std::memory_order_acquire) && word < host_high_.load(std::memory_order_acquire);
  }

  // Appends to `targets` the paged words of every table and every host
  // buffer that one of `words` points into. `targets` is the caller's
  // thread's buffer: a steady state allocates nothing.
  void follow(const std::uint64_t* words, std::size_t count, std::vector<std::uint64_t>& targets);

  // {"tables", "tables_peak", "target_granules", "target_granules_peak", "uploads_scanned", "bytes_scanned",
  //  "launches_followed", "host_buffers", "host_buffers_scanned", "host_bytes_scanned"}
  nlohmann::json summary() const;

 private:
  struct Table {
    std::uint64_t end = 0;
    Unit* holder = nullptr;                 // the unit the table lies in: its `tables` counts it
    std::vector<std::uint64_t> granules;    // paged granules its words pointed into, sorted, once each
  };

  // Under the exclusive lock.
  void drop(std::map<std::uint64_t, Table>::iterator it);
  void erase_covered(std::uint64_t address, std::uint64_t end);
  // The paged granules among `bytes` at `host` (at most kScanLimit), sorted, once each.
  std::vector<std::uint64_t> paged_granules(const void* host, std::size_t bytes);
  bool scan_host(std::uint64_t word, std::vector<std::uint64_t>& targets);

  const GranuleIndex& index_;
  mutable std::shared_mutex mutex_;
  std::map<std::uint64_t, Table> tables_;         // by start; ranges never overlap
  std::map<std::uint64_t, std::uint64_t> host_;   // pinned host buffers: start -> end
  std::atomic<std::uint64_t> host_low_{~std::uint64_t{0}}, host_high_{0};  // written under the lock

  std::uint64_t target_granules_ = 0;  // under the lock, summed over tables_
  std::uint64_t tables_peak_ = 0, target_granules_peak_ = 0;
  std::atomic<std::uint64_t> uploads_scanned_{0}, bytes_scanned_{0}, launches_followed_{0};
  std::atomic<std::uint64_t> host_buffers_scanned_{0}, host_bytes_scanned_{0};
};

}  // namespace vgpumem::vmm
