// Pointer tables a kernel follows, under paging: no launch names the
// buffers a table points to, only the table.
//
//   table_probe large     a 3 MiB upload (pointers first, then int64
//                         metadata, as FSDP2 packs them) is the only place
//                         four buffers' addresses go; six others push
//                         everything off the device; a kernel sums each
//                         buffer through the table. Prints "large ok".
//   table_probe fifo      the same table lies in pinned host memory
//                         (cuMemHostAlloc) the kernel reads directly, as
//                         NCCL's work FIFO is read. Prints "fifo ok".
//   table_probe unified   as large, the table uploaded with cuMemcpy from
//                         host memory (cudaMemcpyDefault's way). Prints
//                         "unified ok".
//   table_probe long N    N steps, each uploading a two-pointer table to the
//                         same place (a caching allocator's reused block)
//                         naming two of eight buffers in turn, adding one to
//                         a third, and summing through the table. Prints
//                         "long ok".
// A wrong sum prints "<mode> mismatch ..." and exits 4; a CUDA error exits 3.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_kernels.h"

namespace {

constexpr std::size_t kBufferBytes = 2u << 20, kInts = kBufferBytes / 4;

// out[i] = the sum of the ints of the buffer table[i] points to: the
// pointers are read from where the table lies (device or pinned host
// memory), as a batched library kernel or NCCL's reads them.
void sum_through_table(void** params, const vgpusimLaunch*, void*) {
  const int* const* table = nullptr;
  int count = 0;
  std::int64_t* out = nullptr;
  std::memcpy(&table, params[0], sizeof table);
  std::memcpy(&count, params[1], sizeof count);
  std::memcpy(&out, params[2], sizeof out);
  for (int i = 0; i < count; ++i) {
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < kInts; ++k) sum += table[i][k];
    out[i] = sum;
  }
}

struct Kernels {
  CUfunction sum = register_probe_kernel("probe_sum_through_table", sum_through_table, {8, 4, 8});
  CUfunction add = register_add_one("probe_add_one", kInts);
};

// Buffers filled with `first`, `first + 1`, ...: their values, kept on the host.
std::vector<CUdeviceptr> filled_buffers(int count, int first, std::vector<int>& values) {
  std::vector<CUdeviceptr> buffers(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    CHECK(cuMemAlloc(&buffers[static_cast<std::size_t>(i)], kBufferBytes));
    CHECK(cuMemsetD32(buffers[static_cast<std::size_t>(i)], static_cast<unsigned>(first + i), kInts));
    values.push_back(first + i);
  }
  return buffers;
}

void add_one(const Kernels& kernels, CUdeviceptr buffer) {
  void* params[] = {&buffer};
  CHECK(cuLaunchKernel(kernels.add, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
}

// Sums `count` buffers through the table at `table` into `out`, and checks
// each against value × kInts.
bool sums_right(const Kernels& kernels, CUdeviceptr table, int count, CUdeviceptr out, const int* values,
                const char* mode) {
  void* params[] = {&table, &count, &out};
  CHECK(cuLaunchKernel(kernels.sum, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  std::vector<std::int64_t> sums(static_cast<std::size_t>(count));
  CHECK(cuMemcpyDtoH(sums.data(), out, sums.size() * sizeof(std::int64_t)));
  for (int i = 0; i < count; ++i) {
    const std::int64_t expected = static_cast<std::int64_t>(values[i]) * static_cast<std::int64_t>(kInts);
    if (sums[static_cast<std::size_t>(i)] != expected) {
      std::printf("%s mismatch buffer %d: %lld, expected %lld\n", mode, i,
                  static_cast<long long>(sums[static_cast<std::size_t>(i)]), static_cast<long long>(expected));
      return false;
    }
  }
  return true;
}

// Four buffers reached through one table, six others pushing them out and
// changed on the device first (so what comes back must be their own bytes).
int through_table(const std::string& mode) {
  const bool in_host_memory = mode == "fifo";
  const Kernels kernels;
  constexpr int kTargets = 4, kPressure = 6;
  std::vector<int> values, pressure_values;
  const std::vector<CUdeviceptr> targets = filled_buffers(kTargets, 100, values);
  for (int i = 0; i < kTargets; ++i) {
    add_one(kernels, targets[static_cast<std::size_t>(i)]);
    ++values[static_cast<std::size_t>(i)];
  }
  // 3 MiB: the pointers, then int64 metadata (FSDP2's split sizes) past the scan limit.
  const std::size_t table_bytes = 3u << 20;
  std::vector<std::uint64_t> packed(table_bytes / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = i < kTargets ? targets[i] : i * 128;
  CUdeviceptr table = 0, out = 0;
  void* host_table = nullptr;
  if (in_host_memory) {
    constexpr std::size_t kFifoBytes = 64u << 10, kWorkAt = 4096;  // the work sits inside the FIFO
    CHECK(cuMemHostAlloc(&host_table, kFifoBytes, CU_MEMHOSTALLOC_DEVICEMAP));
    std::memset(host_table, 0, kFifoBytes);
    std::memcpy(static_cast<char*>(host_table) + kWorkAt, packed.data(), kTargets * sizeof(std::uint64_t));
    table = reinterpret_cast<CUdeviceptr>(host_table) + kWorkAt;
  } else {
    CHECK(cuMemAlloc(&table, table_bytes));
    // The only place the targets' addresses go.
    if (mode == "unified") {
      CHECK(cuMemcpy(table, reinterpret_cast<CUdeviceptr>(packed.data()), table_bytes));
    } else {
      CHECK(cuMemcpyHtoD(table, packed.data(), table_bytes));
    }
  }
  CHECK(cuMemAlloc(&out, kTargets * sizeof(std::int64_t)));
  const std::vector<CUdeviceptr> pressure = filled_buffers(kPressure, 0, pressure_values);
  for (int round = 0; round < 2; ++round) {
    for (CUdeviceptr p : pressure) add_one(kernels, p);
  }
  if (!sums_right(kernels, table, kTargets, out, values.data(), mode.c_str())) return 4;
  for (CUdeviceptr p : pressure) CHECK(cuMemFree(p));
  for (CUdeviceptr p : targets) CHECK(cuMemFree(p));
  if (in_host_memory) {
    CHECK(cuMemFreeHost(host_table));
  } else {
    CHECK(cuMemFree(table));
  }
  CHECK(cuMemFree(out));
  std::printf("%s ok\n", mode.c_str());
  return 0;
}

// A trainer's step, `steps` times: a table of two of eight buffers uploaded
// to the same block of a segment that is never freed, one buffer changed,
// both table buffers summed through the table.
int long_run(int steps) {
  const Kernels kernels;
  constexpr int kBuffers = 8;
  std::vector<int> values;
  const std::vector<CUdeviceptr> buffers = filled_buffers(kBuffers, 1, values);
  CUdeviceptr segment = 0;  // the table at its start, the sums 1 MiB in
  CHECK(cuMemAlloc(&segment, kBufferBytes));
  const CUdeviceptr table = segment, out = segment + (1u << 20);
  for (int step = 0; step < steps; ++step) {
    const int first = step % kBuffers, second = (step + 3) % kBuffers, changed = (step + 5) % kBuffers;
    add_one(kernels, buffers[static_cast<std::size_t>(changed)]);
    ++values[static_cast<std::size_t>(changed)];
    const CUdeviceptr pointers[2] = {buffers[static_cast<std::size_t>(first)],
                                     buffers[static_cast<std::size_t>(second)]};
    CHECK(cuMemcpyHtoDAsync(table, pointers, sizeof pointers, nullptr));
    const int expected[2] = {values[static_cast<std::size_t>(first)], values[static_cast<std::size_t>(second)]};
    if (!sums_right(kernels, table, 2, out, expected, "long")) return 4;
  }
  for (CUdeviceptr p : buffers) CHECK(cuMemFree(p));
  CHECK(cuMemFree(segment));
  std::printf("long ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "large" && mode != "fifo" && mode != "unified" && !(mode == "long" && argc > 2)) {
    std::fprintf(stderr, "usage: table_probe large|fifo|unified|long STEPS\n");
    return 2;
  }
  use_primary_context();
  if (mode == "long") return long_run(std::atoi(argv[2]));
  return through_table(mode);
}
