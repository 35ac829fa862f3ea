// The pager: paged device allocations under the cap (VGPUMEM_POLICY=lru).
//
// Every paged allocation gets a stable range of one reserved arena, backed
// while it is resident by whole blocks of 2 MiB chunks from the device's
// ChunkPool, each mapped from its start. When a mapping needs room, an
// unpinned unit is offloaded (least recently used first, or in the
// scheduler's order: victim_policy.h): its users' streams are made to
// precede the pager's copy stream (an event recorded on each), its bytes
// are copied to pinned host memory there, and its blocks go straight to
// the new owner, whose first use is ordered after the copy stream. Its own
// range is unmapped once the copy has completed, found by the reclaimer
// thread (or waited for if the unit is wanted back first), so nothing on
// the program's threads waits for the GPU to make room. The reclaimer also
// creates blocks and pins host buffers ahead, off the launch path, and the
// mover makes the learned schedule's moves (vmm/mover.h). Before a launch
// or copy is enqueued, prepare() makes every unit it touches resident and
// makes the launch's stream wait on the unit's arrival.
//
// The launch path (prepare() when everything is resident) takes no lock and
// allocates nothing: a granule-index lookup per argument word, one atomic
// increment per unit touched, two atomic loads and two stores.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/thread_safety.h"

#include "vmm/access.h"
#include "vmm/address_arena.h"
#include "vmm/cap_ledger.h"
#include "vmm/check_mode.h"
#include "vmm/chunk_pool.h"
#include "vmm/driver_ops.h"
#include "vmm/granule_index.h"
#include "vmm/launch_grace.h"
#include "vmm/link_meter.h"
#include "vmm/lock_calendar.h"
#include "vmm/mark_pool.h"
#include "vmm/host_path_stats.h"
#include "vmm/host_store.h"
#include "vmm/memory_observer.h"
#include "vmm/mover.h"
#include "vmm/library_call_scope.h"
#include "vmm/pager_control.h"
#include "vmm/pager_phases.h"
#include "vmm/pointer_tables.h"
#include "vmm/program_streams.h"
#include "vmm/reclaimer.h"
#include "vmm/stream_registry.h"
#include "vmm/table_lending.h"
#include "vmm/unit.h"
#include "vmm/victim_policy.h"

// Note [The pager's lock]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The pager's state that its lock guards is marked `GUARDED_BY(mutex_)` and
// every function that touches it `REQUIRES(mutex_)` (`common/thread_safety.h`:
// a `Mutex`, `MutexLock` and `UniqueMutexLock` the analysis can follow, since
// libstdc++'s are not annotated); Clang's `-Wthread-safety`, on in every Clang
// build and an error in CI's, checks each access. A callback that runs under
// the lock through a helper that takes any function (`for_each_piece`, a walk
// over a range, the host store's drain) says so with `lock_is_held()`.
// `materialize` lets the lock go in the middle (operations holding its unit
// are let through) and is left to review (`NO_THREAD_SAFETY_ANALYSIS`). The
// lock order: the pager's lock, then `graph_frees_mutex_` (its list
// `GUARDED_BY` it, held only to swap the list; a graph's host callback takes
// it alone and must never wait for the pager's, which is held across
// synchronizes); the reclaimer and the mover take the pager's lock with none
// of their own held (the reclaimer lets its wake-up lock go before its
// pass).
//
// The shim's threads are named (`common/thread_name.h`) `vgpumem-mover`,
// `vgpumem-reclaim` and `vgpumem-planner` (the scheduler's), so that `top -H`,
// gdb, perf, Nsight Systems and the simulated driver's timeline host lanes
// tell them from the program's.

// Note [Pinned for life]
// ~~~~~~~~~~~~~~~~~~~~~~
// What no hook sees is pinned resident for life (`Pager::pin_for_life`,
// each reason counted in the trace summary; the list is in
// docs/configuration.md#what-is-pinned-resident):
//
// * *captured*: work on a stream being captured into a CUDA graph pins
//   everything it touches — a replay does not pass through the launch hook.
//   The pager sees captures through the begin/end capture hooks and then runs
//   its own driver calls in relaxed capture mode, never records on a capturing
//   stream and never calls `cuCtxSynchronize` (gpu-facts §8.9);
// * *exported*: `cuIpcGetMemHandle` on paged memory (another process would use
//   it). The driver refuses legacy IPC on virtual memory, so in practice the
//   program gets the driver's error, the pin is undone, and the log says to
//   run with `VGPUMEM_POLICY=off`;

// Note [Out of memory, cleanly]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An allocation is refused with
// `CUDA_ERROR_OUT_OF_MEMORY` when nothing can be offloaded (every resident
// unit is held by a launch or pinned) or when the cap plus the host limit is
// full — keeping one unit's worth of host room so that anything stored can
// always be swapped back in. A launch or copy whose memory cannot be made
// resident returns `CUDA_ERROR_OUT_OF_MEMORY` before it is enqueued. A driver
// call the pager makes that fails (chunk creation, pinning, a copy) is logged
// and worked around (another victim, or the unit stays where its bytes are);
// nothing stored is dropped.

namespace vgpumem::vmm {

struct PagerOptions {
  std::uint64_t arena_bytes = std::uint64_t{1} << 40;  // address space for paged allocations
  std::optional<std::uint64_t> host_limit;             // VGPUMEM_HOST_LIMIT
  std::uint64_t slab_max_bytes = 1024 * 1024;           // allocations up to this size are packed into 2 MiB slabs
  bool reclaimer = true;         // a background thread unmaps, creates chunks and pins ahead
  bool mover = true;             // VGPUMEM_MOVER: the plan's moves made by a thread of the pager's (vmm/mover.h)
  std::size_t spare_chunks = 8;  // free chunks the reclaimer keeps ready while the cap has room
  CheckMode check = CheckMode::fast;
  std::uint32_t grace_operations = 8;  // VGPUMEM_GRACE_LAUNCHES: K of LaunchGrace; 0 turns it off
  // VGPUMEM_GRACE: what the grace keeps for K operations. `lend`: a later
  // operation naming a small cell an earlier one named is lent its units
  // (vmm/table_lending.h); `blanket`: every unit an operation named stays
  // (vmm/launch_grace.h).
  GraceKind grace = GraceKind::lend;
  // VGPUMEM_LEND_MAX_BYTES: the largest allocation lending looks for a table
  // in (PyTorch's small-pool segments are 2 MiB; its tables are far smaller).
  std::uint64_t lend_max_bytes = std::uint64_t{2} << 20;
  // VGPUMEM_PIECE_BYTES: an allocation larger than this is made of pieces of
  // this size (a multiple of 2 MiB), each a unit that moves on its own, so a
  // plan can move part of a large buffer (Unit::first_piece). 0: every
  // allocation is one unit.
  std::uint64_t piece_bytes = 0;
  // VGPUMEM_BLOCK_BYTES in chunks: the largest physical allocation the chunk
  // pool makes (ChunkPool). 0: automatic, a sixteenth of the cap.
  std::size_t block_chunks = 0;
};

class Pager final : public PagerControl {
 public:
  Pager(const DriverOps& driver, CapLedger& ledger, MemoryObserver& observer, PagerOptions options);
  ~Pager() override;
  Pager(const Pager&) = delete;
  Pager& operator=(const Pager&) = delete;

  // A paged allocation of `bytes` on `device` (with that device's context
  // current). CUDA_ERROR_OUT_OF_MEMORY when neither device room (after
  // offloading what can be) nor host room is left.
  CUresult allocate(int device, std::uint64_t bytes, CUdeviceptr* out);
  // Frees a paged allocation: waits for the work that may use it (cuMemFree
  // synchronises), then returns its room. False if `address` is not one.
  bool free(CUdeviceptr address, CUresult* result);
  // A stream-ordered free (cuMemFreeAsync): the memory stays usable by the
  // work already on `stream` and its room comes back once that work is
  // done, found without waiting. False if `address` is not paged.
  bool free_async(CUdeviceptr address, CUstream stream, bool per_thread, CUresult* result);
  bool owns(std::uint64_t address) const { return index_.lookup(address) != nullptr; }
  // Whether `address` lies in the pager's arena, live or not.
  bool in_arena(std::uint64_t address) const { return address - index_.base() < index_.bytes(); }
  // The live paged allocation holding `address`: its start and the bytes
  // asked for. False if none (a freed allocation, a slab's unused tail).
  bool allocation_range(std::uint64_t address, std::uint64_t* start, std::uint64_t* bytes) const;

  // Makes every unit that one of `words` points into resident for work about
  // to be enqueued on `stream` (`per_thread`: the caller used a _ptsz/_ptds
  // entry point), and holds them so in `access` until the work is enqueued.
  // What an earlier call put in `access` stays held with them: all of it
  // must be resident at once. CUDA_ERROR_OUT_OF_MEMORY (logged, naming `op`)
  // when it cannot all be, and then nothing is enqueued on `stream`.
  CUresult prepare(const std::uint64_t* words, std::size_t count, CUstream stream, bool per_thread, Access& access,
                   const Operation& op = {});
  // What a range names: the units it crosses (`exact`: a copy or memset,
  // which touches those bytes and no others), or every piece of each
  // allocation it crosses (`whole`: a kernel, or whatever no hook follows,
  // may read all of an allocation it has a pointer into). The two differ
  // only for an allocation made in pieces (PagerOptions::piece_bytes).
  enum class Extent : bool { exact, whole };
  // The same for one operand range of a copy or memset (`exact`), or a range
  // a kernel reaches (a tensor map's: `whole`).
  CUresult prepare_range(std::uint64_t address, std::uint64_t bytes, CUstream stream, bool per_thread,
                         Access& access, const Operation& op = {}, Extent extent = Extent::exact);
  // A library call on this thread is about to overwrite the ranges in
  // `scope` whole before it reads them (vmm/library_call_scope.h): until
  // end_library_call, what they cover is not copied in when a unit comes back.
  // False (and nothing changes) when a scope is open on the thread already.
  bool begin_library_call(LibraryCallScope& scope);
  // The call returned: `completed` (its bytes are written) lets the skipped
  // bytes' host copies go; otherwise they are copied back first, so a call
  // that failed leaves the buffer as it was.
  void end_library_call(LibraryCallScope& scope, bool completed);

  // The same for every live unit of `device`: a launch whose arguments
  // cannot be read may touch any of them.
  CUresult prepare_everything(int device, CUstream stream, bool per_thread, Access& access, const Operation& op);

  // Stream capture: while one is open, work on a capturing stream pins what it
  // touches resident for good (a graph replays it later, unseen), and the
  // pager's own calls run in relaxed capture mode so they never invalidate
  // the program's capture (docs/gpu-facts.md §8.9).
  void capture_began() { captures_.fetch_add(1, std::memory_order_acq_rel); }
  void capture_ended() {
    int open = captures_.load(std::memory_order_acquire);
    while (open > 0 && !captures_.compare_exchange_weak(open, open - 1, std::memory_order_acq_rel)) {
    }
  }

  // Pins every unit one of `words` points into resident for as long as it
  // lives, for `why` (made resident now, waited for on the host). Returns
  // CUDA_ERROR_OUT_OF_MEMORY if one cannot be brought back.
  CUresult pin_for_life(const std::uint64_t* words, std::size_t count, LifetimePin why);
  // The same for every unit [address, address + bytes) crosses.
  CUresult pin_range_for_life(std::uint64_t address, std::uint64_t bytes, LifetimePin why);
  // Drops that pin again (an export that failed).
  void unpin_for_life(std::uint64_t address, LifetimePin why);
  // What a node of a graph built node by node names (cuGraphAddKernelNode,
  // cuGraphAddMemcpyNode and the rest): each launch of the graph replays it
  // unseen, so every unit is pinned resident for life
  // (LifetimePin::graph_node), as captured work is. Words are followed one
  // level through pointer tables, as a launch's are; a kernel whose
  // parameters cannot be read pins everything paged on its device.
  // CUDA_ERROR_OUT_OF_MEMORY if a unit cannot be brought back.
  CUresult pin_graph_words(const std::uint64_t* words, std::size_t count);
  CUresult pin_graph_range(std::uint64_t address, std::uint64_t bytes);
  CUresult pin_graph_device(int device);
  // Uploads, memsets and pinned host buffers the hooks report: the tables a
  // launch's words may lead to, followed one level by prepare().
  PointerTables& pointer_tables() { return tables_; }

  // Keeps the unit holding `address` resident until unpin (memory the
  // scanner cannot follow). Returns false if the address is not paged, and
  // CUDA_ERROR_OUT_OF_MEMORY in *result if it cannot be brought back.
  bool pin(std::uint64_t address, CUresult* result);
  bool unpin(std::uint64_t address);

  // Room for `bytes` of unpaged device memory (the program's own cuMemCreate,
  // pools): offloads and releases chunks. True if that much was released.
  bool make_room(int device, std::uint64_t bytes);

  // ---- The program's own virtual memory (Note [The
  // program's own virtual memory], vmm/program_handles.cpp): what PyTorch's expandable segments and other
  // allocators build from cuMemCreate, cuMemMap and cuMemSetAccess.
  //
  // A handle the program creates on a paged device is virtual: a unit like
  // any paged allocation, with a home range in the arena, and its chunks
  // mapped also wherever the program maps the handle, so it moves to the
  // host and back like the rest. The driver never sees the handle; the hooks
  // route every call that names one here. A mapping right next to another
  // (PyTorch grows a segment handle by handle, and a tensor may span two) is
  // pinned resident while it has the neighbour: a kernel handed a pointer
  // into one reaches into the other, and no hook can see how far.
  static constexpr CUmemGenericAllocationHandle kVirtualHandleTag = 0xF1A0'0000'0000'0000;
  static bool is_virtual(CUmemGenericAllocationHandle handle) {
    return (handle & 0xFFFF'0000'0000'0000) == kVirtualHandleTag;
  }
  // Whether the program's cuMemCreate with `prop` can be paged: device
  // memory of a paged device, plain (no compression, no RDMA), a size of
  // whole chunks.
  static bool pageable_handle(std::uint64_t bytes, const CUmemAllocationProp& prop, unsigned long long flags);
  CUresult create_handle(int device, std::uint64_t bytes, const CUmemAllocationProp& prop,
                         CUmemGenericAllocationHandle* out);
  CUresult release_handle(CUmemGenericAllocationHandle handle);
  // The handle mapped at `address` (cuMemRetainAllocationHandle), with one
  // more reference; false if none of the pager's is mapped there.
  bool retain_handle(std::uint64_t address, CUmemGenericAllocationHandle* out);
  CUresult handle_properties(CUmemGenericAllocationHandle handle, CUmemAllocationProp* prop) const;
  // What the driver answers cuMemRetainAllocationHandle and cuMemGetAccess
  // for memory from cuMemAlloc (not a mapping of a handle): a paged
  // allocation is cuMemAlloc memory to the program, whatever chunks of the
  // pager's back it now (tests/sim/src/vmm.cpp answers the same).
  static constexpr CUresult kAllocatedMemoryQueryAnswer = CUDA_ERROR_INVALID_VALUE;
  // cuMemGetAccess at `address` of one of the program's mappings the pager
  // holds while it is offloaded: what the program granted, as it would read
  // it with the mapping in place. Empty when the driver's own answer is
  // right (not the pager's, or mapped now, access replayed).
  std::optional<unsigned long long> program_access(std::uint64_t address, const CUmemLocation& location) const;
  // A reservation of the program's: covered by the index, so mappings of
  // virtual handles in it are paged. Freeing it checks nothing is mapped.
  void program_reserved(std::uint64_t base, std::uint64_t bytes);
  bool in_program_reservation(std::uint64_t address) const { return index_.in_extra_range(address); }
  CUresult free_program_reservation(std::uint64_t base, std::uint64_t bytes);
  // cuMemMap of a virtual handle; cuMemUnmap and cuMemSetAccess over a
  // range of a program reservation (the parts the pager does not hold go
  // to the driver as they are).
  CUresult map_handle(std::uint64_t address, std::uint64_t bytes, std::uint64_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags);
  CUresult unmap_program_range(std::uint64_t address, std::uint64_t bytes);
  // Whether any of [address, address + bytes) is one of the pager's
  // mappings (mapped now or not: an offloaded one is still the program's).
  bool holds_any(std::uint64_t address, std::uint64_t bytes) const;
  // A real handle the program mapped in a covered reservation (one the
  // pager could not page): a neighbour of the mappings next to it, which
  // are pinned while it is there (pin_as_neighbour).
  void note_foreign_mapping(std::uint64_t address, std::uint64_t bytes);
  CUresult set_program_access(std::uint64_t address, std::uint64_t bytes, const CUmemAccessDesc* desc,
                              std::size_t count);
  // The driver handle behind a virtual one, for an export: the handle
  // becomes one real allocation of the program's properties, its bytes
  // copied in, pinned resident for good (LifetimePin::exported).
  CUresult real_handle(CUmemGenericAllocationHandle handle, CUmemGenericAllocationHandle* out);

  // ---- Streams the program makes (after the real call): a non-blocking
  // one is listed, so that cuMemFree can wait for the program's work alone
  // (vmm/program_streams.h); one made by a call the shim cannot list
  // (`listed` false) makes every free synchronise whole contexts again.
  void stream_created(CUstream stream, unsigned flags, bool listed = true);

  // ---- Streams and contexts the program destroys (called before the real
  // call, while they still exist): their work is waited for, and their
  // stream bits are free for new streams.
  void stream_destroyed(CUstream stream);
  void context_destroyed(CUcontext context);
  // cuDevicePrimaryCtxReset: the pager's own copy stream and events there
  // go too, and are made again on the device's next use.
  void primary_context_reset(int device);

  // The scheduler's access feed (null: none): told what every launch and
  // copy touched. Set before the program's first launch.
  void set_access_feed(AccessFeed* feed) { feed_.store(feed, std::memory_order_release); }
  // Which unit makes room first among those that may go (vmm/victim_policy.h;
  // null: least recently used). It must outlive the pager's use of it.
  void set_victim_policy(const VictimPolicy* policy) {
    victims_.store(policy != nullptr ? policy : &least_recently_used_, std::memory_order_release);
  }

  // What the scheduler drives (vmm/pager_control.h; vmm/scheduled_moves.cpp).
  bool offload_unit(Unit* unit, bool inside_grace) override;
  HostPathCounts host_path_counts() const noexcept override;
  bool prefetch_unit(Unit* unit) override;
  // Posts the moves to the mover (made on the calling thread where there is
  // none, or its ring is full).
  void move_ahead(std::span<Unit* const> offloads, std::span<Unit* const> prefetches,
                  bool inside_grace) noexcept override;
  // Returns once every move posted so far has been made (tests).
  void drain_moves() {
    if (mover_) mover_->drain();
  }
  UnitFacts facts(const Unit* unit) const override;
  std::uint64_t paging_budget(int device) const override;
  double link_bytes_per_ns(bool to_host) const override {
    return link_meter_.bytes_per_ns(to_host ? LinkMeter::kToHost : LinkMeter::kToDevice);
  }
  double driver_ns_per_move(bool save) const override { return host_path_.driver_ns_per_move(save); }
  CUevent mark(CUstream stream) override;
  void elapsed_ns(std::span<const ElapsedQuery> queries, std::span<std::int64_t> nanoseconds) override;
  void release_mark(int device, CUevent mark) override;

  // Ends the mover and reclaimer threads (at process exit, before the
  // driver goes).
  void stop_reclaimer();
  // In a forked child the threads do not exist: forget them without
  // touching them (joining one would hang). The slow paths still reap on
  // their own, and the plan's moves are made where they fire.
  void abandon_reclaimer_after_fork();

  // {"offloads", "prefetches", "bytes_offloaded", "bytes_prefetched",
  //  "resident_bytes", "paged_allocations", "host_pinned_bytes", ...}
  nlohmann::json summary() const;
  // Host time in each part of the pager's moves (pager_phases.h), by name.
  nlohmann::json host_time_summary() const;
  std::uint64_t resident_bytes(int device) const;
  // Chunks held in the pool, charged to the cap but holding nothing: room
  // a new allocation gets without offloading anything.
  std::uint64_t idle_chunk_bytes(int device) const;
  // The bytes charged to `device`'s cap that hold something: everything
  // charged less the idle chunks, read together under the pager's lock (the
  // reclaimer charges and adds its spare chunks under it), so a concurrent
  // spare never counts as charged and idle at once or as neither.
  std::uint64_t charged_in_use(int device) const;

 private:
  struct DeviceState;
  struct AllocationInfo {
    Unit* unit;
    std::uint64_t bytes;
    bool freeing = false;     // a free is pending (stream-ordered, or until a capture closes)
    std::uint64_t serial = 0;  // tells this allocation from a later one at the same address
  };
  // A free a captured graph performs when it runs (a host node the pager
  // adds to the capture): its callback may run once per launch of the graph,
  // on the driver's thread, so it only queues the allocation, once.
  struct GraphFree {
    Pager* pager;
    std::uint64_t address, serial;
    std::atomic<bool> reached{false};
  };
  static void CUDA_CB graph_reached_free(void* note);
  struct ProgramHandle {
    Unit* unit;
    CUmemAllocationProp prop;
    std::uint32_t references = 1;  // cuMemCreate and each retain; cuMemRelease drops one
  };

  // The stream as the driver's legacy entry points name it.
  static CUstream canonical(CUstream stream, bool per_thread) {
    return stream == nullptr && per_thread ? CU_STREAM_PER_THREAD : stream;
  }
  static constexpr std::size_t kMaxStallTimers = 4096;  // stalls timed at once; beyond, counted only

  DeviceState& device_state(int device) REQUIRES(mutex_);
  CUresult reserve_arena() REQUIRES(mutex_);
  bool fast_path(Unit* unit, std::uint64_t bit) const;
  std::uint64_t next_tick(LaunchThread& thread);
  // Whether `feed` asked for the next operation on the stream of `bit` to
  // be timed: a named stream's answer is every thread's, the unnamed bit's
  // (a thread's own default stream) the calling thread's.
  bool feed_times_next(const LaunchThread& thread, const AccessFeed& feed, std::uint64_t bit) const {
    if (bit == StreamRegistry::kUnnamedBit) return thread.time_next == &feed;
    return (streams_to_time_.load(std::memory_order_relaxed) & bit) != 0;
  }
  // A launch tick (`last_use`): the shared window, and a thread's place in
  // it, 0 to kLastPlace (next_tick).
  static constexpr std::uint32_t kLastPlace = 15;
  static constexpr std::uint64_t tick_at(std::uint64_t window, std::uint32_t place) { return (window << 4) | place; }
  static void note_use(Unit* unit, std::uint64_t bit, std::uint64_t tick);
  void follow_tables(const GranuleIndex::Window& window, const std::uint64_t* words, std::size_t count,
                     Access& access);
  CUresult settle(Access& access, std::size_t from, CUstream stream, bool per_thread, const Operation& op);
  // `last_try`: an out-of-memory result is the program's (logged), not one
  // settle() waits out.
  CUresult make_held_resident(Access& access, std::size_t from, std::size_t lent_from, CUstream stream,
                              std::uint64_t bit, const Operation& op, bool last_try) REQUIRES(mutex_);
  CUresult refuse_unfit(Access& access, const Operation& op);
  static std::array<std::uint64_t, kMaxDevices> needed_per_device(Access& access);
  int device_over_cap(const std::array<std::uint64_t, kMaxDevices>& needed);
  bool fits_under_caps(Access& access);
  void lend(Access& access, std::uint64_t stamp);
  // A unit that holds small allocations only (PagerOptions::lend_max_bytes):
  // an allocation no larger, or a slab when everything slabbed is. Pointer
  // tables built on the device live in such (TableLending).
  bool holds_small_allocations(const Unit& unit) const {
    return unit.first_piece == nullptr &&
           (unit.slab ? options_.slab_max_bytes <= options_.lend_max_bytes
                      : unit.requested != 0 && unit.requested <= options_.lend_max_bytes);
  }
  // `log`: say so when there is no room (not on a try that is waited out;
  // any other failure is said).
  CUresult bring_in(Unit* unit, const Operation& op, bool log = true) REQUIRES(mutex_);
  bool others_hold_units(Access& access) REQUIRES(mutex_);
  // How long a slow path waits for room other launches hold before it
  // returns out of memory.
  static constexpr std::uint64_t kHeldRoomWaitNs = 50'000'000;
  // A resident unit the operation holds, whose arrival its stream has not
  // waited for (a planned fetch's first use): the stream is made to wait
  // without the pager's lock. False where that cannot be (not resident, a
  // capture open, the driver refused): the slow path orders it.
  bool order_unlocked(Unit* unit, CUstream stream, std::uint64_t bit);
  // The stream waits for `ready`, the wait timed while there is room for
  // another timer; counted among the stalls.
  CUresult wait_for_arrival(CUstream stream, CUevent ready);
  CUresult order_stream(Unit* unit, CUstream stream, std::uint64_t bit) REQUIRES(mutex_);
  void offload_all_unheld() REQUIRES(mutex_);
  std::string operation_name(const Operation& op) const;
  CUresult pin_units_for_life(Unit* const* units, std::size_t count, LifetimePin why);
  CUresult pin_held_for_life(Access& access, LifetimePin why);
  void add_named_by_words(const std::uint64_t* words, std::size_t count, Access& access);
  void add_named_by_range(std::uint64_t address, std::uint64_t bytes, Access& access, Extent extent);
  // `unit`, or every piece of its allocation if it is one; returns whether
  // any of them holds a pointer table.
  static bool add_whole(Unit* unit, Access& access);
  bool capturing(CUstream stream) const;
  CUresult make_resident_now(Unit* unit) REQUIRES(mutex_);
  CUcontext device_context(int device) const;

 public:
  bool capture_open() const { return captures_.load(std::memory_order_acquire) > 0; }
  // Whether `stream` is being captured (a driver query; only worth asking
  // while capture_open()).
  bool stream_capturing(CUstream stream, bool per_thread) const;

 private:
  CUresult fetch(Unit* unit, LibraryCallScope* overwrite = nullptr) REQUIRES(mutex_);
  LibraryCallScope::Range skipped_on_fetch(const Unit* unit, LibraryCallScope* overwrite) const;
  // `chunk_saves`: for each of the unit's chunks, the save it must not
  // overwrite before (0: none), as take_chunks gave them.
  CUresult copy_in_except(DeviceState& state, Unit* unit, LibraryCallScope::Range skip,
                          const std::vector<std::uint64_t>& chunk_saves) REQUIRES(mutex_);
  // Copies the unit's bytes out on the copy-out stream, in pieces, each but
  // the last numbered next among the device's saves and marked; `after_first`
  // (if any) is recorded after the first; `*copied` adds what was enqueued.
  CUresult copy_out_in_pieces(DeviceState& state, const Unit* unit, void* host, CUevent after_first,
                              bool* after_first_recorded, std::uint64_t* copied);
  // `read`: the number of the copy-in stream's read of the unit's host
  // buffer (CopyMarks; 0: none), for whoever takes the buffer after the call.
  void keep_skipped(LibraryCallScope& scope, Unit* unit, LibraryCallScope::Range skip, std::uint64_t read);
  void restore_skipped(const LibraryCallScope& scope, const LibraryCallScope::Kept& kept) REQUIRES(mutex_);
  // A unit wanted back while its save is still in flight, whose chunks no
  // one has reused: it takes them back and is resident again, with no copy
  // and no wait. False if it cannot. Called by fetch, in the device's context.
  bool revive(DeviceState& state, Unit* unit) REQUIRES(mutex_);
  // The end of a fetch or a revival: resident again, ready after `ready`;
  // its host buffer back to the store (unless `keep_host`), still read by
  // the copy-in stream's read number `read` (0: none).
  void back_on_device(DeviceState& state, Unit* unit, CUevent ready, bool keep_host = false, std::uint64_t read = 0) REQUIRES(mutex_);
  // `after_save`, if given: the latest save (serial) a taken chunk may still
  // be read by, 0 if none; the caller orders its writes after it.
  // `chunk_saves`, if given: that serial for each chunk taken, in order.
  CUresult take_chunks(DeviceState& state, std::size_t count, const Unit* keep, std::vector<Chunk>* chunks,
                       std::uint64_t* after_save = nullptr, std::vector<std::uint64_t>* chunk_saves = nullptr) REQUIRES(mutex_);
  CUresult map_chunks(Unit* unit) REQUIRES(mutex_);
  bool offload_victim(DeviceState& state, const Unit* keep) REQUIRES(mutex_);
  // Whether `unit` may go to make room now (offload_victim's candidates).
  bool may_go(const Unit& unit, const Unit* keep) const;
  // Offloads every unit on one block, so that it can be released
  // (make_room): among blocks whose every taken chunk is a unit's that may
  // go now, the one with the fewest units in their grace, then the fewest
  // bytes. False if no block qualifies or nothing could go.
  bool offload_cheapest_block(DeviceState& state) REQUIRES(mutex_);
  CUresult offload(DeviceState& state, Unit* unit) REQUIRES(mutex_);
  CUresult order_after_users(DeviceState& state, Unit* unit) REQUIRES(mutex_);
  bool order_after_legacy_streams(DeviceState& state, int device) REQUIRES(mutex_);
  // Every context the device's work may have run in (pager.cpp).
  template <typename Visit>
  void for_each_context_of(int device, Visit&& visit) REQUIRES(mutex_);
  CUresult synchronize_device(int device) REQUIRES(mutex_);
  CUresult wait_for_program_work(int device) REQUIRES(mutex_);
  void forget_stream_bits(std::uint64_t bits) REQUIRES(mutex_);
  void retire_device_context(DeviceState& state) REQUIRES(mutex_);
  void drain_copy_stream(DeviceState& state);
  void reap_saved_units(bool wait) REQUIRES(mutex_);
  bool unmap_oldest_save(DeviceState& state) REQUIRES(mutex_);
  void time_stall(CUstream stream, CUevent reached);
  void reap_stall_timers();
  void reap_freed_allocations() REQUIRES(mutex_);
  void release_allocation(std::map<std::uint64_t, AllocationInfo>::iterator it) REQUIRES(mutex_);
  Unit* carve_from_slabs(DeviceState& state, std::uint64_t size, std::uint64_t* offset);
  void return_to_slab(DeviceState& state, Unit* slab, std::uint64_t offset, std::uint64_t size);
  void finish_unmap(Unit* unit, bool wait) REQUIRES(mutex_);
  void unmap_now(Unit* unit) REQUIRES(mutex_);
  CUresult record_on_copy_stream(DeviceState& state, CUevent* event);
  CUresult record_on_stream(CUstream stream, CUevent* event, unsigned flags = CU_EVENT_DISABLE_TIMING);
  void order_streams(DeviceState& state, CUstream waiter, CUstream before);
  void order_after_save(DeviceState& state, std::uint64_t serial) REQUIRES(mutex_);
  // Advances saves_done past the pieces of saves found done.
  void note_saved_pieces(DeviceState& state);
  void order_after_fetch(DeviceState& state, std::uint64_t serial);
  // `largest_block`: Unit::largest_block (0: the pool's largest).
  Unit* new_unit(int device, std::uint64_t bytes, bool slab, std::uint32_t largest_block = 0) REQUIRES(mutex_);
  Unit* new_unit_at(int device, std::uint64_t address, std::uint64_t bytes, bool slab, std::uint32_t largest_block = 0) REQUIRES(mutex_);
  // An allocation of `bytes` (rounded to chunks) as pieces of
  // options_.piece_bytes, back to back: its first piece, or nullptr (and
  // nothing made) when not all of them can be resident at once.
  Unit* new_pieces(int device, std::uint64_t rounded, std::uint64_t requested) REQUIRES(mutex_);
  void release_pieces(Unit* first) REQUIRES(mutex_);
  bool admits(int device, std::uint64_t bytes) const REQUIRES(mutex_);
  bool admit_or_refuse(int device, std::uint64_t bytes) REQUIRES(mutex_);  // admits(), or logs and counts the refusal
  void release_unit(Unit* unit) REQUIRES(mutex_);
  // `device`: whose pool the chunks are of (it counts each block's mappings).
  CUresult map_runs(int device, std::uint64_t address, const Chunk* chunks, std::size_t count,
                    std::vector<Mapping>* runs) REQUIRES(mutex_);
  bool unmap_runs(int device, std::uint64_t address, std::vector<Mapping>* runs) REQUIRES(mutex_);
  bool unmap_home(Unit* unit) REQUIRES(mutex_);
  void repair_stale_mapping(DeviceState& state, Unit* unit) REQUIRES(mutex_);
  CUresult map_aliases(Unit* unit) REQUIRES(mutex_);
  bool unmap_aliases(Unit* unit) REQUIRES(mutex_);
  CUresult map_alias(const Unit* unit, Alias& alias) REQUIRES(mutex_);
  bool unmap_alias(const Unit* unit, Alias& alias) REQUIRES(mutex_);
  CUresult ready_device(int device) REQUIRES(mutex_);
  CUresult pin_unit_for_life(Unit* unit, LifetimePin why) REQUIRES(mutex_);
  CUresult materialize(Unit* unit, const CUmemAllocationProp& prop, UniqueMutexLock& lock) NO_THREAD_SAFETY_ANALYSIS;
  ProgramHandle* program_handle(CUmemGenericAllocationHandle handle) REQUIRES(mutex_);
  Unit* alias_ending_at(std::uint64_t address) const;
  Unit* alias_starting_at(std::uint64_t address) const;
  bool foreign_ends_at(std::uint64_t address) const REQUIRES(mutex_);
  bool foreign_starts_at(std::uint64_t address) const REQUIRES(mutex_);
  CUresult pin_as_neighbour(Unit* unit) REQUIRES(mutex_);
  void drop_neighbour_pins(Unit* unit, std::uint32_t count) REQUIRES(mutex_);
  void unpin_neighbours(Unit* unit, const Alias& alias) REQUIRES(mutex_);
  void forget_foreign_mappings(std::uint64_t start, std::uint64_t bytes) REQUIRES(mutex_);
  void release_handle_if_unused(CUmemGenericAllocationHandle handle) REQUIRES(mutex_);
  static void return_chunks(DeviceState& state, std::vector<Chunk>* chunks, std::uint64_t save = 0);
  std::map<std::uint64_t, AllocationInfo>::iterator live_allocation(CUdeviceptr address) REQUIRES(mutex_);
  void set_ready(Unit* unit, CUevent event);
  void trace_resident(int device, DeviceState& state);

  // A move on the mover's thread; offload_unit with the posting thread's
  // enqueued operation (LaunchThread::enqueued_bit).
  void make_move(const Mover::Move& move);
  void on_mover_thread(const Mover::Move& move);
  void fetch_settled(const Mover::Move& move);
  void wait_for_the_mover(Access& access, std::size_t from);
  // On a simulated driver: the launch's clock moves to when the mover
  // brought in any of its units (Unit::mover_arrival_ns).
  void note_mover_arrivals(Access& access, std::size_t from);
  nlohmann::json mover_summary() const;
  bool offload_planned(Unit* unit, bool inside_grace, std::uint64_t enqueued_bit);
  // The simulated driver's clock on this thread (DriverOps::host_time_ns); 0 on hardware.
  std::uint64_t host_clock_ns() const { return driver_.host_time_ns != nullptr ? driver_.host_time_ns() : 0; }

  // The reclaimer's pass, and its three jobs.
  void reclaim();
  void unmap_finished_offloads();
  void create_chunks_ahead();
  void pin_host_ahead();
  void time_stalls();
  void wake_reclaimer();

  const DriverOps& driver_;
  CapLedger& ledger_;
  MemoryObserver& observer_;
  const PagerOptions options_;

  GranuleIndex index_;
  PointerTables tables_{index_};
  StreamRegistry streams_;
  ProgramStreams program_streams_;  // under mutex_
  std::atomic<std::uint64_t> tick_{1};
  LaunchGrace grace_;
  TableLending lending_;
  LinkMeter link_meter_{driver_};  // under mutex_, but for its rates
  MarkPool marks_{driver_};         // timing marks, reused (its own lock)
  std::atomic<AccessFeed*> feed_{nullptr};
  // The named streams whose next operation the feed wants timed, by their
  // bits: its answer for a stream, whichever thread issues there next
  // (Access::keep_timing_answer; the unnamed bit's is per thread).
  std::atomic<std::uint64_t> streams_to_time_{0};
  const LeastRecentlyUsed least_recently_used_;
  std::atomic<const VictimPolicy*> victims_{&least_recently_used_};
  // Units sent out to make room, and of those the ones the policy chose
  // informed (VictimPolicy::informed).
  std::atomic<std::uint64_t> victims_taken_{0}, victims_in_order_{0};
  std::atomic<std::uint64_t> grace_evictions_{0};  // victims taken inside their grace: nothing else could go
  std::atomic<std::uint64_t> lendings_{0};       // operations lent what an earlier one named (TableLending)
  std::atomic<std::uint64_t> lent_units_{0};     // units they were lent
  std::atomic<std::uint64_t> lent_left_out_{0};  // operations whose lent units could not fit beside their own
  std::atomic<std::uint64_t> planned_grace_evictions_{0};  // scheduled offloads inside a grace (a plan that cut it)

  // On a simulated driver, the holds of the lock on the threads' clocks, so
  // that a wait for it costs simulated time (null on hardware, where a
  // wait costs its own).
  std::unique_ptr<LockCalendar> lock_calendar_;
  mutable Mutex mutex_;
  // Says, for the thread safety analysis, that a callback runs with the
  // lock held: one called back by a helper that takes any function
  // (for_each_piece, a walk over a range), or by a part that is guarded by
  // the lock (HostStore's drain), where an annotation cannot follow.
  void lock_is_held() const ASSERT_CAPABILITY(mutex_) {}
  bool arena_ready_ GUARDED_BY(mutex_) = false;
  AddressArena arena_ GUARDED_BY(mutex_);
  // Its driver work by thread, fetches by origin, refusals (before the parts
  // that count into it).
  HostPathStats host_path_;
  HostStore host_ GUARDED_BY(mutex_);
  std::map<int, std::unique_ptr<DeviceState>> devices_ GUARDED_BY(mutex_);
  std::map<std::uint64_t, AllocationInfo> allocations_ GUARDED_BY(mutex_);  // by address
  std::vector<Unit*> saved_units_ GUARDED_BY(mutex_);                       // on host, range still mapped
  std::map<CUmemGenericAllocationHandle, ProgramHandle> handles_ GUARDED_BY(mutex_);  // the program's virtual handles
  std::uint64_t next_handle_ GUARDED_BY(mutex_) = 1;
  std::map<std::uint64_t, std::uint64_t> foreign_mappings_ GUARDED_BY(mutex_);  // real handles mapped in covered reservations
  std::uint64_t adjacent_pinned_ GUARDED_BY(mutex_) = 0;       // pins held for touching a neighbour (pin_as_neighbour)
  std::uint64_t handles_materialized_ GUARDED_BY(mutex_) = 0;  // handles that became one real allocation (materialize)
  struct PendingFree {
    std::uint64_t address;
    CUevent done;  // recorded on the freeing stream
  };
  std::vector<PendingFree> pending_frees_ GUARDED_BY(mutex_);               // stream-ordered frees not yet reached
  std::vector<std::uint64_t> frees_after_capture_ GUARDED_BY(mutex_);      // cuMemFree while a capture was open
  std::uint64_t next_serial_ GUARDED_BY(mutex_) = 1;
  std::vector<std::unique_ptr<GraphFree>> graph_free_notes_ GUARDED_BY(mutex_);  // kept while a graph may still reach them
  Mutex graph_frees_mutex_;  // never the pager's: a callback must not wait for a lock held across a sync
  std::vector<std::pair<std::uint64_t, std::uint64_t>> graph_frees_reached_
      GUARDED_BY(graph_frees_mutex_);  // (address, serial)
  std::uint64_t stored_bytes_ GUARDED_BY(mutex_) = 0;                       // all live units, resident or not
  std::uint64_t allocations_in_pieces_ GUARDED_BY(mutex_) = 0;               // made in pieces so far (PagerOptions::piece_bytes)
  std::uint64_t largest_unit_ GUARDED_BY(mutex_) = 0;

  std::atomic<std::uint64_t> offloads_{0}, prefetches_{0}, bytes_offloaded_{0}, bytes_prefetched_{0};
  std::atomic<std::uint64_t> scheduled_offloads_{0}, scheduled_prefetches_{0}, scheduled_refused_{0};
  std::atomic<std::uint64_t> revived_{0}, bytes_revived_{0};
  std::atomic<std::uint64_t> home_mappings_{0}, chunks_mapped_{0};  // map_chunks: mappings made, chunks in them
  // Units that came back without the bytes a library call overwrites
  // (LibraryCallScope), those bytes, and calls that failed and had them restored.
  std::atomic<std::uint64_t> overwritten_fetches_{0}, bytes_not_fetched_{0}, overwrites_restored_{0};
  std::atomic<std::uint64_t> context_syncs_{0};
  // Out-of-memory answers: counted where one arises (a refusal, no room in
  // take_chunks, a failed copy back), once; a caller that absorbs it instead
  // of passing it on to the program (a lent unit left out, a settle that
  // waits and tries again, a scheduled prefetch) takes it back with
  // absorb_oom(), so `paging.ooms` counts what the program was answered.
  std::atomic<std::uint64_t> ooms_{0};
  void absorb_oom() {  // never below zero: a driver's own out-of-memory (a stream it could not make) is uncounted
    std::uint64_t count = ooms_.load(std::memory_order_relaxed);
    while (count > 0 && !ooms_.compare_exchange_weak(count, count - 1, std::memory_order_relaxed)) {
    }
  }
  std::atomic<std::uint64_t> frees_waiting_for_program_{0}, frees_waiting_for_contexts_{0};
  std::atomic<int> captures_{0};                // stream captures open in the process
  std::atomic<std::uint64_t> lifetime_pinned_bytes_[kLifetimePinReasons] = {};  // by LifetimePin bit
  std::atomic<std::uint64_t> stalls_{0};        // operations made to wait for a unit on its way in
  // GPU time those waits cost: two timing events on the waiting stream, one
  // before the wait and one after, read once the second has completed.
  struct StallTimer {
    CUevent reached, passed;
  };
  // Stalls timed and not yet added to stall_ns_ (a reader that sees none
  // sees every finished stall's length).
  std::size_t stall_timers_being_timed() const {
    MutexLock lock(stall_timers_mutex_);
    return stall_timers_.size() + stalls_being_read_.load(std::memory_order_acquire);
  }
  void finish_stall(const StallTimer& timer, bool over);
  // Read by the reclaimer (time_stalls). Their own lock, taken after the
  // pager's where both are: a launch ordering its stream without the
  // pager's lock (order_unlocked) times its wait too.
  mutable Mutex stall_timers_mutex_;
  std::vector<StallTimer> stall_timers_ GUARDED_BY(stall_timers_mutex_);
  // Timers the reclaimer has taken out of stall_timers_ and not yet added to
  // stall_ns_: still being timed, so the summary counts them (a reader that
  // sees none being timed sees every finished stall's length).
  std::atomic<std::size_t> stalls_being_read_{0};
  std::atomic<std::uint64_t> stall_ns_{0};
  std::atomic<std::uint64_t> slow_path_ns_{0};  // host time spent making units resident
  PagerPhases phases_;                          // and where the pager's host time goes
  std::atomic<std::uint64_t> reclaimer_unmaps_{0}, chunks_created_ahead_{0}, reclaimer_passes_{0};
  bool pin_ahead_ = true;  // the reclaimer's own: false after the host refused a buffer
  bool whole_range_unmap_ GUARDED_BY(mutex_) = true;  // under the lock: one cuMemUnmap over a unit's chunks (unmap_chunks)

  // The latest simulated time a thread woke the reclaimer at (host_clock_ns).
  std::atomic<std::uint64_t> reclaimer_woken_ns_{0};

  // Last: stopped and joined first, while everything they use still exists
  // (the mover before the reclaimer: its moves wake the reclaimer).
  std::unique_ptr<Reclaimer> reclaimer_;
  Reclaimer* abandoned_reclaimer_ = nullptr;  // a forked child's copy (abandon_reclaimer_after_fork)
  std::unique_ptr<Mover> mover_;
  Mover* abandoned_mover_ = nullptr;
};

}  // namespace vgpumem::vmm
