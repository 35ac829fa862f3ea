// Physical pages handed to someone no stream orders: dma-bufs of device
// address ranges (cuMemGetHandleForAddressRange) and multicast objects
// (cuMulticastCreate, BindMem, BindAddr, Unbind). Both hold the pages mapped
// (or the handle bound) when they are made: the simulator keeps a duplicate
// of each backing handle's memory file, so the pages outlive an unmap or a
// release as the real ones do. vgpusimDmaBufRead reads through a dma-buf as
// a NIC doing RDMA would; vgpusimMulticastWrite writes through a multicast
// object as another GPU of the team would.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "sim.h"

using namespace vgpusim;

namespace {

// One stretch of a dma-buf: a handle's memory file at an offset, or (for
// memory the simulator does not back with a handle) the address itself.
struct Stretch {
  int file = -1;
  std::uint64_t file_offset = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

struct Multicast {
  CUmulticastObjectProp prop{};
  std::vector<CUdevice> devices;
  std::map<std::uint64_t, std::vector<Stretch>> bound;  // by offset into the object
};

struct SharedPages {
  std::mutex mutex;
  std::map<int, std::vector<Stretch>> by_fd;
  std::map<CUmemGenericAllocationHandle, Multicast> multicast;
  CUmemGenericAllocationHandle next_multicast = 0x3C00'0000'0000'0001;
};

SharedPages& shared_pages() {
  static SharedPages* all = new SharedPages;
  return *all;
}

// Copies between `bytes` of `data` and the stretches, starting `offset` in.
// False past their end.
bool through(const std::vector<Stretch>& backing, std::uint64_t offset, unsigned char* data, std::uint64_t bytes,
             bool write) {
  std::uint64_t at = offset, left = bytes;
  for (const Stretch& s : backing) {
    if (left == 0) break;
    if (at >= s.bytes) {
      at -= s.bytes;
      continue;
    }
    const std::uint64_t n = std::min(left, s.bytes - at);
    if (s.file >= 0) {
      const auto file_at = static_cast<off_t>(s.file_offset + at);
      const ssize_t moved = write ? ::pwrite(s.file, data, n, file_at) : ::pread(s.file, data, n, file_at);
      if (moved != static_cast<ssize_t>(n)) return false;
    } else if (write) {
      std::memcpy(reinterpret_cast<void*>(s.address + at), data, n);
    } else {
      std::memcpy(data, reinterpret_cast<const void*>(s.address + at), n);
    }
    data += n;
    left -= n;
    at = 0;
  }
  return left == 0;
}

constexpr std::uint64_t kHostPage = 4096;

// The stretches backing [address, address + bytes) of `region`; empty if a
// part of a reservation is not mapped.
std::vector<Stretch> stretches(Simulator& sim, const Region& region, std::uint64_t address, std::uint64_t bytes) {
  if (region.kind != Region::Kind::reservation) return {Stretch{-1, 0, address, bytes}};
  std::vector<Stretch> out;
  for (std::uint64_t at = address - region.base, end = at + bytes; at < end;) {
    auto it = region.mappings.upper_bound(at);
    if (it == region.mappings.begin()) return {};
    --it;
    const auto& [start, mapping] = *it;
    if (at >= start + mapping.size) return {};
    const std::uint64_t length = std::min(end, start + mapping.size) - at;
    out.push_back(Stretch{::dup(sim.physical.at(mapping.handle).fd), mapping.handle_offset + (at - start), 0, length});
    at += length;
  }
  return out;
}

}  // namespace

SIM_EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr ptr, size_t size,
                                                  CUmemRangeHandleType type, unsigned long long flags) {
  Simulator& sim = Simulator::get();
  std::lock_guard lock(sim.mutex);
  sim.count("cuMemGetHandleForAddressRange");
  if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0 || size == 0 ||
      ptr % kHostPage != 0 || size % kHostPage != 0 || !sim.accessible(ptr, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Region* region = sim.region_of(ptr, size);
  if (region == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Stretch> backing = stretches(sim, *region, ptr, size);
  if (backing.empty()) return CUDA_ERROR_INVALID_VALUE;
  const int fd = ::memfd_create("vgpusim-dma-buf", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  SharedPages& all = shared_pages();
  std::lock_guard bufs(all.mutex);
  all.by_fd[fd] = std::move(backing);
  *static_cast<int*>(handle) = fd;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult vgpusimDmaBufRead(int fd, unsigned long long offset, void* out, size_t bytes) {
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  auto it = all.by_fd.find(fd);
  if (it == all.by_fd.end() || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return through(it->second, offset, static_cast<unsigned char*>(out), bytes, false) ? CUDA_SUCCESS
                                                                                     : CUDA_ERROR_INVALID_VALUE;
}

// ---- multicast objects ------------------------------------------------------------------
SIM_EXPORT CUresult cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                              CUmulticastGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMulticastCreate(CUmemGenericAllocationHandle* handle, const CUmulticastObjectProp* prop) {
  Simulator::get().count("cuMulticastCreate");
  if (handle == nullptr || prop == nullptr || prop->numDevices == 0 || prop->size == 0 ||
      prop->size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  *handle = all.next_multicast++;
  all.multicast[*handle].prop = *prop;
  return CUDA_SUCCESS;
}

namespace {

// The object `handle`, if it exists and [offset, offset + size) fits it at
// the granularity.
Multicast* multicast_range(SharedPages& all, CUmemGenericAllocationHandle handle, std::uint64_t offset,
                           std::uint64_t size) {
  auto it = all.multicast.find(handle);
  if (it == all.multicast.end() || size == 0 || offset % kGranularity != 0 || size % kGranularity != 0 ||
      offset + size > it->second.prop.size) {
    return nullptr;
  }
  return &it->second;
}

CUresult bind(CUmemGenericAllocationHandle handle, std::uint64_t offset, std::uint64_t size,
              std::vector<Stretch> backing) {
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  Multicast* object = multicast_range(all, handle, offset, size);
  if (object == nullptr || object->devices.empty()) return CUDA_ERROR_INVALID_VALUE;
  object->bound[offset] = std::move(backing);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle handle, CUdevice device) {
  Simulator::get().count("cuMulticastAddDevice");
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  auto it = all.multicast.find(handle);
  if (it == all.multicast.end() || it->second.devices.size() >= it->second.prop.numDevices) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  it->second.devices.push_back(device);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMulticastBindMem(CUmemGenericAllocationHandle handle, size_t offset,
                                       CUmemGenericAllocationHandle memory, size_t memory_offset, size_t size,
                                       unsigned long long flags) {
  std::vector<Stretch> backing;
  {
    Simulator& sim = Simulator::get();
    std::lock_guard lock(sim.mutex);
    sim.count("cuMulticastBindMem");
    auto phys = sim.physical.find(memory);
    if (flags != 0 || phys == sim.physical.end() || memory_offset % kGranularity != 0 ||
        memory_offset + size > phys->second.size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    backing.push_back(Stretch{::dup(phys->second.fd), memory_offset, 0, size});
  }
  return bind(handle, offset, size, std::move(backing));
}

SIM_EXPORT CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle handle, size_t offset, CUdeviceptr memory,
                                        size_t size, unsigned long long flags) {
  std::vector<Stretch> backing;
  {
    Simulator& sim = Simulator::get();
    std::lock_guard lock(sim.mutex);
    sim.count("cuMulticastBindAddr");
    const Region* region = sim.region_of(memory, size);
    if (flags != 0 || region == nullptr || size == 0 || !sim.accessible(memory, size)) return CUDA_ERROR_INVALID_VALUE;
    backing = stretches(sim, *region, memory, size);
    if (backing.empty()) return CUDA_ERROR_INVALID_VALUE;
  }
  return bind(handle, offset, size, std::move(backing));
}

SIM_EXPORT CUresult cuMulticastUnbind(CUmemGenericAllocationHandle handle, CUdevice, size_t offset, size_t size) {
  Simulator::get().count("cuMulticastUnbind");
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  Multicast* object = multicast_range(all, handle, offset, size);
  if (object == nullptr || object->bound.erase(offset) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult vgpusimMulticastWrite(CUmemGenericAllocationHandle handle, unsigned long long offset,
                                          const void* data, size_t bytes) {
  SharedPages& all = shared_pages();
  std::lock_guard lock(all.mutex);
  auto it = all.multicast.find(handle);
  if (it == all.multicast.end() || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [start, backing] : it->second.bound) {
    if (offset < start) continue;
    std::vector<unsigned char> copy(static_cast<const unsigned char*>(data),
                                    static_cast<const unsigned char*>(data) + bytes);
    if (through(backing, offset - start, copy.data(), bytes, true)) return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
