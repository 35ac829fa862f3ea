// probe_vmm: research/cuda-facts.md §8.5 and §8.6.
//   attributes_granularity  device attributes and cuMemGetAllocationGranularity
//   latency_idle/busy       cuMemCreate/Map/SetAccess/Unmap/Release for 2/20/64 MiB,
//                           idle and while a 200 ms kernel (all SMs, reading another
//                           allocation) runs on another stream
//   interference            does VMM work on the host delay or serialize an unrelated
//                           kernel + copy on stream S2 while a kernel runs on S1?
//   pointer_queries         what cuMemGetAddressRange, cuPointerGetAttribute(s) and
//                           cuIpcGetMemHandle say of a VMM mapping, mapped and after
//                           cuMemUnmap (the pager's offloaded ranges), and of cuMemAlloc
//                           memory for comparison (docs/gpu-facts.md, paging rows)
//   double_mapping          one handle mapped at two addresses and at an offset: the
//                           same bytes everywhere; export of a POSIX-FD handle
//   map_like_the_pager      what bringing a 32 MiB unit back costs, as the pager does it
//                           (16 cuMemMap of 2 MiB chunks, one cuMemSetAccess, later one
//                           cuMemUnmap), idle; under a kernel on every SM; with copies
//                           running both ways as well; with the chunks still mapped at
//                           another address (fast mode's handover); with another thread
//                           mapping and unmapping meanwhile (the reclaimer); and as one
//                           32 MiB handle. Under PyTorch on an H200 the pager's map took
//                           77-109 us per 2 MiB chunk (docs/results.md): per call, per
//                           byte, or contention?
//   unmap_while_kernel_reads (last, own process) does cuMemUnmap(A) wait for a running
//                           kernel that reads A; does that kernel then fault?
// Prints one JSON object. `probe_vmm PART` runs only that part.
#include <algorithm>
#include <atomic>
#include <vector>
#include <unistd.h>
#include <thread>

#include "common.h"

static void attributes_granularity() {
  Cuda c; if (!c.init(false)) return;
  int drv = 0; cuDriverGetVersion(&drv); emit("driver_version", fmt("%d", drv));
  char name[256] = {0}; cuDeviceGetName(name, sizeof name, c.dev); emit("device_name", q(name));
  size_t total = 0; cuDeviceTotalMem(&total, c.dev); emit("total_mem", fmt("%zu", total));
  struct A { const char* n; CUdevice_attribute a; } attrs[] = {
      {"VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED(102)", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
      {"HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED(103)", CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED},
      {"GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED(110)", CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED},
      {"MEMORY_POOLS_SUPPORTED(115)", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
      {"HOST_NUMA_ID(134)", CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID},
      {"HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED(141)", CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
      {"HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED(145)", CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
      {"ASYNC_ENGINE_COUNT(40)", CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
      {"MULTIPROCESSOR_COUNT(16)", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {"GENERIC_COMPRESSION_SUPPORTED", CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED},
  };
  std::string o = "{";
  for (auto& a : attrs) { int v = -99; CUresult r = cuDeviceGetAttribute(&v, a.a, c.dev);
    o += (o.size() > 1 ? "," : "") + q(a.n) + ":" + (r == CUDA_SUCCESS ? fmt("%d", v) : rj(r)); }
  emit("attributes", o + "}");
  int numa = 0; cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, c.dev); if (numa < 0) numa = 0;
  auto gran = [&](CUmemAllocationProp p) {
    std::string s = "{";
    for (int k = 0; k < 2; ++k) { size_t v = 0; CUresult r = cuMemGetAllocationGranularity(&v, &p, k ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED : CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      s += fmt("%s\"%s\":", k ? "," : "", k ? "recommended" : "minimum") + (r == CUDA_SUCCESS ? fmt("%zu", v) : rj(r)); }
    // Does cuMemCreate accept it (2 MiB)?
    CUmemGenericAllocationHandle h = 0; CUresult cr = cuMemCreate(&h, 2u << 20, &p, 0);
    s += ",\"create_2MiB\":" + rj(cr); if (cr == CUDA_SUCCESS) cuMemRelease(h);
    return s + "}";
  };
  CUmemAllocationProp p = prop_dev(), rdma = prop_dev(), fd = prop_dev(), both = prop_dev(), host = prop_dev(), hnuma = prop_dev();
  rdma.allocFlags.gpuDirectRDMACapable = 1;
  fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  both.allocFlags.gpuDirectRDMACapable = 1; both.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  host.location.type = CU_MEM_LOCATION_TYPE_HOST; host.location.id = 0;
  hnuma.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; hnuma.location.id = numa;
  emit("granularity", "{\"device\":" + gran(p) + ",\"device_rdma\":" + gran(rdma) + ",\"device_posix_fd\":" + gran(fd) +
                      ",\"device_rdma_posix_fd\":" + gran(both) + ",\"host\":" + gran(host) + fmt(",\"host_numa_id_%d\":", numa) + gran(hnuma) + "}");
}

static void latency(bool busy) {
  Cuda c; if (!c.init()) return;
  CUstream s; if (!TRY("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return;
  CUdeviceptr other = 0; const int other_ints = 4 << 20;
  if (!TRY("other_alloc", cuMemAlloc(&other, other_ints * sizeof(int)))) return;
  CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc = access_rw();
  emit("busy_kernel", busy ? q("spin_read 200 ms on all SMs, other stream, reading a different cuMemAlloc buffer") : "null");
  for (size_t mib : {2, 20, 64}) {
    size_t size = mib << 20; Stat res, fre, cr, mp, sa, um, rl; CUdeviceptr va = 0;
    std::string key = fmt("%zuMiB", mib); bool ok = true;
    int running_start = -1, running_end = -1;
    if (busy) {
      if (!TRY(key + "_spin", launch_spin(c, s, other, other_ints, 200.0, (unsigned)c.sms))) return;
      usleep(5000); running_start = cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
    }
    double wall0 = now_us();
    for (int rep = 0; rep < 20 && ok; ++rep) {
      CUmemGenericAllocationHandle h; double t = now_us();
      ok = ok && TRY(key, cuMemAddressReserve(&va, size, 0, 0, 0)); res.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemCreate(&h, size, &p, 0)); cr.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemMap(va, size, 0, h, 0)); mp.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemSetAccess(va, size, &acc, 1)); sa.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemUnmap(va, size)); um.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemRelease(h)); rl.add(now_us() - t); t = now_us();
      ok = ok && TRY(key, cuMemAddressFree(va, size)); fre.add(now_us() - t);
    }
    double wall = now_us() - wall0;
    if (busy) { running_end = cuStreamQuery(s) == CUDA_ERROR_NOT_READY; TRY(key + "_sync", cuStreamSynchronize(s)); }
    emit(key, "{\"create\":" + cr.json() + ",\"map\":" + mp.json() + ",\"set_access\":" + sa.json() + ",\"unmap\":" + um.json() +
                  ",\"release\":" + rl.json() + ",\"address_reserve\":" + res.json() + ",\"address_free\":" + fre.json() +
                  fmt(",\"all_reps_wall_us\":%.0f,\"kernel_running_at_start\":%d,\"kernel_running_at_end\":%d}", wall, running_start, running_end));
  }
  emit("unit", q("microseconds, 20 reps"));
}

// S2 "op": short kernel (1 ms) + 64 MiB pinned H2D copy, bracketed by events.
static void interference() {
  Cuda c; if (!c.init()) return;
  CUstream s1, s2; if (!TRY("streams", cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING)) || !TRY("streams", cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING))) return;
  size_t n = 64u << 20; void* host = nullptr; CUdeviceptr dst = 0, other = 0;
  if (!TRY("hostalloc", cuMemHostAlloc(&host, n, 0)) || !TRY("alloc", cuMemAlloc(&dst, n)) || !TRY("alloc", cuMemAlloc(&other, 1 << 20))) return;
  memset(host, 1, n);
  CUevent e0, e1; cuEventCreate(&e0, CU_EVENT_DEFAULT); cuEventCreate(&e1, CU_EVENT_DEFAULT);
  CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc = access_rw(); const size_t vsz = 64u << 20;
  // mode 0: idle; 1: S1 kernel; 2: S1 kernel + VMM loop on another host thread;
  // 3: S1 kernel + create/map/set-access right before each S2 op, unmap/release after.
  const char* names[] = {"idle", "s1_kernel", "s1_kernel_plus_vmm_thread", "s1_kernel_plus_inline_vmm"};
  emit("op", q("S2: event, 1 ms kernel (1 block), 64 MiB pinned H2D cuMemcpyAsync, event; 10 reps; S1: 200 ms kernel on 1 block"));
  for (int mode = 0; mode < 4; ++mode) {
    Stat gpu_ms, enqueue_us, wall_ms, vmm_us; int finished_while_s1_running = 0, reps = 0; bool ok = true;
    std::atomic<bool> stop{false}; std::atomic<long> vmm_iters{0}; std::thread th;
    if (mode >= 1) ok = TRY(std::string(names[mode]) + "_s1", launch_spin(c, s1, other, 1024, 200.0, 1));
    if (mode == 2) th = std::thread([&] {
      cuCtxSetCurrent(c.ctx);
      while (!stop.load()) { CUdeviceptr va; CUmemGenericAllocationHandle h;
        if (cuMemAddressReserve(&va, vsz, 0, 0, 0) != CUDA_SUCCESS) break;
        if (cuMemCreate(&h, vsz, &p, 0) == CUDA_SUCCESS) {
          if (cuMemMap(va, vsz, 0, h, 0) == CUDA_SUCCESS) { cuMemSetAccess(va, vsz, &acc, 1); cuMemUnmap(va, vsz); }
          cuMemRelease(h); }
        cuMemAddressFree(va, vsz); vmm_iters++; } });
    usleep(3000);
    for (int rep = 0; rep < 10 && ok; ++rep) {
      CUdeviceptr va = 0; CUmemGenericAllocationHandle h = 0;
      if (mode == 3) { double t = now_us();
        ok = TRY("inline_vmm", cuMemAddressReserve(&va, vsz, 0, 0, 0)) && TRY("inline_vmm", cuMemCreate(&h, vsz, &p, 0)) &&
             TRY("inline_vmm", cuMemMap(va, vsz, 0, h, 0)) && TRY("inline_vmm", cuMemSetAccess(va, vsz, &acc, 1));
        vmm_us.add(now_us() - t); if (!ok) break; }
      double t0 = now_us();
      ok = TRY("op", cuEventRecord(e0, s2)) && TRY("op", launch_spin(c, s2, 0, 0, 1.0, 1)) &&
           TRY("op", cuMemcpyAsync(dst, (CUdeviceptr)host, n, s2)) && TRY("op", cuEventRecord(e1, s2));
      enqueue_us.add(now_us() - t0);
      if (!ok || !TRY("op_sync", cuEventSynchronize(e1))) { ok = false; break; }
      wall_ms.add((now_us() - t0) / 1e3);
      if (mode >= 1 && cuStreamQuery(s1) == CUDA_ERROR_NOT_READY) finished_while_s1_running++;
      float ms = 0; if (cuEventElapsedTime(&ms, e0, e1) == CUDA_SUCCESS) gpu_ms.add(ms);
      if (mode == 3) { double t = now_us(); TRY("inline_vmm", cuMemUnmap(va, vsz)); TRY("inline_vmm", cuMemRelease(h)); TRY("inline_vmm", cuMemAddressFree(va, vsz)); vmm_us.add(now_us() - t); }
      reps++;
    }
    stop = true; if (th.joinable()) th.join();
    bool s1_still = mode >= 1 && cuStreamQuery(s1) == CUDA_ERROR_NOT_READY;
    if (mode >= 1) TRY(std::string(names[mode]) + "_s1sync", cuStreamSynchronize(s1));
    emit(names[mode], "{\"s2_gpu_ms\":" + gpu_ms.json(3) + ",\"s2_enqueue_us\":" + enqueue_us.json() + ",\"s2_wall_ms\":" + wall_ms.json(3) +
                          fmt(",\"reps\":%d,\"s2_finished_while_s1_running\":%d,\"s1_still_running_after_all_reps\":%s,\"vmm_thread_iterations\":%ld",
                              reps, finished_while_s1_running, s1_still ? "true" : "false", vmm_iters.load()) +
                          (mode == 3 ? ",\"inline_vmm_us\":" + vmm_us.json() : "") + "}");
  }
}

static void unmap_while_kernel_reads() {
  Cuda c; if (!c.init()) return;
  CUstream s; if (!TRY("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return;
  Range a; if (!make_range("range", a, 2u << 20)) return;
  if (!TRY("memset", cuMemsetD32(a.va, 7, a.size / 4))) return;
  cuCtxSynchronize();
  emit("kernel", q("spin_read on 1 block x 128 threads reading A for 300 ms, non-blocking stream"));
  if (!TRY("launch", launch_spin(c, s, a.va, (int)(a.size / 4), 300.0, 1))) return;
  usleep(20000);
  emit("kernel_running_before_unmap", cuStreamQuery(s) == CUDA_ERROR_NOT_READY ? "true" : "false");
  double t = now_us(); CUresult ru = cuMemUnmap(a.va, a.size); double unmap_us = now_us() - t;
  emit_r("unmap", ru); emit("unmap_us", fmt("%.0f", unmap_us));
  emit("unmap_waited_for_kernel", unmap_us > 250000 ? "true" : "false");
  emit("kernel_running_after_unmap", cuStreamQuery(s) == CUDA_ERROR_NOT_READY ? "true" : "false");
  t = now_us(); CUresult rs = cuStreamSynchronize(s); emit_r("stream_sync", rs); emit("stream_sync_us", fmt("%.0f", now_us() - t));
  emit("kernel_faulted", rs != CUDA_SUCCESS ? "true" : "false");
  emit_r("ctx_sync_after", cuCtxSynchronize());
  emit_r("release_after", cuMemRelease(a.h));
  CUdeviceptr x; emit_r("mem_alloc_after", cuMemAlloc(&x, 1 << 20));
}

// Queries on one address: the address range and five attributes, each as
// {"r": result, "v": value}.
static std::string queries_at(CUdeviceptr p) {
  CUdeviceptr base = 0, start = 0; size_t size = 0, range_size = 0; int ordinal = -9; unsigned type = 0;
  CUcontext ctx = nullptr;
  CUresult r_range = cuMemGetAddressRange(&base, &size, p);
  CUresult r_start = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p);
  CUresult r_size = cuPointerGetAttribute(&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
  CUresult r_ordinal = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
  CUresult r_type = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  CUresult r_ctx = cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p);
  auto v = [](CUresult r, const std::string& value) { return "{\"r\":" + rj(r) + ",\"v\":" + value + "}"; };
  return "{\"address_range\":" + v(r_range, fmt("[%llu,%zu]", (unsigned long long)base, size)) +
         ",\"range_start\":" + v(r_start, fmt("%llu", (unsigned long long)start)) +
         ",\"range_size\":" + v(r_size, fmt("%zu", range_size)) + ",\"device_ordinal\":" + v(r_ordinal, fmt("%d", ordinal)) +
         ",\"memory_type\":" + v(r_type, fmt("%u", type)) + ",\"context_is_current\":" +
         v(r_ctx, ctx == nullptr ? "null" : (ctx == [] { CUcontext c = nullptr; cuCtxGetCurrent(&c); return c; }() ? "true" : "false")) + "}";
}

static void pointer_queries() {
  Cuda c; if (!c.init(false)) return;
  const size_t reserve = 64u << 20, chunk = 2u << 20;
  CUdeviceptr va = 0; emit_r("reserve", cuMemAddressReserve(&va, reserve, chunk, 0, 0));
  emit("reservation", fmt("[%llu,%zu]", (unsigned long long)va, reserve));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = c.dev;
  CUmemGenericAllocationHandle h = 0; emit_r("create", cuMemCreate(&h, chunk, &prop, 0));
  const CUdeviceptr at = va + chunk;  // the second granule of the reservation
  emit("mapped_at", fmt("%llu", (unsigned long long)at));
  emit_r("map", cuMemMap(at, chunk, 0, h, 0));
  CUmemAccessDesc access{}; access.location = prop.location; access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  emit_r("set_access", cuMemSetAccess(at, chunk, &access, 1));
  emit("mapped", queries_at(at + 100));
  CUipcMemHandle ipc{}; emit_r("ipc_vmm_mapped", cuIpcGetMemHandle(&ipc, at));
  emit_r("unmap", cuMemUnmap(at, chunk));
  emit("unmapped", queries_at(at + 100));
  emit("never_mapped", queries_at(va + 3 * chunk));
  emit_r("ipc_vmm_unmapped", cuIpcGetMemHandle(&ipc, at));
  // One cuMemUnmap over two adjacent mappings of two handles (the pager
  // unmaps a unit's chunks in one call, falling back to one per chunk).
  CUmemGenericAllocationHandle h2 = 0; emit_r("create_second", cuMemCreate(&h2, chunk, &prop, 0));
  emit_r("map_pair_first", cuMemMap(va + 4 * chunk, chunk, 0, h, 0));
  emit_r("map_pair_second", cuMemMap(va + 5 * chunk, chunk, 0, h2, 0));
  emit_r("set_access_pair", cuMemSetAccess(va + 4 * chunk, 2 * chunk, &access, 1));
  const CUresult pair = cuMemUnmap(va + 4 * chunk, 2 * chunk);
  emit_r("unmap_pair_in_one_call", pair);
  if (pair != CUDA_SUCCESS) { cuMemUnmap(va + 4 * chunk, chunk); cuMemUnmap(va + 5 * chunk, chunk); }
  emit_r("release_second", cuMemRelease(h2));
  emit_r("release", cuMemRelease(h));
  emit_r("address_free", cuMemAddressFree(va, reserve));
  CUdeviceptr plain = 0; emit_r("mem_alloc", cuMemAlloc(&plain, chunk));
  emit("mem_alloc_queries", queries_at(plain + 100));
  emit_r("ipc_mem_alloc", cuIpcGetMemHandle(&ipc, plain));
  emit_r("mem_free", cuMemFree(plain));
}

// What the pager's paging of the program's own handles rests on: one
// physical allocation mapped at two addresses (the pager's home range and
// the program's mapping), and at an offset into it, all seeing the same
// bytes; and an export of a handle created with POSIX-FD handle types, as
// PyTorch creates them (docs/architecture.md, "The program's own virtual
// memory").
static void double_mapping() {
  Cuda c; if (!c.init(false)) return;
  const size_t chunk = 2u << 20, bytes = 2 * chunk;
  CUdeviceptr va = 0; emit_r("reserve", cuMemAddressReserve(&va, 8 * chunk, chunk, 0, 0));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = c.dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle h = 0; emit_r("create_posix_fd", cuMemCreate(&h, bytes, &prop, 0));
  emit_r("map_home", cuMemMap(va, bytes, 0, h, 0));
  emit_r("map_alias", cuMemMap(va + 4 * chunk, bytes, 0, h, 0));
  emit_r("map_at_offset", cuMemMap(va + 7 * chunk, chunk, chunk, h, 0));
  CUmemAccessDesc access{}; access.location = prop.location; access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  emit_r("set_access_home", cuMemSetAccess(va, bytes, &access, 1));
  emit_r("set_access_alias", cuMemSetAccess(va + 4 * chunk, bytes, &access, 1));
  emit_r("set_access_offset", cuMemSetAccess(va + 7 * chunk, chunk, &access, 1));
  std::vector<unsigned> in(bytes / 4), via_alias(bytes / 4, 0), via_offset(chunk / 4, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned>(i * 2654435761u);
  emit_r("write_home", cuMemcpyHtoD(va, in.data(), bytes));
  emit_r("read_alias", cuMemcpyDtoH(via_alias.data(), va + 4 * chunk, bytes));
  emit_r("read_offset", cuMemcpyDtoH(via_offset.data(), va + 7 * chunk, chunk));
  emit("alias_sees_home", via_alias == in ? "true" : "false");
  emit("offset_sees_second_half",
       std::equal(via_offset.begin(), via_offset.end(), in.begin() + chunk / 4) ? "true" : "false");
  int fd = -1;
  emit_r("export_posix_fd", cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  if (fd >= 0) close(fd);
  CUmemAllocationProp back{}; emit_r("properties", cuMemGetAllocationPropertiesFromHandle(&back, h));
  emit("properties_handle_types", fmt("%d", static_cast<int>(back.requestedHandleTypes)));
  emit_r("unmap_home", cuMemUnmap(va, bytes));
  std::fill(via_alias.begin(), via_alias.end(), 0u);
  emit_r("read_alias_after_home_unmapped", cuMemcpyDtoH(via_alias.data(), va + 4 * chunk, bytes));
  emit("alias_still_sees_it", via_alias == in ? "true" : "false");
  emit_r("unmap_alias", cuMemUnmap(va + 4 * chunk, bytes));
  emit_r("unmap_offset", cuMemUnmap(va + 7 * chunk, chunk));
  emit_r("release", cuMemRelease(h));
  emit_r("address_free", cuMemAddressFree(va, 8 * chunk));
}

static void map_like_the_pager() {
  Cuda c; if (!c.init()) return;
  constexpr size_t kChunk = 2u << 20, kUnit = 32u << 20, kChunks = kUnit / kChunk;
  CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc = access_rw();
  CUstream spin, out, in;
  if (!TRY("streams", cuStreamCreate(&spin, CU_STREAM_NON_BLOCKING)) || !TRY("streams", cuStreamCreate(&out, CU_STREAM_NON_BLOCKING)) ||
      !TRY("streams", cuStreamCreate(&in, CU_STREAM_NON_BLOCKING))) return;
  std::vector<CUmemGenericAllocationHandle> chunks(kChunks), other(kChunks);
  for (size_t i = 0; i < kChunks; ++i)
    if (!TRY("create", cuMemCreate(&chunks[i], kChunk, &p, 0)) || !TRY("create", cuMemCreate(&other[i], kChunk, &p, 0))) return;
  CUmemGenericAllocationHandle whole = 0; if (!TRY("create_whole", cuMemCreate(&whole, kUnit, &p, 0))) return;
  CUdeviceptr a = 0, b = 0, r = 0, spin_buf = 0, copy_dev = 0; void* copy_host = nullptr; const size_t copy_bytes = 64u << 20;
  if (!TRY("reserve", cuMemAddressReserve(&a, kUnit, 0, 0, 0)) || !TRY("reserve", cuMemAddressReserve(&b, kUnit, 0, 0, 0)) ||
      !TRY("reserve", cuMemAddressReserve(&r, kUnit, 0, 0, 0)) || !TRY("alloc", cuMemAlloc(&spin_buf, 16u << 20)) ||
      !TRY("alloc", cuMemAlloc(&copy_dev, 2 * copy_bytes)) || !TRY("hostalloc", cuMemHostAlloc(&copy_host, 2 * copy_bytes, 0))) return;
  // modes: 0 idle, 1 kernel on all SMs, 2 + copies both ways, 3 + chunks also mapped at b, 4 + a thread mapping/unmapping other chunks, 5 one 32 MiB handle under 2
  const char* names[] = {"idle", "kernel", "kernel_copies", "kernel_copies_double_mapped", "kernel_copies_other_thread", "one_handle_kernel_copies"};
  for (int mode = 0; mode < 6; ++mode) {
    Stat maps, set_access, unmap, per_map; bool ok = true;
    if (mode >= 1 && !TRY("spin", launch_spin(c, spin, spin_buf, 4 << 20, 400.0, (unsigned)c.sms))) return;
    if (mode >= 2) for (int i = 0; i < 100; ++i) {
      cuMemcpyAsync((CUdeviceptr)copy_host, copy_dev, copy_bytes, out);
      cuMemcpyAsync(copy_dev + copy_bytes, (CUdeviceptr)((char*)copy_host + copy_bytes), copy_bytes, in);
    }
    if (mode == 3) for (size_t i = 0; i < kChunks; ++i) ok = ok && TRY("map_b", cuMemMap(b + i * kChunk, kChunk, 0, chunks[i], 0));
    std::atomic<bool> stop{false}; std::atomic<long> churn{0}; std::thread th;
    if (mode == 4) th = std::thread([&] {
      cuCtxSetCurrent(c.ctx);
      while (!stop.load()) {
        for (size_t i = 0; i < kChunks; ++i) cuMemMap(r + i * kChunk, kChunk, 0, other[i], 0);
        cuMemSetAccess(r, kUnit, &acc, 1); cuMemUnmap(r, kUnit); churn++; } });
    usleep(5000);
    for (int rep = 0; rep < 20 && ok; ++rep) {
      double t = now_us();
      if (mode == 5) { ok = TRY("map_whole", cuMemMap(a, kUnit, 0, whole, 0)); per_map.add(now_us() - t); }
      else for (size_t i = 0; i < kChunks && ok; ++i) { double m = now_us(); ok = TRY("map", cuMemMap(a + i * kChunk, kChunk, 0, chunks[i], 0)); per_map.add(now_us() - m); }
      maps.add(now_us() - t); t = now_us();
      ok = ok && TRY("set_access", cuMemSetAccess(a, kUnit, &acc, 1)); set_access.add(now_us() - t); t = now_us();
      ok = ok && TRY("unmap", cuMemUnmap(a, kUnit)); unmap.add(now_us() - t);
    }
    stop = true; if (th.joinable()) th.join();
    const int running = cuStreamQuery(spin) == CUDA_ERROR_NOT_READY;
    if (mode == 3) TRY("unmap_b", cuMemUnmap(b, kUnit));
    TRY("sync", cuCtxSynchronize());
    emit(names[mode], "{\"maps_total\":" + maps.json() + ",\"per_map\":" + per_map.json() + ",\"set_access\":" + set_access.json() +
                      ",\"unmap\":" + unmap.json() + fmt(",\"kernel_running_at_end\":%d,\"other_thread_cycles\":%ld}", running, churn.load()));
  }
  emit("unit", q("microseconds, 20 reps of bringing one 32 MiB unit back (16 chunks of 2 MiB, or one handle)"));
}

// probe_vmm [PART]: every part, or only the one named.
int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  Parts P("probe_vmm");
  auto part = [&](const char* name, int timeout_s, const std::function<void()>& fn) {
    if (only.empty() || only == name) P.run(name, timeout_s, fn);
  };
  part("attributes_granularity", 30, attributes_granularity);
  part("latency_idle", 60, [] { latency(false); });
  part("latency_busy", 60, [] { latency(true); });
  part("interference", 60, interference);
  part("pointer_queries", 30, pointer_queries);
  part("double_mapping", 30, double_mapping);
  part("map_like_the_pager", 60, map_like_the_pager);
  part("unmap_while_kernel_reads", 30, unmap_while_kernel_reads);
  P.print();
  return 0;
}
