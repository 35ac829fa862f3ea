// cuGetProcAddress and cuGetProcAddress_v2, with the rules measured on the
// H100's driver (docs/gpu-facts.md §8.2):
//  * the newest ABI variant introduced at or before the requested version;
//  * with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, only the per-thread
//    (_ptsz/_ptds) variants of a name that has any: below the version that
//    brought them the answer is VERSION_NOT_SUFFICIENT, not the legacy one;
//  * an unknown name (the empty-name probe included) is CUDA_SUCCESS with a
//    NULL function and SYMBOL_NOT_FOUND from the 5-argument ABI, and
//    CUDA_ERROR_NOT_FOUND from the legacy 4-argument one;
//  * a version newer than the driver's, or unknown flags, is
//    CUDA_ERROR_INVALID_VALUE with *pfn left untouched.
// A NULL name is CUDA_ERROR_INVALID_VALUE here; the H100's driver crashes on it.
#include <cstring>
#include <type_traits>

#include "sim.h"

using PFN_cuMemAlloc_v1 = CUresult(CUDAAPI*)(unsigned int*, unsigned int);
using PFN_cuMemAllocPitch_v1 = CUresult(CUDAAPI*)(unsigned int*, unsigned int*, unsigned int, unsigned int, unsigned int);
using PFN_cuMemFree_v1 = CUresult(CUDAAPI*)(unsigned int);
using PFN_cuMemcpyHtoD_v1 = CUresult(CUDAAPI*)(unsigned int, const void*, unsigned int);
using PFN_cuMemcpyDtoH_v1 = CUresult(CUDAAPI*)(void*, unsigned int, unsigned int);
using PFN_cuMemGetInfo_v1 = CUresult(CUDAAPI*)(unsigned int*, unsigned int*);
using PFN_cuStreamBeginCapture_v10000 = CUresult(CUDAAPI*)(CUstream);
using PFN_cuStreamBeginCapture_v10000_ptsz = CUresult(CUDAAPI*)(CUstream);

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

constexpr cuuint64_t kKnownFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

CUresult resolve(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr || version > 13000 || (flags & ~kKnownFlags) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const bool per_thread_wanted = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  bool exists = false, has_per_thread = false;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    exists = true;
    has_per_thread = has_per_thread || e.per_thread;
  }
  const bool per_thread = per_thread_wanted && has_per_thread;
  const Entry* best = nullptr;
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0 || e.per_thread != per_thread || e.version > version) continue;
    if (best == nullptr || e.version > best->version) best = &e;
  }
  if (status != nullptr) {
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : (exists ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  *pfn = best ? best->function : nullptr;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  return resolve(symbol, pfn, version, flags, status);
}

SIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult result = resolve(symbol, pfn, version, flags, &status);
  if (result != CUDA_SUCCESS) return result;
  return status == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
