// What every hook file needs: the table, REAL(), the runtime, the boundary
// every hook is defined through (VGPUMEM_HOOK_DEFINE), and the allocation
// protocol (reserve -> real call -> commit or abandon).
//
// How to add a hook
// ~~~~~~~~~~~~~~~~~
// 1. Add one line per ABI variant to `interpose/hooked_functions.def`:
//      VGPUMEM_HOOK(cuFoo_v2, PFN_cuFoo_v3020, cuFoo, 3020, legacy)
//    with its `_ptsz`/`_ptds` twin as `per_thread` if the driver has one. The
//    `HookId`, the table entry, the exported prototype, `REAL(cuFoo_v2)`,
//    dlsym's and cuGetProcAddress's routing and the trace's count all come
//    from that line; `hook_table.cpp`'s static_asserts check it.
// 2. Define it once, in the `hooks_*.cpp` of its kind, with the parameters
//    of its `PFN_` type (a different signature does not compile):
//      VGPUMEM_HOOK_DEFINE(cuFoo_v2, (CUdeviceptr p, size_t n), (p, n)) {
//        ... translate: tell the runtime what memory the call touches ...
//        return REAL(cuFoo_v2)(p, n);
//      }
//    or, for a hook with nothing to do yet, VGPUMEM_FORWARDING_HOOK(...).
//    Write no count, no try/catch and no fork check: the boundary the macro
//    wraps the body in does all three (below), and the call shows in the
//    trace's `calls_by_api` (tests/e2e/hook_table_test.cpp calls every hook
//    in the table and checks its count).
// 3. Remove the function from `interpose/unhooked_functions.txt` if it was
//    listed there (tests/unit/hook_coverage_test.cpp), and keep the body
//    thin: it translates and forwards; policy belongs to shim/, vmm/ and
//    scheduler/.
#pragma once

#include <cxxabi.h>

#include "interpose/hook_table.h"
#include "interpose/real_driver.h"
#include "interpose/runtime_platform.h"
#include "shim/runtime.h"
#include "vmm/accounting.h"

// Note [The process boundary]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Hooks translate and forward. A hook hands the arguments to the
// runtime/accounting and calls `REAL(name)` (its boundary counted the call
// already); a hook never
// returns anything but a `CUresult` the driver could have returned
// (`CUDA_ERROR_NOT_INITIALIZED` if no driver could be loaded,
// `CUDA_ERROR_NOT_SUPPORTED` if the driver lacks that variant).
// * The process boundary. Every hook is defined with
// `VGPUMEM_HOOK_DEFINE(name, (params), (args)) { body }`
// (`hook_support.h`), which runs the body inside `hook_boundary`:
// - *Every call is counted*, before its body runs, for the trace's
//   `calls_by_api`: one relaxed add (`count_call`) at a fixed address, and
//   no body can forget or repeat it.
// - *No exception crosses into the program.* The shim allocates through the
//   STL; a `std::bad_alloc` (or `std::length_error`) escaping a body is
//   caught at the boundary, logged (a line formatted into a fixed buffer; if
//   even the logger fails, written with `write(2)`; at most 16 such lines)
//   and answered with `CUDA_ERROR_OUT_OF_MEMORY`, as the driver answers an
//   allocation it cannot make; any other exception with
//   `CUDA_ERROR_UNKNOWN`. Thread cancellation's forced unwind is rethrown.
//   The `dlsym` decision, the exit handler, the fork handlers and the
//   reclaimer's thread catch on their own. On the normal path the guard
//   costs nothing but a table entry (zero-cost exceptions); it adds no lock
//   and no allocation to the launch path.
// - *A forked child passes every call straight through.* See Note [fork() and the shim's locks]
//   in shim/runtime.cpp.
// - Test builds (`VGPUMEM_FAULT_INJECTION`, on by default, not in sanitizer
//   builds) replace the shim's own `operator new` with one that can fail:
//   `VGPUMEMTEST_FAIL_ALLOCATIONS=cuMemAlloc_v2#2` makes every allocation the
//   shim makes during the second `cuMemAlloc_v2` throw (`fault_injection.cpp`;
//   named outside `VGPUMEM_*` so the configuration never sees it). Turn the
//   option off for packaging.

namespace vgpumem::interpose {

using vmm::AllocationKind;

inline const char* api_name(HookId id) { return hook_entry(id).symbol; }

// ---- the boundary between the program's C frames and the shim's C++ --------------------
//
// Every exported hook is defined with VGPUMEM_HOOK_DEFINE, which runs its body
// through hook_boundary:
//  * The runtime is made on the first call, and every call is counted
//    (g_hook_calls, hook_table.h) before the body runs.
//  * In a process forked after the shim was in use (a child cannot use its
//    parent's CUDA state, and the shim's locks may have been held by parent
//    threads that do not exist in it), the call goes straight to the real
//    driver: no shim lock, no accounting, no paging.
//  * No C++ exception crosses into the caller's C frames: one escaping the
//    body (std::bad_alloc from an STL container, say) is logged and becomes
//    the error the driver itself could have returned, CUDA_ERROR_OUT_OF_MEMORY
//    (CUDA_ERROR_UNKNOWN for anything that is not an allocation failure).
//    Thread cancellation's forced unwind is let through, as it must be.
// On the normal path this costs two loads, a branch each, and one relaxed
// add (the count): the try block
// is table-driven (no code runs unless something throws), and nothing locks
// or allocates.

// Logs the exception being handled (never allocating, if allocating fails)
// and returns the CUDA error the hook answers with. Call only from a catch
// block.
CUresult hook_failed(HookId id) noexcept;
// The first call that passes straight through in a forked child warns once.
void note_pass_through(HookId id) noexcept;

template <HookId id, typename Body, typename Forward>
inline CUresult hook_boundary(Body&& body, Forward&& forward) {
  try {
    if (passes_through()) [[unlikely]] {
      note_pass_through(id);
      return forward();
    }
    runtime();       // made on the first call, with this library's platform
    count_call(id);  // for calls_by_api: the body can neither forget nor repeat it
    return body();
  } catch (const abi::__forced_unwind&) {
    throw;  // pthread_cancel/pthread_exit unwinding through a driver call
  } catch (...) {
    return hook_failed(id);
  }
}

// Runs `allocate` (which calls the real driver and stores the new
// allocation's key) under the cap of `device`. When the device is unknown
// before the call (no current context, a pool of another device), the
// allocation is adopted afterwards from the pointer's own device, and undone
// with `undo` if that device's cap is exceeded.
template <typename Allocate, typename KeyOf, typename Undo>
CUresult charged_allocation(HookId api, AllocationKind kind, int device, std::uint64_t bytes, Allocate&& allocate,
                            KeyOf&& key_of, Undo&& undo) {
  vmm::Accounting& accounting = Runtime::get().accounting();
  if (device >= 0) {
    if (!accounting.reserve(device, bytes, api_name(api))) {
      // Paged memory holds the room: offload some of it and try once more.
      vmm::Pager* pager = Runtime::get().pager_for(device);
      if (pager == nullptr || !pager->make_room(device, bytes) || !accounting.reserve(device, bytes, api_name(api))) {
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    const CUresult result = allocate();
    if (result != CUDA_SUCCESS) {
      accounting.abandon(device, bytes);
      return result;
    }
    accounting.commit(kind, key_of(), device, bytes, api_name(api));
    return result;
  }
  const CUresult result = allocate();
  if (result != CUDA_SUCCESS) return result;
  const std::uint64_t key = key_of();
  const int actual = kind == AllocationKind::device ? device_of_pointer(key) : -1;
  if (actual < 0) return result;  // nothing to charge it to; it stays untracked
  if (!accounting.adopt(kind, key, actual, bytes, api_name(api))) {
    undo();
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return result;
}

// Traces what the pager answered an allocation of `bytes` on `device`:
// the allocation (`key`: its address, or a handle's value), or the refusal.
inline CUresult traced_paged_allocation(vmm::Pager& pager, HookId api, int device, std::uint64_t bytes,
                                        CUresult result, std::uint64_t key) {
  if (result == CUDA_SUCCESS) {
    Runtime::get().recorder().record_alloc(device, key, bytes, api_name(api));
  } else {
    Runtime::get().recorder().record_oom(device, bytes, pager.resident_bytes(device),
                                         Runtime::get().accounting().usage(device).cap, api_name(api));
  }
  return result;
}

// A device allocation served by the pager (VGPUMEM_POLICY=lru on a capped
// device): beyond the cap it succeeds while host memory lasts.
inline CUresult paged_allocation(vmm::Pager& pager, HookId api, int device, std::uint64_t bytes, CUdeviceptr* out) {
  const CUresult result = pager.allocate(device, bytes, out);
  return traced_paged_allocation(pager, api, device, bytes, result, result == CUDA_SUCCESS ? *out : 0);
}

// Makes the device memory in [address, address + bytes) resident for work on
// `stream` (a copy or memset operand), held until `access` is released.
inline CUresult paged_operand(std::uint64_t address, std::uint64_t bytes, CUstream stream, bool per_thread,
                              vmm::Access& access, const char* api = "") {
  vmm::Pager* pager = Runtime::get().pager();
  return pager == nullptr ? CUDA_SUCCESS
                          : pager->prepare_range(address, bytes, stream, per_thread, access, vmm::Operation{api});
}

// Host bytes on their way to [destination, destination + bytes): pointers
// into paged memory among them make it a table a kernel may follow, unseen
// by any hook; a launch that points into it brings them in (PointerTables).
inline void register_upload(std::uint64_t destination, const void* host, std::size_t bytes) {
  if (vmm::Pager* pager = Runtime::get().pager()) pager->pointer_tables().uploaded(destination, host, bytes);
}

// Device bytes a copy or memset rewrites: a table wholly inside is gone.
inline void register_overwrite(std::uint64_t address, std::uint64_t bytes) {
  if (vmm::Pager* pager = Runtime::get().pager()) pager->pointer_tables().overwritten(address, bytes);
}

// A free: forwards, and on success refunds what the allocation was charged.
template <typename Free>
CUresult charged_free(HookId api, AllocationKind kind, std::uint64_t key, Free&& free_it) {
  const CUresult result = free_it();
  if (result == CUDA_SUCCESS && key != 0) Runtime::get().accounting().forget(kind, key, api_name(api));
  return result;
}

}  // namespace vgpumem::interpose

// Defines the exported hook `name` with parameters `params` (a
// parenthesised list) whose names are `args` (also parenthesised); the body
// follows the macro, as a function body:
//   VGPUMEM_HOOK_DEFINE(cuMemFree_v2, (CUdeviceptr dptr), (dptr)) { ... }
// The body runs inside hook_boundary, which counts the call; `args` also
// forward the call as is (in a forked child).
#define VGPUMEM_HOOK_DEFINE(name, params, args)                                                 \
  static CUresult vgpumem_hook_body_##name params;                                              \
  extern "C" CUresult name params {                                                             \
    return ::vgpumem::interpose::hook_boundary<::vgpumem::interpose::HookId::name>(             \
        [&]() -> CUresult { return vgpumem_hook_body_##name args; },                            \
        [&]() -> CUresult { return REAL(name) args; });                                         \
  }                                                                                             \
  static CUresult vgpumem_hook_body_##name params

// A hook with no policy yet: it only forwards (its boundary counts the call).
#define VGPUMEM_FORWARDING_HOOK(name, params, args) \
  VGPUMEM_HOOK_DEFINE(name, params, args) { return REAL(name) args; }
