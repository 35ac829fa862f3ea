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
  const size_t *paramAlignments; /* optional, paramCount entries: a parameter's alignment when it is not its
                                    natural one (0: natural), e.g. 64 for a CUtensorMap (__grid_constant__) */
} vgpusimKernelDesc;

/* Registers a kernel. Returns CUDA_SUCCESS and the function in *out (may be
 * NULL), CUDA_ERROR_INVALID_VALUE for a bad descriptor or a duplicate name. */
CUresult vgpusimRegisterKernel(const vgpusimKernelDesc *desc, CUfunction *out);

/* TMA tensor maps. cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress check their
 * arguments as cuda.h documents and build an opaque 128-byte map that does
 * not hold the global address as a plain word (nor as any 8 consecutive
 * bytes). A simulated kernel reads through a map it was passed by decoding
 * it: element (c0, c1, ...) of the global tensor is at
 *   globalAddress + c0 * elementBits / 8 + c1 * globalStrides[0] + c2 * globalStrides[1] + ...
 */
#define VGPUSIM_TENSOR_MAP_TILED 1
#define VGPUSIM_TENSOR_MAP_IM2COL 2
#define VGPUSIM_TENSOR_MAP_IM2COL_WIDE 3

typedef struct vgpusimTensorMapInfo {
  int kind; /* VGPUSIM_TENSOR_MAP_* */
  CUtensorMapDataType dataType;
  unsigned int elementBits; /* 4 for the packed U4 type; one byte a value in the ALIGN16B layouts */
  unsigned int rank;
  CUdeviceptr globalAddress;
  cuuint64_t globalDim[5];
  cuuint64_t globalStrides[4]; /* bytes, of dimensions 1 .. rank-1 */
  cuuint32_t boxDim[5];        /* tiled maps */
  cuuint32_t elementStrides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2Promotion;
  CUtensorMapFloatOOBfill oobFill;
  int pixelBoxLowerCorner[3]; /* im2col maps ([0] only for the wide ones) */
  int pixelBoxUpperCorner[3];
  cuuint32_t channelsPerPixel;
  cuuint32_t pixelsPerColumn;
  CUtensorMapIm2ColWideMode wideMode;
} vgpusimTensorMapInfo;

/* What a map the simulator encoded describes. CUDA_ERROR_INVALID_VALUE for
 * bytes that are not such a map (never encoded, or changed by hand). */
CUresult vgpusimTensorMapDecode(const CUtensorMap *map, vgpusimTensorMapInfo *info);

/* Texture and surface objects. cuTexObjectCreate keeps the resource it was
 * given (linear, pitched 2D, array or mipmapped array; linear and pitched
 * memory must be mapped device memory); cuSurfObjectCreate accepts arrays
 * only, as CUDA does. Filtering and addressing modes are not simulated: a
 * simulated kernel reads through an object by asking for its resource and
 * reading the memory it names. Safe to call from a kernel body.
 * CUDA_ERROR_INVALID_VALUE for an object that does not exist. */
CUresult vgpusimTexObjectResource(CUtexObject object, CUDA_RESOURCE_DESC *resource);

/* dma-bufs. cuMemGetHandleForAddressRange (CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)
 * gives a file descriptor standing for the physical pages mapped at the range
 * when it is called, as a real dma-buf does: a later unmap or remap of the
 * range does not change what it reads. A test reads through one as a NIC
 * would, `bytes` at `offset` into the range. CUDA_ERROR_INVALID_VALUE for a
 * descriptor that is not one, or a read past its end. */
CUresult vgpusimDmaBufRead(int fd, unsigned long long offset, void *out, size_t bytes);

/* Multicast objects (cuMulticastCreate, AddDevice, BindMem, BindAddr, Unbind)
 * hold the physical pages bound to them, as a dma-buf does. A test writes
 * through one as another GPU of the team would: `bytes` at `offset` into the
 * object land in the memory bound there. CUDA_ERROR_INVALID_VALUE where
 * nothing is bound. */
CUresult vgpusimMulticastWrite(CUmemGenericAllocationHandle object, unsigned long long offset, const void *data,
                               size_t bytes);

/* Simulated time now, in nanoseconds, as seen by the calling host thread
 * (each thread has its own clock, advanced by its synchronising calls). */
unsigned long long vgpusimHostTimeNs(void);

/* The calling thread has just learned of something another thread did at
 * `ns` on that thread's clock (a handoff through a mutex, a condition
 * variable, a queue): its own clock moves there if it is behind. Host-side
 * synchronisation is invisible to the simulator, so a program whose threads
 * hand work to each other (a framework's autograd thread) carries the time
 * across with this, as a real thread would have waited. */
void vgpusimHostHandoff(unsigned long long ns);

/* vgpusimHostHandoff, with what was waited for: the timeline file's host lane
 * names the wait `why` (a string that lives as long as the process: the
 * shim's "pager lock", "mover's fetch", ...) instead of "handoff". */
void vgpusimHostHandoffFor(unsigned long long ns, const char *why);

/* The VMM calls (create, map, set-access, unmap, release, reserve, free) and
 * pinning calls (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister) the
 * calling thread has made so far, and the simulated time they took it in
 * nanoseconds, waits for the driver's lock included. Any pointer may be NULL.
 * What a program's launch thread spends on paging, seen from the driver. */
void vgpusimThreadDriverCalls(unsigned long long *vmm_calls, unsigned long long *pin_calls, unsigned long long *ns);

/* The cost model from now on, as VGPUSIM_COST_MODEL would set it at cuInit:
 * "calibrated" or "idle" (docs/simulated-driver.md, "Host costs").
 * CUDA_ERROR_INVALID_VALUE for any other name. For tests that compare the two
 * in one process. */
CUresult vgpusimSetCostModel(const char *name);

/* Bytes of copies between host and device issued so far, each way (the
 * report's bytes_h2d and bytes_d2h count them as they run). */
void vgpusimCopiedBytes(unsigned long long *to_device, unsigned long long *to_host);

/* The most physical memory (cuMemCreate, cuMemAlloc, ...) device `device`
 * held at any instant since the start or the last reset, in bytes; with
 * `reset` nonzero, the peak starts again from what it holds now. For tests
 * that must hold a cap at every instant, not only at the moments they look.
 * 0 for a device that does not exist. */
unsigned long long vgpusimPhysicalPeak(int device, int reset);

/* Writes the simulator's report (see docs/simulated-driver.md) now, to path or,
 * when path is NULL, to $VGPUSIM_REPORT. The report is also written at exit. */
CUresult vgpusimWriteReport(const char *path);

/* Kernel observation, for the simulated CUPTI (tests/sim/cupti/): what a
 * profiler attached to the real driver learns about each kernel.
 *   launching: on the launching thread, at every kernel launch (not one
 *     recorded into a stream capture), before the simulator takes its lock.
 *     Returns the launch's correlation id; 0 means "not observed" and `ran`
 *     is then not called for it.
 *   ran: when the simulated device runs an observed kernel, with its place
 *     on the simulated clock. Called under the simulator's lock: it must not
 *     call back into the driver (the simulated CUPTI only queues a record).
 * The structure must outlive its registration; NULL removes the observer. */
typedef struct vgpusimKernelRun {
  const char *name;            /* the registered name; valid for the process's life */
  unsigned long long startNs;  /* simulated clock, as the kernel was scheduled */
  unsigned long long endNs;
  unsigned int streamId;       /* unique per stream of the process, never 0 */
  unsigned int correlationId;  /* as `launching` returned it */
  int device;
} vgpusimKernelRun;

typedef struct vgpusimKernelObserver {
  unsigned int (*launching)(void *user);
  void (*ran)(const vgpusimKernelRun *run, void *user);
  void *user;
} vgpusimKernelObserver;

void vgpusimSetKernelObserver(const vgpusimKernelObserver *observer);

/* Test control: the next call of `operation` -- "cuMemCreate", or
 * "hostalloc" (cuMemHostAlloc, cuMemAllocHost_v2) -- parks at its entry,
 * before taking the simulator's lock, until vgpusimReleaseStall(). One call
 * only. CUDA_ERROR_INVALID_VALUE for another operation. */
CUresult vgpusimStallNext(const char *operation);
/* 1 while a call is parked. */
int vgpusimStalled(void);
/* Lets the parked call (if any) go on, and disarms. */
void vgpusimReleaseStall(void);

#ifdef __cplusplus
}
#endif

#endif /* VGPUSIM_H */
