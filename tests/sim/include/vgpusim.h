/*
 * vgpusim.h — the public interface of the simulated CUDA driver.
 *
 * The simulated driver is a libcuda.so.1 that implements the driver API subset
 * a training process uses, in host memory (see docs/simulated-driver.md).
 * Device memory is host address space that the simulator maps and unmaps, so a
 * simulated kernel is an ordinary host function that dereferences device
 * pointers directly. Touching memory that is not mapped and accessible is
 * caught and turned into CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the context,
 * as on hardware.
 *
 * A program defines kernels by registering host functions, then launches them
 * with the ordinary driver API (cuLaunchKernel, cuLaunchKernelEx, their _ptsz
 * forms). Registered kernels are found like real ones:
 *   - vgpusimRegisterKernel() returns a CUfunction directly;
 *   - cuModuleLoadData(&mod, VGPUSIM_MODULE_IMAGE) then
 *     cuModuleGetFunction(&fn, mod, name) finds a kernel by name;
 *   - cuLibraryLoadData(&lib, VGPUSIM_MODULE_IMAGE, ...) then
 *     cuLibraryGetKernel(&k, lib, name) gives a CUkernel, and
 *     cuKernelGetFunction() the CUfunction for the current context.
 * cuFuncGetParamInfo / cuKernelGetParamInfo report the parameter layout
 * computed from paramSizes with natural alignment, as nvcc lays it out.
 *
 * These functions are exported by the simulated libcuda.so.1 only; a program
 * that must also run on real hardware looks them up with dlsym.
 */
#ifndef VGPUSIM_H
#define VGPUSIM_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pass this as the image to cuModuleLoadData / cuLibraryLoadData to get a
 * module or library that holds every registered kernel. */
#define VGPUSIM_MODULE_IMAGE "vgpusim-module"

/* What a simulated kernel sees of its launch. */
typedef struct vgpusimLaunch {
  unsigned int grid[3];
  unsigned int block[3];
  unsigned int sharedMemBytes;
  CUstream stream;
  int device;
} vgpusimLaunch;

/* A kernel body. params[i] points at parameter i's bytes, exactly as the
 * program passed them (kernelParams) or as unpacked from the `extra` buffer. */
typedef void (*vgpusimKernelFn)(void **params, const vgpusimLaunch *launch, void *user);

/* Simulated duration of one launch in nanoseconds of the simulated clock. */
typedef double (*vgpusimDurationFn)(void **params, const vgpusimLaunch *launch, void *user);

#define VGPUSIM_MAX_PARAMS 64

typedef struct vgpusimKernelDesc {
  const char *name;             /* unique; copied */
  vgpusimKernelFn body;         /* required */
  unsigned int paramCount;      /* <= VGPUSIM_MAX_PARAMS */
  const size_t *paramSizes;     /* paramCount entries; copied */
  double durationNs;            /* fixed simulated duration, used when durationFn is NULL */
  vgpusimDurationFn durationFn; /* optional */
  void *user;                   /* passed back to body and durationFn */
} vgpusimKernelDesc;

/* Registers a kernel. Returns CUDA_SUCCESS and the function in *out (may be
 * NULL), CUDA_ERROR_INVALID_VALUE for a bad descriptor or a duplicate name. */
CUresult vgpusimRegisterKernel(const vgpusimKernelDesc *desc, CUfunction *out);

/* Simulated time now, in nanoseconds, as seen by the calling host thread
 * (each thread has its own clock, advanced by its synchronising calls). */
unsigned long long vgpusimHostTimeNs(void);

/* Writes the simulator's report (see docs/simulated-driver.md) now, to path or,
 * when path is NULL, to $VGPUSIM_REPORT. The report is also written at exit. */
CUresult vgpusimWriteReport(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* VGPUSIM_H */
