// Copies and memsets. Device operands must be mapped and accessible: a copy
// touching anything else is refused (CUDA_ERROR_INVALID_VALUE) and changes
// nothing. Host<->device copies advance the simulated clock at the link
// bandwidth (VGPUSIM_LINK_GBPS).
#include <cstring>

#include "sim.h"

namespace vgpusim {

CUresult copy(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, bool dst_device, bool src_device) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (CUresult r = check_context(sim)) return r;
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst == 0 || src == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((dst_device && !sim.accessible(dst, bytes)) || (src_device && !sim.accessible(src, bytes))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (sim.inject_fault("memcpy")) return CUDA_ERROR_UNKNOWN;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  if (dst_device && !src_device) sim.stats.bytes_h2d += bytes;
  if (!dst_device && src_device) sim.stats.bytes_d2h += bytes;
  const double gbps = dst_device && src_device ? sim.device_copy_gbps : sim.link_gbps;
  sim.stats.sim_time_ns += static_cast<double>(bytes) / gbps + 2000.0;  // bytes / (GB/s) = ns, plus a fixed latency
  return CUDA_SUCCESS;
}

CUresult fill(std::uint64_t dst, std::uint64_t value, unsigned element, std::uint64_t count) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  if (CUresult r = check_context(sim)) return r;
  if (count == 0) return CUDA_SUCCESS;
  if (!sim.accessible(dst, count * element) || dst % element != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<unsigned char*>(dst);
  for (std::uint64_t i = 0; i < count; ++i) std::memcpy(p + i * element, &value, element);
  sim.stats.sim_time_ns += static_cast<double>(count * element) / sim.device_copy_gbps;
  return CUDA_SUCCESS;
}

}  // namespace vgpusim

using namespace vgpusim;

namespace {
bool is_device(std::uint64_t address) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  return sim.region_of(address) != nullptr;
}
// cuMemcpy/cuMemcpyAsync take unified addresses: the direction follows from them.
CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n, is_device(dst), is_device(src)); }
}  // namespace

#define SIM_COPY(name, params, call)   \
  SIM_EXPORT CUresult name params {    \
    Simulator::get().count(#name);     \
    return call;                       \
  }
SIM_COPY(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), unified(d, s, n))
SIM_COPY(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), unified(d, s, n))
SIM_COPY(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream), unified(d, s, n))
SIM_COPY(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream), unified(d, s, n))
SIM_COPY(cuMemcpyHtoD_v2, (CUdeviceptr d, const void* s, size_t n), copy(d, reinterpret_cast<std::uint64_t>(s), n, true, false))
SIM_COPY(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void* s, size_t n), copy(d, reinterpret_cast<std::uint64_t>(s), n, true, false))
SIM_COPY(cuMemcpyDtoH_v2, (void* d, CUdeviceptr s, size_t n), copy(reinterpret_cast<std::uint64_t>(d), s, n, false, true))
SIM_COPY(cuMemcpyDtoH_v2_ptds, (void* d, CUdeviceptr s, size_t n), copy(reinterpret_cast<std::uint64_t>(d), s, n, false, true))
SIM_COPY(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), copy(d, s, n, true, true))
SIM_COPY(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), copy(d, s, n, true, true))
SIM_COPY(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void* s, size_t n, CUstream), copy(d, reinterpret_cast<std::uint64_t>(s), n, true, false))
SIM_COPY(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void* s, size_t n, CUstream), copy(d, reinterpret_cast<std::uint64_t>(s), n, true, false))
SIM_COPY(cuMemcpyDtoHAsync_v2, (void* d, CUdeviceptr s, size_t n, CUstream), copy(reinterpret_cast<std::uint64_t>(d), s, n, false, true))
SIM_COPY(cuMemcpyDtoHAsync_v2_ptsz, (void* d, CUdeviceptr s, size_t n, CUstream), copy(reinterpret_cast<std::uint64_t>(d), s, n, false, true))
SIM_COPY(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream), copy(d, s, n, true, true))
SIM_COPY(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream), copy(d, s, n, true, true))
SIM_COPY(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), fill(d, v, 1, n))
SIM_COPY(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), fill(d, v, 1, n))
SIM_COPY(cuMemsetD32_v2, (CUdeviceptr d, unsigned v, size_t n), fill(d, v, 4, n))
SIM_COPY(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned v, size_t n), fill(d, v, 4, n))
SIM_COPY(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream), fill(d, v, 1, n))
SIM_COPY(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream), fill(d, v, 1, n))
SIM_COPY(cuMemsetD32Async, (CUdeviceptr d, unsigned v, size_t n, CUstream), fill(d, v, 4, n))
SIM_COPY(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned v, size_t n, CUstream), fill(d, v, 4, n))
