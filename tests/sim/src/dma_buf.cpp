// dma-bufs of device address ranges (cuMemGetHandleForAddressRange). A
// dma-buf holds the physical pages mapped at the range when it is made: the
// simulator keeps a duplicate of each backing handle's memory file (so the
// pages outlive an unmap or a release, as a real dma-buf's do) and reads
// through them in vgpusimDmaBufRead, the way a NIC doing RDMA would.
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

struct DmaBufs {
  std::mutex mutex;
  std::map<int, std::vector<Stretch>> by_fd;
};

DmaBufs& dma_bufs() {
  static DmaBufs* all = new DmaBufs;
  return *all;
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
  DmaBufs& all = dma_bufs();
  std::lock_guard bufs(all.mutex);
  all.by_fd[fd] = std::move(backing);
  *static_cast<int*>(handle) = fd;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult vgpusimDmaBufRead(int fd, unsigned long long offset, void* out, size_t bytes) {
  DmaBufs& all = dma_bufs();
  std::lock_guard lock(all.mutex);
  auto it = all.by_fd.find(fd);
  if (it == all.by_fd.end() || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* to = static_cast<unsigned char*>(out);
  std::uint64_t at = offset, left = bytes;
  for (const Stretch& s : it->second) {
    if (left == 0) break;
    if (at >= s.bytes) {
      at -= s.bytes;
      continue;
    }
    const std::uint64_t n = std::min(left, s.bytes - at);
    if (s.file >= 0) {
      if (::pread(s.file, to, n, static_cast<off_t>(s.file_offset + at)) != static_cast<ssize_t>(n)) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    } else {
      std::memcpy(to, reinterpret_cast<const void*>(s.address + at), n);
    }
    to += n;
    left -= n;
    at = 0;
  }
  return left == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
