// cuGetProcAddress and cuGetProcAddress_v2: how cudart, cuBLAS, cuDNN, NCCL
// and PyTorch's VMM calls find every driver function.
//
// We ask the real driver first, with the caller's exact name, version and
// flags, and then substitute the hook of the exact ABI variant it returned,
// identified by address. So cuLaunchKernel@4000/0 and @7000/2 get two
// different hooks, each forwarding to its own real variant, and a look-up of
// "cuGetProcAddress" itself returns our resolver, which keeps cudart's later
// look-ups (it swaps in the pointer it got for ("cuGetProcAddress", 12000))
// going through us. Anything not in the hooked set, the empty-name probe and
// failed look-ups pass through unchanged. A NULL name, on which the real
// driver crashes, is refused with CUDA_ERROR_INVALID_VALUE.
#include <cstring>

#include "interpose/hook_support.h"
#include "shim/log.h"

// Note [Three look-up paths, one answer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A caller reaches a driver function
// 1. through the dynamic linker (a program linked with `-lcuda`): our
//    exported hook of the same name comes first because we are preloaded;
// 2. through `dlsym` on a libcuda handle, `RTLD_DEFAULT` or `RTLD_NEXT`
//    (Triton, and cudart/cuBLAS/cuDNN/NCCL for `cuGetProcAddress_v2` itself):
//    our `dlsym` answers names of the form `cu[A-Z]*` that are in the table
//    with the hook, when the caller's look-up would have found the real
//    driver's function;
// 3. through `cuGetProcAddress`/`cuGetProcAddress_v2` (how cudart and every
//    library with a static cudart gets ~435 driver functions): we call the
//    real resolver with the caller's exact name, version and flags, and
//    replace the result with the hook of the exact ABI variant the driver
//    returned, identified by its address. A look-up of `cuGetProcAddress`
//    itself returns our resolver, so cudart's trick of swapping in the pointer
//    it got for `("cuGetProcAddress", 12000)` keeps every later look-up
//    hooked. If a driver ever returns an address that is none of its exports,
//    the documented version rule picks the variant instead (logged at debug,
//    visible in the trace's look-up list).

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// When the driver hands out an address that is not one of its exported
// symbols, choose the variant by the documented rule instead: the newest ABI
// variant of that name introduced at or before `version`, per-thread when the
// caller asked for per-thread default-stream semantics.
HookId hook_by_version_rule(const char* name, int version, cuuint64_t flags) {
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  HookId best = HookId::count_;
  int best_version = -1;
  bool best_matches_flavour = false;
  for (std::size_t i = 0; i < kHookCount; ++i) {
    const HookEntry& entry = hook_entry(i);
    if (std::strcmp(entry.base_name, name) != 0 || entry.version > version) continue;
    const bool matches_flavour = (entry.flavour == Flavour::per_thread) == per_thread;
    // Prefer the right flavour; among equals, the newest variant.
    if (std::make_pair(matches_flavour, entry.version) > std::make_pair(best_matches_flavour, best_version)) {
      best = static_cast<HookId>(i);
      best_version = entry.version;
      best_matches_flavour = matches_flavour;
    }
  }
  // A legacy variant is right for a per-thread request only if the function has
  // no per-thread variant at all; never hand out a per-thread one for legacy.
  if (best != HookId::count_ && !best_matches_flavour && hook_entry(best).flavour == Flavour::per_thread) {
    return HookId::count_;
  }
  return best;
}

void route(trace::LookupPath path, const char* symbol, void** pfn, int version, cuuint64_t flags, CUresult result) {
  if (symbol == nullptr) return;
  bool hooked = false;
  RealDriver* driver = RealDriver::get_if_loaded();
  if (result == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr && driver != nullptr) {
    HookId id = driver->hook_for_real_address(*pfn);
    if (id == HookId::count_ && is_driver_name(symbol) && driver->owns(*pfn)) {
      id = hook_by_version_rule(symbol, version, flags);
      if (id != HookId::count_) {
        VGPUMEM_LOG_DEBUG("cuGetProcAddress({}, {}, {}) returned an unexported address; routed by version to {}",
                          symbol, version, flags, hook_entry(id).symbol);
      }
    }
    if (id != HookId::count_) {
      *pfn = hook_address(id);
      hooked = true;
    } else {
      // A driver whose own table binds through the global scope hands out
      // our exported hook directly; that is hooked too.
      for (std::size_t i = 0; i < kHookCount && !hooked; ++i) hooked = *pfn == hook_address(static_cast<HookId>(i));
    }
  }
  note_lookup(path, symbol, version, flags, hooked);
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuGetProcAddress_v2,
                    (const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status),
                    (symbol, pfn, version, flags, status)) {
  if (symbol == nullptr) return CUDA_ERROR_INVALID_VALUE;  // the real driver dereferences it (gpu-facts §8.2)
  const CUresult result = REAL(cuGetProcAddress_v2)(symbol, pfn, version, flags, status);
  route(trace::LookupPath::get_proc_address_v2, symbol, pfn, version, flags, result);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuGetProcAddress,
                    (const char* symbol, void** pfn, int version, cuuint64_t flags),
                    (symbol, pfn, version, flags)) {
  if (symbol == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUresult result = REAL(cuGetProcAddress)(symbol, pfn, version, flags);
  route(trace::LookupPath::get_proc_address, symbol, pfn, version, flags, result);
  return result;
}
