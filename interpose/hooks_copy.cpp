// Copies and memsets name their device operands directly. Today they are
// counted and forwarded; residency (making operands resident before the copy
// is enqueued) hooks in here.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

VGPUMEM_FORWARDING_HOOK(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoH_v2_ptds, (void* dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
VGPUMEM_FORWARDING_HOOK(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dst, const void* src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoHAsync_v2_ptsz, (void* dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                        (dst, src, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemsetD8_v2, (CUdeviceptr dst, unsigned char value, size_t n), (dst, value, n))
VGPUMEM_FORWARDING_HOOK(cuMemsetD8_v2_ptds, (CUdeviceptr dst, unsigned char value, size_t n), (dst, value, n))
VGPUMEM_FORWARDING_HOOK(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int value, size_t n), (dst, value, n))
VGPUMEM_FORWARDING_HOOK(cuMemsetD32_v2_ptds, (CUdeviceptr dst, unsigned int value, size_t n), (dst, value, n))
VGPUMEM_FORWARDING_HOOK(cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream s),
                        (dst, value, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemsetD8Async_ptsz, (CUdeviceptr dst, unsigned char value, size_t n, CUstream s),
                        (dst, value, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemsetD32Async, (CUdeviceptr dst, unsigned int value, size_t n, CUstream s),
                        (dst, value, n, s))
VGPUMEM_FORWARDING_HOOK(cuMemsetD32Async_ptsz, (CUdeviceptr dst, unsigned int value, size_t n, CUstream s),
                        (dst, value, n, s))
