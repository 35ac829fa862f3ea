// The hooked set as data: one entry per exported hook, generated from
// hooked_functions.def, plus the real driver's address for each once loaded.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

// cuda.h maps these legacy names onto their newest ABI variant with macros;
// the shim names every variant exactly, so the macros must go.
#undef cuGetProcAddress
#undef cuMemAlloc
#undef cuMemAllocPitch
#undef cuMemFree
#undef cuStreamBeginCapture
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

// Legacy 32-bit ABI variants still exported by libcuda; cudaTypedefs.h only
// declares their types for the driver's own build.
using PFN_cuMemAlloc_v1 = CUresult(CUDAAPI*)(unsigned int* dptr, unsigned int bytesize);
using PFN_cuMemAllocPitch_v1 = CUresult(CUDAAPI*)(unsigned int* dptr, unsigned int* pitch,
                                                  unsigned int width_bytes, unsigned int height,
                                                  unsigned int element_size_bytes);
using PFN_cuMemFree_v1 = CUresult(CUDAAPI*)(unsigned int dptr);
// The first stream-capture entry points (CUDA 10.0, no mode argument).
using PFN_cuStreamBeginCapture_v1 = CUresult(CUDAAPI*)(CUstream stream);
using PFN_cuStreamBeginCapture_v1_ptsz = CUresult(CUDAAPI*)(CUstream stream);

// Note [The hooked set as data]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `hooked_functions.def` is the hooked set as data: one line per ABI
// variant (`cuLaunchKernel` and `cuLaunchKernel_ptsz` are two lines), with its
// function-pointer type from `cudaTypedefs.h`, the base name callers pass to
// `cuGetProcAddress`, the version that introduced it and its default-stream
// flavour. Everything else is generated from it: the `HookId` enum, the
// table, the exact prototypes of the hooks (a hook whose signature differs
// from the driver's type does not compile), `REAL(name)`. Compile-time
// checks enforce that per-thread entries are exactly the `_ptsz`/`_ptds`
// symbols and that no symbol is listed twice.

// Note [Which driver functions need no hook]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Which driver functions need none of this is written down:
// `interpose/unhooked_functions.txt` lists every function of `cuda.h` whose
// parameters can name device memory (a `CUdeviceptr`, an array, a tensor map,
// a copy, memset, kernel-node or resource descriptor) and has no hook, each
// with its reason — memory the pager never pages (module globals, another
// process's IPC memory, managed memory, arrays, graphics and external memory),
// or a reader that moves nothing. Entries marked `OWED` are work still to do.
// `tests/unit/hook_coverage_test.cpp` parses the `cuda.h` the build uses and
// fails for any such function that is neither hooked nor listed, so a CUDA
// upgrade that adds one cannot go unnoticed.

namespace vgpumem::interpose {

enum class Flavour : std::uint8_t { legacy, per_thread };

enum class HookId : std::uint16_t {
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) symbol,
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
  count_
};
inline constexpr std::size_t kHookCount = static_cast<std::size_t>(HookId::count_);

struct HookEntry {
  const char* symbol;     // exact exported name, e.g. "cuLaunchKernel_ptsz"
  const char* base_name;  // name passed to cuGetProcAddress, e.g. "cuLaunchKernel"
  int version;            // CUDA version that introduced this ABI variant
  Flavour flavour;
};

// Our exported function for `id`. A switch rather than a stored pointer: the
// table must be usable from dlsym calls made by constructors that run before
// this library's own dynamic initialisers.
void* hook_address(HookId id);

// All entries, indexed by HookId.
const HookEntry& hook_entry(HookId id);
inline const HookEntry& hook_entry(std::size_t index) { return hook_entry(static_cast<HookId>(index)); }

// The entry whose exported symbol is `symbol`, or nullptr.
const HookEntry* find_hook_by_symbol(std::string_view symbol);

// How often each hook was called, for the trace's `calls_by_api`. Counted by
// the hook boundary (hook_support.h), never by a hook's body: one relaxed add
// on a constant-initialised array, no lock, no runtime pointer to follow.
inline std::atomic<std::uint64_t> g_hook_calls[kHookCount];
inline void count_call(HookId id) {
  g_hook_calls[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_relaxed);
}
inline std::uint64_t hook_calls(HookId id) {
  return g_hook_calls[static_cast<std::size_t>(id)].load(std::memory_order_relaxed);
}

// True for names the shim may ever hook: "cu" followed by an upper-case letter.
// cuDNN's cudnn*, cuBLAS's cublas* and the like never match.
constexpr bool is_driver_name(std::string_view name) {
  return name.size() > 2 && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

}  // namespace vgpumem::interpose

// Declarations of every hooked symbol with its exact type (cuda.h only declares
// the variants that the current per-thread-stream mode selects).
extern "C" {
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) \
  __attribute__((visibility("default"))) std::remove_pointer_t<pfn> symbol;
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
}
