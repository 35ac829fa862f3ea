// Internal state of the simulated driver. One process-wide Simulator holds
// devices, contexts, memory regions, kernels and counters; every exported
// entry point (exports_*.cpp) is a thin function over it.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "vgpusim.h"

// cuda.h maps legacy names onto their newest variant; the simulator defines
// every variant by its exact exported name.
#undef cuGetProcAddress
#undef cuMemAlloc
#undef cuMemAllocPitch
#undef cuMemFree
#undef cuEventElapsedTime
#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemGetInfo
#undef cuStreamBeginCapture
#undef cuStreamGetCaptureInfo
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamBatchMemOp
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeSetParams
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphAddNode

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpusim {

// Parks the caller if a test armed a stall for `operation` (stall.cpp).
void stall_point(const char* operation);

inline constexpr std::uint64_t kGranularity = 2ull << 20;  // as on H100 (docs/gpu-facts.md)

// The engines work is scheduled on (docs/simulated-driver.md, "Clock").
enum class Engine : std::uint8_t { none, compute, copy_h2d, copy_d2h, count };

struct Device {
  std::uint64_t memory_bytes = 16ull << 30;
  std::uint64_t physical_now = 0;
  std::uint64_t physical_peak = 0;
  // Of the bytes charged, those mapped into address space now: allocations
  // (cuMemAlloc & co.) and device handles with at least one mapping, each
  // counted once however often it is mapped. A pager's resident bytes, less
  // the free chunks it keeps unmapped.
  std::uint64_t mapped_now = 0;
  double engine_free_ns[static_cast<int>(Engine::count)] = {};  // when each engine is next idle
  double engine_busy_ns[static_cast<int>(Engine::count)] = {};
  bool faulted = false;  // an illegal access happened: no new context on this device, as on the H100
};

struct Kernel;

// A kernel launch as work: the kernel, the launch's shape and its argument
// bytes packed with the kernel's layout (the program's kernelParams point at
// memory that is gone once the launch returns). Arguments of up to
// kInlineBytes live inside it, so issuing a launch allocates nothing: the
// launch-path benchmarks measure the shim, not this driver's allocator.
// Longer ones spill to the heap.
struct KernelCall {
  static constexpr std::size_t kInlineBytes = 256;
  const Kernel* kernel = nullptr;
  vgpusimLaunch info{};
  std::size_t size = 0;
  alignas(64) unsigned char inline_bytes[kInlineBytes];  // a CUtensorMap argument wants 64
  std::vector<unsigned char> spilled;

  KernelCall() = default;
  // Copies only the bytes in use: the whole inline array would be copied a
  // byte at a time, several times a launch.
  KernelCall(const KernelCall& other) { *this = other; }
  KernelCall& operator=(const KernelCall& other);

  // Zeroed room for `bytes` of arguments.
  void resize(std::size_t bytes);
  const unsigned char* data() const { return size <= kInlineBytes ? inline_bytes : spilled.data(); }
  unsigned char* data() { return size <= kInlineBytes ? inline_bytes : spilled.data(); }
};

// One piece of stream work. It performs its effect on memory when the
// simulated device gets to it (perform(), below) and returns CUDA_SUCCESS or
// the error that poisons the context: a kernel launch through `call`,
// anything else through `run`. Operations are values: a captured graph keeps
// copies and replays them.
struct Operation {
  const char* what = "";
  const char* name = nullptr;  // kernels: the registered name (kernels are never unregistered), for the timeline file
  std::uint64_t bytes = 0;     // copies and memsets, for the timeline file
  Engine engine = Engine::none;
  double duration_ns = 0;
  bool effect_at_end = false;  // copies and memsets land at their end; kernels and host functions act at their start
  KernelCall call;                 // kernels
  std::function<CUresult()> run;  // everything else; empty for markers (event records)
  // A marker nobody can time (an event without timing) completes with the
  // work before it, whatever the issuing thread's clock: per-thread clocks
  // must not let one thread's lead delay a stream for the others.
  bool untimed = false;
  // Kernels a kernel observer saw launched (vgpusimSetKernelObserver): the
  // correlation id it gave; 0 for everything else.
  std::uint32_t correlation = 0;

  bool has_work() const { return call.kernel != nullptr || run; }
};

// Performs an operation's effect (kernels.cpp); a marker does nothing.
CUresult perform(const Operation& operation);

struct Capture;

struct Stream {
  CUcontext context = nullptr;
  bool blocking = true;     // synchronises with the legacy default stream
  bool legacy = false;      // the context's NULL stream
  bool per_thread = false;  // a thread's per-thread default stream
  double tail_ns = 0;       // simulated end of the last work issued to it
  Capture* capture = nullptr;
  std::uint32_t id = 0;     // unique in the process, from 1 (CUPTI's streamId)
};

struct Event {
  CUcontext context = nullptr;
  unsigned flags = 0;
  bool recorded = false;
  double time_ns = 0;          // simulated completion of the work it was recorded after
  Capture* capture = nullptr;  // recorded inside a capture: waiting on it joins the capture
};

struct Capture {
  std::uint64_t id = 0;
  Stream* origin = nullptr;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<Stream*> streams;  // origin and every stream that joined
  std::vector<Operation> operations;
};

struct Graph {
  std::vector<Operation> operations;
};

// A node of a graph built node by node (graph_nodes.cpp): the operation at
// `index` of its graph's list (and of every instantiation's copy).
struct GraphNode {
  Graph* graph = nullptr;
  std::size_t index = 0;
};

struct Context {
  int device = 0;
  CUresult sticky = CUDA_SUCCESS;  // set by an illegal access; every later call on the context returns it
  bool primary = false;
  Stream* legacy_stream = nullptr;
  std::set<Stream*> streams;  // every live stream of the context, the default ones included
};

// A stream-ordered memory pool (cuDeviceGetDefaultMemPool, cuMemPoolCreate).
// The simulator caches nothing: memory freed to the pool is released at once,
// so reserved equals used.
struct Pool {
  int device = 0;
  bool is_default = true;
  std::uint64_t release_threshold = 0;
  std::uint64_t used_now = 0, used_high = 0;
  int reuse_follow_event = 1, reuse_opportunistic = 1, reuse_internal = 1;
  std::uint64_t peer_access = 0;  // devices granted access by cuMemPoolSetAccess, as bits
};

// A physical allocation (what cuMemCreate returns a handle to). Backed by a
// memfd so one handle can be mapped at several addresses, like device memory.
struct Physical {
  int device = 0;
  std::uint64_t size = 0;
  int fd = -1;
  int handle_refs = 1;  // the handle itself (create, retain)
  int mappings = 0;
  bool host_location = false;
  CUmemAllocationHandleType handle_types = CU_MEM_HANDLE_TYPE_NONE;  // as cuMemCreate was asked
};

// A range of simulated device address space: a reservation
// (cuMemAddressReserve) or an allocation made by cuMemAlloc & co., which the
// simulator implements as reserve + create + map + set access.
struct Region {
  std::uint64_t base = 0;
  std::uint64_t size = 0;
  int device = 0;
  enum class Kind { reservation, allocation, managed, pool } kind = Kind::reservation;
  std::uint64_t physical = 0;  // allocations: the bytes charged
  CUcontext context = nullptr;  // allocations: the context that made it (cuCtxDestroy frees it)
  Pool* pool = nullptr;         // stream-ordered allocations
  bool freed = false;           // cuMemFreeAsync issued: gone for the API, mapped until the free runs
  std::uint64_t array_pitch = 0;  // CUarrays: bytes per row
  std::uint64_t array_element = 0;  // CUarrays: bytes per element (format size times channels)
  std::uint64_t array_height = 0;   // CUarrays: rows per layer
  std::uint64_t array_depth = 0;    // CUarrays: layers
  CUarray_format array_format = CU_AD_FORMAT_UNSIGNED_INT8;
  unsigned array_channels = 0;
  // Mappings within a reservation: offset -> (size, handle, accessible, and
  // the access each device location was granted, as cuMemGetAccess reads it)
  struct Mapping {
    std::uint64_t size;
    std::uint64_t handle;
    bool accessible;
    std::map<int, CUmemAccess_flags> access;
    std::uint64_t handle_offset;  // where in the handle the mapping starts
  };
  std::map<std::uint64_t, Mapping> mappings;

  // True if [offset, offset + length) is exactly a run of whole mappings: the
  // only ranges cuMemSetAccess and cuMemUnmap accept.
  bool covered_by_whole_mappings(std::uint64_t offset, std::uint64_t length) const {
    for (std::uint64_t at = offset; at < offset + length;) {
      auto it = mappings.find(at);
      if (it == mappings.end() || at + it->second.size > offset + length) return false;
      at += it->second.size;
    }
    return true;
  }
};

struct Kernel {
  std::string name;
  vgpusimKernelDesc desc{};
  std::vector<std::size_t> sizes, offsets;
  std::size_t arg_bytes = 0;
};

struct Stats {
  std::map<std::string, std::uint64_t, std::less<>> calls;  // found by name without building a string
  std::uint64_t kernels = 0, bytes_h2d = 0, bytes_d2h = 0, illegal = 0;
  std::uint64_t issued_h2d = 0, issued_d2h = 0;  // bytes of copies across the link as issued (vgpusimCopiedBytes)
  std::uint64_t pinned_now = 0, pinned_peak = 0;
  std::vector<std::string> illegal_events;  // JSON objects
  std::vector<std::string> faults_injected;
  std::uint64_t operations_executed = 0;
};


// Work issued to streams and not yet executed, in simulated-time order.
struct Pending {
  CUcontext context;
  Operation operation;
  double start_ns = 0, end_ns = 0;  // as scheduled at issue, for the timeline file
  double issued_ns = 0;             // the issuing thread's clock then (start_ns may be later: stream, engine)
  std::uint32_t stream_id = 0;      // the stream it was issued to, for the kernel observer
  int issued_by = -1;               // the issuing thread's host lane, where the timeline file is kept
};

// Why a host thread's clock moved: the driver's work it paid for, or what it
// waited for. The timeline file's host lanes.
enum class HostSpan : std::uint8_t {
  issue,        // issuing work: a launch, a copy, an event record, a stream wait
  driver_call,  // a VMM or pinning call's own cost
  driver_lock,  // waiting for the driver's lock held by another thread's call
  device_wait,  // a synchronisation waiting for work on the device; a full queue
  poll,         // a query answered "not ready"
  handoff,      // taking another thread's clock (vgpusimHostHandoff: a lock, a handed-over task)
};

// What the engines did, how much device memory was charged, and what each
// host thread paid for or waited for, in simulated time, for
// VGPUSIM_TIMELINE (timeline_file.cpp). Kept in memory, bounded, and written
// at exit.
struct TimelineFile {
  enum class Kind : std::uint8_t { operation, memory, host };
  struct Entry {
    double start_ns = 0;
    double duration_ns = 0;
    double issued_ns = 0;         // an operation's: the issuing thread's clock when it was issued
    std::uint64_t bytes = 0;      // an operation's bytes, or the device's physical bytes after a change
    std::uint64_t mapped = 0;     // the device's mapped bytes after a change
    const char* what = "";
    const char* name = nullptr;
    int device = 0;
    int thread = -1;  // the host lane: an operation's issuing thread, a host span's thread
    Kind kind = Kind::operation;
    Engine engine = Engine::none;
    HostSpan why = HostSpan::issue;  // a host span's
  };
  bool enabled = false;
  std::size_t max_events = 200000;
  std::uint64_t dropped = 0;
  std::vector<Entry> entries;
  std::vector<std::string> thread_names;  // by host lane, as the thread was named when first seen
};

// VGPUSIM_COST_MODEL (host_costs.cpp): what the calibrated model charges
// came from a training run on a real GPU; idle is the H100's idle medians.
enum class CostModel : std::uint8_t { calibrated, idle };

// The driver's API lock in simulated time: every VMM and pinning call of
// every thread holds it for its cost. Threads have clocks of their own, so
// the lock is a calendar of busy intervals and a call takes the first gap at
// or after its thread's clock that holds it, whichever thread asked first.
class DriverLock {
 public:
  // Books `duration` at or after `at`; returns when the call starts.
  double book(double at, double duration);

 private:
  static constexpr std::size_t kKept = 4096;
  std::map<double, double> busy_;  // start -> end, disjoint
};

class Simulator {
 public:
  static Simulator& get();

  std::mutex mutex;
  // What cuEventElapsedTime reads (`events`, an event's `recorded` and
  // `time_ns`, `executed_until_ns`) is written under both locks and read
  // under this one alone: the real driver answers it without waiting behind
  // another thread's launches, and a planner reading a step's thousands of
  // timings must not queue behind each kernel the program runs meanwhile.
  std::mutex timing_mutex;
  bool initialised = false;
  std::vector<Device> devices;
  std::map<CUcontext, Context> contexts;
  std::vector<CUcontext> primary;  // per device
  std::set<Stream*> streams;                            // every live stream handle
  std::set<Event*> events;                              // every live event handle
  std::set<Graph*> graphs, graph_execs;
  std::set<GraphNode*> graph_nodes;
  std::set<Pool*> pools;                                // every pool, the default ones included
  std::vector<Pool*> default_pools;                     // per device
  std::vector<Capture*> captures;                       // active captures
  std::uint64_t next_capture_id = 1;
  std::uint32_t next_stream_id = 1;
  std::map<std::uint64_t, std::uint64_t> pinned_ranges;  // page-locked host memory: start -> bytes

  // The simulated clock. Each host thread has its own time (host_now): work
  // it issues starts no earlier; a thread that waits for work moves its own
  // clock to the work's end, and other threads run on, as on a real machine.
  // latest_host_ns is the furthest any thread has got. Work runs lazily,
  // when some thread waits for it (or the queue is full): everything
  // scheduled at or before the awaited time, in (time, issue order).
  double latest_host_ns = 0;
  double executed_until_ns = 0;
  double last_end_ns = 0;
  std::uint64_t next_sequence = 0;
  std::map<std::pair<double, std::uint64_t>, Pending> pending;
  // Nodes of `pending` whose work ran, kept for the next issue so that a
  // launch does not allocate one (timeline.cpp).
  std::vector<decltype(pending)::node_type> spare_pending;
  std::map<std::uint64_t, Region> regions;           // by base address
  std::map<std::uint64_t, Physical> physical;        // by handle
  std::uint64_t next_handle = 1;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::map<std::uint64_t, std::uint64_t> host_allocations;  // pointer -> bytes (pinned)
  Stats stats;
  // Measured on the H100 (docs/gpu-facts.md): 55 GB/s per direction from
  // pinned memory, 7.3-9 GB/s from pageable memory (the driver stages it).
  double link_gbps = 55, pageable_gbps = 8, device_copy_gbps = 1000;
  // VGPUSIM_MAP_BUSY_US: what a cuMemMap costs the calling thread while its
  // device has work queued or running, when more than the idle cost (0: the
  // idle cost always). Under PyTorch on an H200 the pager's maps cost 77-109
  // µs per 2 MiB handle during training (docs/results.md), against ≈ 1 µs
  // idle on the H100: mapping waits on the GPU, per handle mapped.
  double map_busy_ns = 0;
  CostModel cost_model = CostModel::calibrated;
  // VGPUSIM_KERNEL_TIME_SCALE: every kernel's declared duration times this,
  // so that a workload's uncapped step can be set to a real GPU's measured
  // one when a run of it is compared with that GPU's.
  double kernel_time_scale = 1;
  DriverLock driver_lock;
  double driver_lock_waited_ns = 0;  // calls of any thread waiting for the lock, for the report
  std::uint64_t scrubbed_bytes = 0;

  // Count a call by its exported name (for the report). Takes its own lock:
  // entry points count before (or while) holding `mutex`.
  void count(const char* api);
  std::mutex calls_mutex;
  // Fault injection: true if this call of `operation` must fail.
  bool inject_fault(const std::string& operation);

  // Device memory accounting; false if the device is full. `mapped`: the
  // bytes are mapped as they are charged (allocations), not a VMM handle.
  bool charge(int device, std::uint64_t bytes, bool mapped = true);
  void refund(int device, std::uint64_t bytes, bool mapped = true);
  // A device handle of `bytes` got its first mapping, or lost its last.
  void mapping_changed(int device, std::uint64_t bytes, bool added);

  // The region containing [address, address + size), or nullptr.
  Region* region_of(std::uint64_t address, std::uint64_t size = 1);
  // True if every byte of [address, address + size) is mapped and accessible;
  // memory with a stream-ordered free pending counts only if include_freed
  // (the work ahead of the free may still use it).
  bool accessible(std::uint64_t address, std::uint64_t size, bool include_freed = false);

  void write_report(const char* path);
  TimelineFile timeline;

  struct FaultRule {
    std::uint64_t nth;
    bool and_later;
    std::uint64_t seen = 0;
  };
  std::map<std::string, FaultRule> faults;
};

// The simulator, locked for the scope of an entry point.
struct Locked {
  Simulator& sim = Simulator::get();
  std::lock_guard<std::mutex> lock{sim.mutex};
};

// The calling thread's context state (nullptr if none).
Context* current_context(Simulator& sim);
CUcontext current_handle();
// The calling thread's context stack (cuCtxPushCurrent/PopCurrent); the top is current.
std::vector<CUcontext>& context_stack();
// A new context on `device` with its legacy default stream (caller holds sim.mutex).
CUcontext create_context(Simulator& sim, int device, bool primary);
void create_default_pools(Simulator& sim);

// Common checks at the top of an entry point: initialised, context present,
// no sticky error.
CUresult check_context(Simulator& sim, Context** out = nullptr);

// ---- streams and the clock (timeline.cpp); the caller holds sim.mutex -------
// The stream a handle names: 0 is the legacy default stream, or the calling
// thread's per-thread stream for a _ptsz/_ptds entry point; CU_STREAM_LEGACY
// and CU_STREAM_PER_THREAD name those explicitly. nullptr (and *error) for a
// handle that is not a live stream of the current context.
Stream* resolve_stream(Simulator& sim, CUstream handle, bool per_thread_api, CUresult* error);
Stream* create_stream(Simulator& sim, CUcontext context, bool blocking);
void destroy_stream(Simulator& sim, Stream* stream);
// Issues work to a stream (or records it into the stream's capture). Returns
// CUDA_SUCCESS or the capture's error.
CUresult enqueue(Simulator& sim, Stream* stream, Operation operation);
// The calling thread's clock (a thread starts at the latest time any thread
// has reached), and moving it forward to `time_ns` for a reason the timeline
// file's host lanes show.
double host_now(Simulator& sim);
// `label` names a handoff (vgpusimHostHandoffFor); a static string.
void advance_host(Simulator& sim, double time_ns, HostSpan why, const char* label = nullptr);
// Runs everything scheduled at or before `time_ns` and moves the calling
// thread's clock there. Returns the sticky error of `context` (if given) afterwards.
CUresult wait_until(Simulator& sim, double time_ns, Context* context);

// ---- the kernel observer (kernel_observer.cpp) -----------------------------
// The launch's correlation id from the observer, if one is set (0 if not);
// called before taking sim.mutex.
std::uint32_t observe_launch();
// An observed kernel runs (caller holds sim.mutex).
void observe_run(const Pending& work, int device);

// ---- the timeline file (timeline_file.cpp); the caller holds sim.mutex ------
// An operation of an engine ran, as scheduled on `device`.
void record_operation(Simulator& sim, int device, const Pending& work);
// The calling thread's host lane (numbered in the order threads are first seen).
int host_lane(Simulator& sim);
// The calling thread's clock moved from `from_ns` to `to_ns` because of `why`.
void record_host_span(Simulator& sim, double from_ns, double to_ns, HostSpan why, const char* label);
// The bytes charged to or mapped on `device` changed (now, on the calling thread's clock).
void record_memory(Simulator& sim, int device);
// Writes the file (Chrome trace-event format) to `path`.
void write_timeline(Simulator& sim, const char* path);

// ---- what driver calls cost (host_costs.cpp) --------------------------------
// The VMM calls, costed by the model in force (Simulator::cost_model).
enum class VmmCall { create, map, set_access, unmap, release, reserve, address_free };
// A call over one handle (create, map, release) or a call of the idle model
// by its size: its whole cost.
double vmm_call_ns(const Simulator& sim, VmmCall call, std::uint64_t bytes);
// A call over a range (set-access, unmap): the part per call, by the range's
// size under the idle model; the calibrated model adds vmm_handle_ns for
// each handle mapped in the range.
double vmm_range_call_ns(const Simulator& sim, VmmCall call, std::uint64_t range_bytes);
double vmm_handle_ns(const Simulator& sim, VmmCall call, std::uint64_t handle_bytes);
// The calling thread pays `ns` for a VMM call: under the calibrated model
// after waiting for the driver's lock.
// `call` names it on the timeline file's host lanes (cuMemCreate, ...).
void spend_vmm_time(Simulator& sim, double ns, const char* call);
// A cuMemMap of `bytes` on `device`: under the idle model the idle cost, or
// VGPUSIM_MAP_BUSY_US (Simulator::map_busy_ns) where that is more and the
// device has work queued or running.
void spend_map_time(Simulator& sim, int device, std::uint64_t bytes);
// Pinning `bytes` of host memory (allocating pinned, or registering).
void spend_pin_time(Simulator& sim, std::uint64_t bytes, bool registering);
// Issuing work to a stream.
enum class Issue { launch, copy, event_record, event_record_untimed, stream_wait };
void spend_issue_time(Simulator& sim, Issue call);
// The calling thread's VMM and pinning calls so far, and the simulated time
// they took it, waits for the driver's lock included.
struct ThreadDriverCalls {
  unsigned long long vmm = 0, pin = 0;
  double ns = 0;
};
const ThreadDriverCalls& thread_driver_calls();
// Device memory given back to the driver is scrubbed by a copy engine.
void scrub_released(Simulator& sim, int device, std::uint64_t bytes);
// Simulated time by which everything issued to the context so far is done.
double context_tail(Simulator& sim, const Context& context);
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and the capture invalidated) if a
// capture in progress forbids this potentially unsafe call from this thread
// (context_sync: cuCtxSynchronize, forbidden even in relaxed mode).
CUresult check_capture_allows(Simulator& sim, bool context_sync = false);
// The per-thread capture mode (cuThreadExchangeStreamCaptureMode).
CUstreamCaptureMode& thread_capture_mode();
bool is_pinned_host(Simulator& sim, std::uint64_t address, std::uint64_t bytes);

std::uint64_t round_up(std::uint64_t value, std::uint64_t to);

// Reserve address space (never reused, so stale pointers fault).
std::uint64_t reserve_address_space(std::uint64_t size, std::uint64_t alignment);
// Make [address, address+size) inaccessible again.
void protect_none(std::uint64_t address, std::uint64_t size);

// Implemented in memory.cpp, used by several export files.
// pool: the stream-ordered pool it comes from, or nullptr.
CUresult allocate_device(CUdeviceptr* out, std::uint64_t bytes, Region::Kind kind, const char* fault_name, Pool* pool);
// cuMemFree: waits for the context's work, then frees.
CUresult free_device(CUdeviceptr address);
// cuMemFreeAsync: the bytes return to the pool now, the range goes when the
// stream's work ahead of the free is done.
CUresult free_device_async(CUdeviceptr address, CUstream stream, bool per_thread_api);
// Unmaps an allocation and forgets it (caller holds sim.mutex).
void release_region(Simulator& sim, std::uint64_t base);

// Records an illegal access by `what` at `address` (caller holds sim.mutex).
void record_illegal_access(Simulator& sim, const std::string& what, std::uint64_t address, int device);

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, CUstream stream, bool per_thread_api, void** params, void** extra);

// A copy of `height` rows of `width` bytes (each of `depth` slices), with
// pitches; a linear copy is one row. Device operands must be mapped and
// accessible when the copy is issued and again when it runs.
struct CopyShape {
  std::uint64_t dst = 0, src = 0;
  std::uint64_t width = 0, height = 1, depth = 1;
  std::uint64_t dst_pitch = 0, src_pitch = 0;  // bytes between rows
  std::uint64_t dst_slice = 0, src_slice = 0;  // bytes between slices
  bool dst_device = false, src_device = false;
};
enum class CopySync { async, sync };
CUresult copy(const CopyShape& shape, CUstream stream, bool per_thread_api, CopySync sync, const char* api);
CUresult copy_linear(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, bool dst_device, bool src_device,
                     CUstream stream, bool per_thread_api, CopySync sync, const char* api);
// memset of `height` rows of `count` elements of `element` bytes, rows `pitch` apart.
CUresult fill(std::uint64_t dst, std::uint64_t pitch, std::uint64_t value, unsigned element, std::uint64_t count,
              std::uint64_t height, CUstream stream, bool per_thread_api, const char* api);
// True if the address lies in simulated device memory (a live or pending-free region).
bool is_device_address(Simulator& sim, std::uint64_t address);

}  // namespace vgpusim
