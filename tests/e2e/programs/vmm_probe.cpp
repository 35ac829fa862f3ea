// The program's own virtual memory under paging: an allocator built on
// cuMemCreate/cuMemMap, as PyTorch's expandable segments and others are.
//
//   vmm_probe apart     twelve 4 MiB handles, each mapped alone in one
//                       reservation (48 MiB: three times a 16 MiB cap);
//                       kernels add to each three times, one handle is
//                       exported halfway, and the handle queries are asked
//   vmm_probe segment   a segment grown 2 MiB handle by handle, one 8 MiB
//                       buffer spanning four of them, next to twelve 4 MiB
//                       cuMemAlloc buffers (56 MiB under a 16 MiB cap)
//   vmm_probe peer      (two devices) two handles mapped alone, one of them
//                       given to device 1 as well, among cuMemAlloc buffers
//   vmm_probe queries   the virtual-memory queries a program may ask of its
//                       cuMemAlloc memory and of its own mappings after a
//                       launch over other buffers: prints one "query ..."
//                       line each, to compare with a run without paging
//
// Each buffer is checked at the end. Prints "vmm ok" and exits 0; "vmm
// mismatch ..." exits 4; a CUDA error exits 3; a wrong answer to a handle
// query exits 5.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kMiB = 1u << 20;

struct Buffer {
  CUdeviceptr address;
  std::size_t bytes;
  int value;  // what every int should hold at the end
};

CUmemAllocationProp device_memory() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;  // as PyTorch asks, to share later
  return prop;
}

CUmemAccessDesc read_write(int device) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

// A handle of `bytes` mapped at `at`, readable and writable by device 0.
CUmemGenericAllocationHandle map_handle(CUdeviceptr at, std::size_t bytes) {
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle handle = 0;
  CHECK(cuMemCreate(&handle, bytes, &prop, 0));
  CHECK(cuMemMap(at, bytes, 0, handle, 0));
  const CUmemAccessDesc access = read_write(0);
  CHECK(cuMemSetAccess(at, bytes, &access, 1));
  return handle;
}

class Kernels {
 public:
  Kernels() : add_4m_(register_add_one("vmm_add_one_4m", 4 * kMiB / 4)), add_8m_(register_add_one("vmm_add_one_8m", 8 * kMiB / 4)) {}
  void add_one(Buffer& buffer, CUstream stream) {
    void* params[] = {&buffer.address};
    CHECK(cuLaunchKernel(buffer.bytes == 8 * kMiB ? add_8m_ : add_4m_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    ++buffer.value;
  }

 private:
  CUfunction add_4m_, add_8m_;
};

void fill(Buffer& buffer, int value, CUstream stream) {
  CHECK(cuMemsetD32Async(buffer.address, static_cast<unsigned>(value), buffer.bytes / 4, stream));
  buffer.value = value;
}

bool check(const std::vector<Buffer>& buffers) {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    std::vector<int> back(buffers[i].bytes / 4);
    CHECK(cuMemcpyDtoH(back.data(), buffers[i].address, buffers[i].bytes));
    for (std::size_t k = 0; k < back.size(); ++k) {
      if (back[k] != buffers[i].value) {
        std::printf("vmm mismatch buffer %zu int %zu: %d, expected %d\n", i, k, back[k], buffers[i].value);
        return false;
      }
    }
  }
  return true;
}

void add_rounds(Kernels& kernels, std::vector<Buffer>& buffers, int rounds, CUstream stream) {
  for (int round = 0; round < rounds; ++round) {
    for (Buffer& buffer : buffers) kernels.add_one(buffer, stream);
  }
}

// `count` more 4 MiB cuMemAlloc buffers (paged the usual way), filled.
void add_allocated(std::vector<Buffer>& buffers, int count, CUstream stream) {
  for (int i = 0; i < count; ++i) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, 4 * kMiB));
    buffers.push_back(Buffer{p, 4 * kMiB, 0});
    fill(buffers.back(), i * 100, stream);
  }
}

// `rounds` of kernels over every buffer, then each checked.
bool run_and_check(Kernels& kernels, std::vector<Buffer>& buffers, int rounds, CUstream stream) {
  add_rounds(kernels, buffers, rounds, stream);
  CHECK(cuStreamSynchronize(stream));
  return check(buffers);
}

// The queries an allocator asks of its handles must answer as the driver's.
bool handle_queries_answer(CUdeviceptr at, CUmemGenericAllocationHandle handle) {
  CUmemGenericAllocationHandle retained = 0;
  CHECK(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(at + kMiB)));
  CUmemAllocationProp prop{};
  CHECK(cuMemGetAllocationPropertiesFromHandle(&prop, retained));
  CHECK(cuMemRelease(retained));
  CUdeviceptr base = 0;
  size_t size = 0;
  CHECK(cuMemGetAddressRange(&base, &size, at + kMiB));
  // Whether the driver names the mapping or the reservation here is its own
  // business (docs/gpu-facts.md); either holds the address.
  const bool same = retained == handle && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop.location.id == 0 &&
                    prop.requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && base <= at &&
                    at + 4 * kMiB <= base + size;
  if (!same) std::printf("vmm queries: retained %d, range %#llx+%zu\n", retained == handle, base, size);
  return same;
}

int apart(Kernels& kernels, CUstream stream) {
  CUdeviceptr reservation = 0;
  CHECK(cuMemAddressReserve(&reservation, 256 * kMiB, 0, 0, 0));
  std::vector<Buffer> buffers;
  std::vector<CUmemGenericAllocationHandle> handles;
  for (int i = 0; i < 12; ++i) {
    const CUdeviceptr at = reservation + static_cast<CUdeviceptr>(i) * 8 * kMiB;  // a gap after each
    handles.push_back(map_handle(at, 4 * kMiB));
    buffers.push_back(Buffer{at, 4 * kMiB, 0});
    fill(buffers.back(), i * 100, stream);
  }
  add_rounds(kernels, buffers, 2, stream);
  // Shared halfway, as torch.multiprocessing does: it must stay put from now on.
  int fd = -1;
  CHECK(cuMemExportToShareableHandle(&fd, handles[3], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  ::close(fd);
  add_rounds(kernels, buffers, 1, stream);
  CHECK(cuStreamSynchronize(stream));
  if (!handle_queries_answer(buffers[5].address, handles[5])) return 5;
  if (!check(buffers)) return 4;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    CHECK(cuMemUnmap(buffers[i].address, buffers[i].bytes));
    CHECK(cuMemRelease(handles[i]));
  }
  CHECK(cuMemAddressFree(reservation, 256 * kMiB));
  return 0;
}

int segment(Kernels& kernels, CUstream stream) {
  CUdeviceptr reservation = 0;
  CHECK(cuMemAddressReserve(&reservation, 64 * kMiB, 0, 0, 0));
  std::vector<CUmemGenericAllocationHandle> handles;
  for (int i = 0; i < 4; ++i) handles.push_back(map_handle(reservation + static_cast<CUdeviceptr>(i) * 2 * kMiB, 2 * kMiB));
  std::vector<Buffer> buffers{Buffer{reservation, 8 * kMiB, 0}};  // one buffer across the four handles
  fill(buffers[0], 7, stream);
  add_allocated(buffers, 12, stream);
  if (!run_and_check(kernels, buffers, 3, stream)) return 4;
  CHECK(cuMemUnmap(reservation, 8 * kMiB));  // one unmap over the four mappings
  for (CUmemGenericAllocationHandle handle : handles) CHECK(cuMemRelease(handle));
  for (std::size_t i = 1; i < buffers.size(); ++i) CHECK(cuMemFree(buffers[i].address));
  CHECK(cuMemAddressFree(reservation, 64 * kMiB));
  return 0;
}

int peer(Kernels& kernels, CUstream stream) {
  CUdeviceptr reservation = 0;
  CHECK(cuMemAddressReserve(&reservation, 64 * kMiB, 0, 0, 0));
  std::vector<Buffer> buffers{Buffer{reservation, 4 * kMiB, 0}, Buffer{reservation + 16 * kMiB, 4 * kMiB, 0}};
  const CUmemGenericAllocationHandle own = map_handle(buffers[0].address, 4 * kMiB);
  const CUmemGenericAllocationHandle shared = map_handle(buffers[1].address, 4 * kMiB);
  const CUmemAccessDesc both[] = {read_write(0), read_write(1)};
  CHECK(cuMemSetAccess(buffers[1].address, 4 * kMiB, both, 2));  // device 1 may reach it, unseen
  fill(buffers[0], 1, stream);
  fill(buffers[1], 2, stream);
  add_allocated(buffers, 8, stream);
  if (!run_and_check(kernels, buffers, 2, stream)) return 4;
  CHECK(cuMemUnmap(buffers[0].address, 4 * kMiB));
  CHECK(cuMemUnmap(buffers[1].address, 4 * kMiB));
  CHECK(cuMemRelease(own));
  CHECK(cuMemRelease(shared));
  return 0;
}

const char* result_name(CUresult result) {
  const char* name = nullptr;
  return cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr ? name : "?";
}

void print_access(const char* what, CUdeviceptr at, int device) {
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device;
  unsigned long long flags = 99;
  const CUresult result = cuMemGetAccess(&flags, &location, at);
  std::printf("query access %s device %d: %s flags %llu\n", what, device, result_name(result),
              result == CUDA_SUCCESS ? flags : 99ull);
}

// Each query of a mapping is asked after kernels over 16 MiB of other
// buffers, so that under a small cap (and at once under torture) what it
// names is offloaded.
int queries(Kernels& kernels, CUstream stream) {
  std::vector<Buffer> others;
  add_allocated(others, 4, stream);
  auto evict = [&] {
    add_rounds(kernels, others, 1, stream);
    CHECK(cuStreamSynchronize(stream));
  };
  CUdeviceptr allocated = 0;
  CHECK(cuMemAlloc(&allocated, 4 * kMiB));
  CHECK(cuMemsetD32(allocated, 5, kMiB));
  CUdeviceptr reservation = 0;
  CHECK(cuMemAddressReserve(&reservation, 64 * kMiB, 0, 0, 0));
  const CUdeviceptr granted = reservation, read_only = reservation + 8 * kMiB, ungranted = reservation + 16 * kMiB;
  const CUmemGenericAllocationHandle handle = map_handle(granted, 4 * kMiB);
  const CUmemGenericAllocationHandle read_handle = map_handle(read_only, 4 * kMiB);
  CUmemAccessDesc read = read_write(0);
  read.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  CHECK(cuMemSetAccess(read_only, 4 * kMiB, &read, 1));
  const CUmemAllocationProp prop = device_memory();
  CUmemGenericAllocationHandle bare = 0;
  CHECK(cuMemCreate(&bare, 4 * kMiB, &prop, 0));
  CHECK(cuMemMap(ungranted, 4 * kMiB, 0, bare, 0));  // mapped, never granted
  CHECK(cuMemsetD32(granted, 1, kMiB));

  // The cuMemAlloc buffer is asked about while resident (its chunks mapped
  // under it): what a driver query there finds is the pager's.
  CHECK(cuMemsetD32(allocated, 5, kMiB));
  CUmemGenericAllocationHandle retained = 0;
  CUresult result = cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(allocated + kMiB));
  std::printf("query retain allocated: %s\n", result_name(result));
  if (result == CUDA_SUCCESS) CHECK(cuMemRelease(retained));
  print_access("allocated", allocated, 0);
  evict();
  result = cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(granted + kMiB));
  std::printf("query retain mapped: %s same %d\n", result_name(result), result == CUDA_SUCCESS && retained == handle);
  if (result == CUDA_SUCCESS) CHECK(cuMemRelease(retained));
  evict();
  print_access("granted", granted + kMiB, 0);
  evict();
  print_access("granted", granted, 1);
  evict();
  print_access("read-only", read_only, 0);
  print_access("ungranted", ungranted, 0);

  std::vector<Buffer> checked{Buffer{allocated, 4 * kMiB, 5}, Buffer{granted, 4 * kMiB, 1}};
  if (!check(checked) || !check(others)) return 4;
  CHECK(cuMemUnmap(granted, 4 * kMiB));
  CHECK(cuMemUnmap(read_only, 4 * kMiB));
  CHECK(cuMemUnmap(ungranted, 4 * kMiB));
  for (CUmemGenericAllocationHandle h : {handle, read_handle, bare}) CHECK(cuMemRelease(h));
  CHECK(cuMemAddressFree(reservation, 64 * kMiB));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  use_primary_context();
  Kernels kernels;
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  int status = 2;
  if (mode == "apart") status = apart(kernels, stream);
  if (mode == "segment") status = segment(kernels, stream);
  if (mode == "peer") status = peer(kernels, stream);
  if (mode == "queries") status = queries(kernels, stream);
  if (status == 2) std::printf("usage: vmm_probe apart|segment|peer|queries\n");
  if (status == 0) std::printf("vmm ok\n");
  return status;
}
