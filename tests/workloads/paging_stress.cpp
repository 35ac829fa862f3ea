// A randomized stress program for paging: several threads, each with its own
// streams, allocate buffers of random sizes, run random kernels that read and
// write them (launched with kernelParams, with the packed `extra` buffer, with
// cuLaunchKernelEx), copy and memset them, checksum them on the device, and
// free them -- while a host mirror of every byte says what each buffer must
// hold. Ordering across streams is the program's job, as in any CUDA program:
// every buffer carries the event of its last use.
//
//   paging_stress [--threads T] [--ops N] [--seed S] [--max-live L] [--async 1]
// --async 1 allocates with cuMemAllocAsync and frees with cuMemFreeAsync on
// the buffer's last stream (stream order instead of synchronising frees).
// Prints "STRESS ok ..." and exits 0, or "STRESS mismatch ..." (exit 4) or
// "CUDA_ERROR <name> at <call>" (exit 3).
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vgpusim.h"

namespace {

std::mutex g_print;

[[noreturn]] void fail_cuda(CUresult result, const char* what, int line) {
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "UNKNOWN";
  std::lock_guard lock(g_print);
  std::printf("CUDA_ERROR %s at %s (line %d)\n", name, what, line);
  std::fflush(stdout);
  std::_Exit(3);
}
#define CHECK(call)                                          \
  do {                                                       \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) fail_cuda(r_, #call, __LINE__); \
  } while (0)

struct Options {
  int threads = 4, ops = 600, max_live = 16;
  bool stream_ordered = false;
  unsigned seed = 1;
};

// ---- kernels: host functions on the simulated driver ------------------------------------
template <typename T>
T arg(void** params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}

std::uint8_t pattern(std::uint64_t i, std::uint64_t seed) { return static_cast<std::uint8_t>((i * 131 + seed * 7) >> 1); }
std::uint8_t mixed(std::uint8_t dst, std::uint8_t src, std::uint64_t k) {
  return static_cast<std::uint8_t>(dst * 3 + src + k);
}
std::uint64_t weighted_sum(const std::uint8_t* p, std::uint64_t n) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i) sum += p[i] * (i % 251 + 1);
  return sum;
}

void fill_body(void** p, const vgpusimLaunch*, void*) {
  auto* dst = reinterpret_cast<std::uint8_t*>(arg<CUdeviceptr>(p, 0));
  const auto n = arg<std::uint64_t>(p, 1), seed = arg<std::uint64_t>(p, 2);
  for (std::uint64_t i = 0; i < n; ++i) dst[i] = pattern(i, seed);
}
void mix_body(void** p, const vgpusimLaunch*, void*) {
  auto* dst = reinterpret_cast<std::uint8_t*>(arg<CUdeviceptr>(p, 0));
  const auto* src = reinterpret_cast<const std::uint8_t*>(arg<CUdeviceptr>(p, 1));
  const auto n = arg<std::uint64_t>(p, 2), k = arg<std::uint64_t>(p, 3);
  for (std::uint64_t i = 0; i < n; ++i) dst[i] = mixed(dst[i], src[i], k);
}
// A struct parameter holding a pointer, as real kernels take them.
struct SumArgs {
  CUdeviceptr data;
  std::uint64_t bytes;
};
void sum_body(void** p, const vgpusimLaunch*, void*) {
  const auto args = arg<SumArgs>(p, 0);
  auto* out = reinterpret_cast<std::uint64_t*>(arg<CUdeviceptr>(p, 1));
  *out = weighted_sum(reinterpret_cast<const std::uint8_t*>(args.data), args.bytes);
}

struct Kernels {
  CUfunction fill = nullptr, mix = nullptr, sum = nullptr;
} g_kernels;

bool register_kernels() {
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) return false;
  auto add = [&](const char* name, vgpusimKernelFn body, std::vector<size_t> sizes, CUfunction* out) {
    vgpusimKernelDesc desc{};
    desc.name = name;
    desc.body = body;
    desc.paramCount = static_cast<unsigned>(sizes.size());
    desc.paramSizes = sizes.data();
    desc.durationNs = 20000;
    return reg(&desc, out) == CUDA_SUCCESS;
  };
  return add("stress_fill", fill_body, {8, 8, 8}, &g_kernels.fill) &&
         add("stress_mix", mix_body, {8, 8, 8, 8}, &g_kernels.mix) &&
         add("stress_sum", sum_body, {sizeof(SumArgs), 8}, &g_kernels.sum);
}

// ---- one thread's work ---------------------------------------------------------------------
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

struct Buffer {
  CUdeviceptr device = 0;
  std::vector<std::uint8_t> mirror;
  CUevent last_use = nullptr;   // recorded after every operation on it
  CUstream last_stream = nullptr;
  bool used = false;
};

std::atomic<std::uint64_t> g_checksums{0}, g_ops{0}, g_peak_live_bytes{0}, g_live_bytes{0};

void note_live(std::int64_t delta) {
  const std::uint64_t now = g_live_bytes.fetch_add(static_cast<std::uint64_t>(delta)) + static_cast<std::uint64_t>(delta);
  std::uint64_t peak = g_peak_live_bytes.load();
  while (now > peak && !g_peak_live_bytes.compare_exchange_weak(peak, now)) {
  }
}

[[noreturn]] void mismatch(const char* what, std::uint64_t expected, std::uint64_t got) {
  std::lock_guard lock(g_print);
  std::printf("STRESS mismatch %s expected=%" PRIu64 " got=%" PRIu64 "\n", what, expected, got);
  std::fflush(stdout);
  std::_Exit(4);
}

class Worker {
 public:
  Worker(CUcontext context, unsigned seed, const Options& options) : context_(context), rng_{seed * 2654435761ULL + 1}, options_(options) {}

  void run() {
    CHECK(cuCtxSetCurrent(context_));
    streams_.push_back(nullptr);  // the legacy default stream
    for (int i = 0; i < 2; ++i) {
      CUstream s = nullptr;
      CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      streams_.push_back(s);
    }
    CHECK(cuMemAlloc(&sum_out_.device, sizeof(std::uint64_t)));
    sum_out_.mirror.assign(sizeof(std::uint64_t), 0);
    note_live(sizeof(std::uint64_t));
    CHECK(cuEventCreate(&sum_out_.last_use, CU_EVENT_DISABLE_TIMING));
    for (int op = 0; op < options_.ops; ++op) step();
    verify_all();
    for (Buffer& b : buffers_) release(b);
    buffers_.clear();
    release(sum_out_);
    for (CUstream s : streams_) {
      if (s != nullptr) CHECK(cuStreamDestroy(s));
    }
  }

 private:
  CUstream any_stream() { return streams_[rng_.below(streams_.size())]; }

  // Orders `stream` after the last use of `b` on another stream.
  void before(Buffer& b, CUstream stream) {
    if (b.used && b.last_stream != stream) CHECK(cuStreamWaitEvent(stream, b.last_use, 0));
  }
  void after(Buffer& b, CUstream stream) {
    CHECK(cuEventRecord(b.last_use, stream));
    b.last_stream = stream;
    b.used = true;
  }

  std::uint64_t random_size() {
    // Mostly small and medium, sometimes a few MiB: every packing case.
    switch (rng_.below(4)) {
      case 0: return 64 + rng_.below(4096);
      case 1: return 4096 + rng_.below(256 * 1024);
      case 2: return 256 * 1024 + rng_.below(1024 * 1024);
      default: return (1 + rng_.below(3)) * 1024 * 1024 + rng_.below(65536);
    }
  }

  void step() {
    g_ops.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t choice = rng_.below(100);
    if (buffers_.size() < 2 || (choice < 15 && static_cast<int>(buffers_.size()) < options_.max_live)) return allocate();
    if (choice < 22) return free_one();
    Buffer& a = buffers_[rng_.below(buffers_.size())];
    Buffer& b = buffers_[rng_.below(buffers_.size())];
    const CUstream s = any_stream();
    if (choice < 40) return fill(a, s);
    if (choice < 65 && &a != &b) return mix(a, b, s);
    if (choice < 75) return memset(a, s);
    if (choice < 85) return upload(a, s);
    return checksum(a, s);
  }

  void allocate() {
    Buffer b;
    b.mirror.assign(random_size(), 0);
    if (options_.stream_ordered) {
      const CUstream s = any_stream();
      CHECK(cuMemAllocAsync(&b.device, b.mirror.size(), s));
      CHECK(cuEventCreate(&b.last_use, CU_EVENT_DISABLE_TIMING));
      after(b, s);  // usable on other streams only after this one
      note_live(static_cast<std::int64_t>(b.mirror.size()));
      buffers_.push_back(std::move(b));
      fill(buffers_.back(), s);
      return;
    }
    CHECK(cuMemAlloc(&b.device, b.mirror.size()));
    CHECK(cuEventCreate(&b.last_use, CU_EVENT_DISABLE_TIMING));
    note_live(static_cast<std::int64_t>(b.mirror.size()));
    buffers_.push_back(std::move(b));
    fill(buffers_.back(), any_stream());
  }

  void release(Buffer& b) {
    if (options_.stream_ordered && b.used) {
      CHECK(cuMemFreeAsync(b.device, b.last_stream));  // after its last use, in stream order
    } else {
      CHECK(cuMemFree(b.device));  // synchronises: every use is done
    }
    CHECK(cuEventDestroy(b.last_use));
    note_live(-static_cast<std::int64_t>(b.mirror.size()));
  }

  void free_one() {
    const std::size_t i = rng_.below(buffers_.size());
    release(buffers_[i]);
    buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void fill(Buffer& a, CUstream s) {
    const std::uint64_t n = a.mirror.size(), seed = rng_.next() & 0xFFFF;
    before(a, s);
    void* params[] = {&a.device, const_cast<std::uint64_t*>(&n), const_cast<std::uint64_t*>(&seed)};
    CHECK(cuLaunchKernel(g_kernels.fill, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
    after(a, s);
    for (std::uint64_t i = 0; i < n; ++i) a.mirror[i] = pattern(i, seed);
  }

  void mix(Buffer& dst, Buffer& src, CUstream s) {
    const std::uint64_t n = std::min(dst.mirror.size(), src.mirror.size()), k = rng_.below(256);
    before(dst, s);
    before(src, s);
    // The packed form: one buffer of arguments, laid out as the kernel's.
    struct {
      CUdeviceptr dst, src;
      std::uint64_t n, k;
    } packed{dst.device, src.device, n, k};
    std::size_t size = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(g_kernels.mix, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
    after(dst, s);
    after(src, s);
    for (std::uint64_t i = 0; i < n; ++i) dst.mirror[i] = mixed(dst.mirror[i], src.mirror[i], k);
  }

  void memset(Buffer& a, CUstream s) {
    const std::uint64_t offset = rng_.below(a.mirror.size()), n = rng_.below(a.mirror.size() - offset) + 1;
    const auto value = static_cast<unsigned char>(rng_.below(256));
    before(a, s);
    CHECK(cuMemsetD8Async(a.device + offset, value, n, s));
    after(a, s);
    std::memset(a.mirror.data() + offset, value, n);
  }

  void upload(Buffer& a, CUstream s) {
    std::vector<std::uint8_t> fresh(a.mirror.size());
    for (auto& byte : fresh) byte = static_cast<std::uint8_t>(rng_.next());
    before(a, s);
    // From pageable memory: staged, so `fresh` may go when the call returns.
    CHECK(cuMemcpyHtoDAsync(a.device, fresh.data(), fresh.size(), s));
    after(a, s);
    a.mirror = std::move(fresh);
  }

  void checksum(Buffer& a, CUstream s) {
    before(a, s);
    before(sum_out_, s);
    SumArgs args{a.device, a.mirror.size()};
    void* params[] = {&args, &sum_out_.device};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = s;
    CHECK(cuLaunchKernelEx(&config, g_kernels.sum, params, nullptr));
    std::uint64_t got = 0;
    CHECK(cuMemcpyDtoHAsync(&got, sum_out_.device, sizeof got, s));  // pageable: returns when done
    after(a, s);
    after(sum_out_, s);
    const std::uint64_t expected = weighted_sum(a.mirror.data(), a.mirror.size());
    if (got != expected) mismatch("checksum", expected, got);
    g_checksums.fetch_add(1, std::memory_order_relaxed);
  }

  void verify_all() {
    CHECK(cuCtxSynchronize());
    for (Buffer& b : buffers_) {
      std::vector<std::uint8_t> back(b.mirror.size());
      CHECK(cuMemcpyDtoH(back.data(), b.device, back.size()));
      for (std::size_t i = 0; i < back.size(); ++i) {
        if (back[i] != b.mirror[i]) mismatch("final contents", b.mirror[i], back[i]);
      }
    }
  }

  CUcontext context_;
  Random rng_;
  const Options& options_;
  std::vector<CUstream> streams_;
  std::vector<Buffer> buffers_;
  Buffer sum_out_;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--threads") o.threads = value;
    else if (key == "--ops") o.ops = value;
    else if (key == "--seed") o.seed = static_cast<unsigned>(value);
    else if (key == "--max-live") o.max_live = value;
    else if (key == "--async") o.stream_ordered = value != 0;
    else {
      std::fprintf(stderr, "paging_stress: unknown option %s (accepted: --threads --ops --seed --max-live --async)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  if (o.threads < 1 || o.ops < 1 || o.max_live < 2) {
    std::fprintf(stderr, "paging_stress: --threads and --ops must be positive, --max-live at least 2\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  CHECK(cuInit(0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, 0));
  if (!register_kernels()) {
    std::printf("CUDA_ERROR kernels-unavailable at vgpusimRegisterKernel (this program needs the simulated driver)\n");
    return 3;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] { Worker(context, options.seed * 1000 + static_cast<unsigned>(t), options).run(); });
  }
  for (std::thread& t : threads) t.join();
  std::printf("STRESS ok threads=%d ops=%" PRIu64 " checksums=%" PRIu64 " peak_live_bytes=%" PRIu64 "\n",
              options.threads, g_ops.load(), g_checksums.load(), g_peak_live_bytes.load());
  return 0;
}
