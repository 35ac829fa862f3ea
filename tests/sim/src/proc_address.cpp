// cuGetProcAddress and cuGetProcAddress_v2, with the real driver's rules
// (cuda.h and docs/gpu-facts.md): the newest ABI variant introduced at or
// before the requested version; the per-thread variant when the caller asks
// for per-thread default-stream semantics and one exists; CUDA_SUCCESS with
// a NULL function for an unknown name (the empty-name probe included);
// CUDA_ERROR_INVALID_VALUE for a version newer than the driver's.
#include <cstring>
#include <type_traits>

#include "sim.h"

using PFN_cuMemAlloc_v1 = CUresult(CUDAAPI*)(unsigned int*, unsigned int);
using PFN_cuMemAllocPitch_v1 = CUresult(CUDAAPI*)(unsigned int*, unsigned int*, unsigned int, unsigned int, unsigned int);
using PFN_cuMemFree_v1 = CUresult(CUDAAPI*)(unsigned int);

#undef cuEventElapsedTime
extern "C" {
#define SIM_ENTRY(base, version, per_thread, symbol, pfn) std::remove_pointer_t<pfn> symbol;
#include "entry_points.def"
#undef SIM_ENTRY
}

namespace {

struct Entry {
  const char* base;
  int version;
  bool per_thread;
  void* function;
};

// The library is linked -Bsymbolic, so these are our own functions even when
// a preloaded library exports the same names.
const Entry kEntries[] = {
#define SIM_ENTRY(base, version, per_thread, symbol, pfn) {#base, version, per_thread, reinterpret_cast<void*>(&::symbol)},
#include "entry_points.def"
#undef SIM_ENTRY
};

CUresult resolve(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (version > 13000) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Entry* best = nullptr;
  bool exists = false;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    exists = true;
    if (e.version > version || (e.per_thread && !per_thread)) continue;
    const bool better = best == nullptr || (e.per_thread == per_thread && best->per_thread != per_thread) ||
                        (e.per_thread == best->per_thread && e.version > best->version);
    if (better) best = &e;
  }
  if (status != nullptr) {
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : (exists ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  if (best != nullptr) *pfn = best->function;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  return resolve(symbol, pfn, version, flags, status);
}

SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return resolve(symbol, pfn, version, flags, nullptr);
}
