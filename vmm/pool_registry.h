// Which memory pools the pager may serve (cuMemAllocFromPoolAsync).
//
// A pool's allocations are paged only when paged memory can keep every
// promise the pool made: device memory, usable by its own device alone, not
// exportable, unbounded. A pool the program got from the driver
// (cuDeviceGetDefaultMemPool, cuDeviceGetMemPool) starts pageable; one it
// made (cuMemPoolCreate) is judged by its properties; granting another
// device access (cuMemPoolSetAccess) ends it. A pool never seen (imported
// from another process) is not paged.
#pragma once

#include <map>
#include <mutex>
#include <optional>

#include <cuda.h>

// Note [Pools the pager serves]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Which memory pools the pager may serve: the device's
// default and current pools, and pools the program made for its own device
// alone, not exportable (`handleTypes` none) and unbounded (`maxSize` 0).
// A pool shared with another device (`cuMemPoolSetAccess`), an exportable
// one, or one never seen (imported) is left to the driver and charged to
// its own device.

namespace vgpumem::vmm {

class PoolRegistry {
 public:
  void saw_device_pool(CUmemoryPool pool, int device);
  void created(CUmemoryPool pool, const CUmemPoolProps& props);
  void access_set(CUmemoryPool pool, const CUmemAccessDesc* descs, std::size_t count);
  void destroyed(CUmemoryPool pool);

  // The device whose pager may serve an allocation from `pool`, or nullopt.
  std::optional<int> pageable_on(CUmemoryPool pool) const;
  // The device a pool's memory is on, if known (for the cap).
  std::optional<int> device_of(CUmemoryPool pool) const;
  // Whether the program made the pool for host memory (charged to no device).
  bool on_host(CUmemoryPool pool) const;

 private:
  struct Pool {
    int device = -1;  // -1: not device memory
    bool pageable = false;
  };
  mutable std::mutex mutex_;
  std::map<CUmemoryPool, Pool> pools_;
};

}  // namespace vgpumem::vmm
