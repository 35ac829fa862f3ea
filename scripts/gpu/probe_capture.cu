// probe_capture: research/cuda-facts.md §8.9. Thread A captures stream CS in
// CU_STREAM_CAPTURE_MODE_GLOBAL (cuStreamBeginCapture_v2); while the capture is
// open, thread B (its own non-blocking stream BS) makes ONE call. Per call:
// the call's result, A's capture status right after it, and whether
// cuStreamEndCapture succeeded (or the capture ended INVALIDATED). Then the same
// with thread B switched to CU_STREAM_CAPTURE_MODE_RELAXED
// (cuThreadExchangeStreamCaptureMode). Each call gets its own capture so its
// effect is attributable; preconditions are set up outside the capture window.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common.h"

struct Gate {  // tiny two-thread barrier on an int phase
  std::mutex m; std::condition_variable cv; int phase = 0;
  void set(int p) { { std::lock_guard<std::mutex> l(m); phase = p; } cv.notify_all(); }
  bool wait(int p) { std::unique_lock<std::mutex> l(m); return cv.wait_for(l, std::chrono::seconds(10), [&] { return phase >= p; }); }
};

static const char* status_name(CUstreamCaptureStatus s) {
  return s == CU_STREAM_CAPTURE_STATUS_NONE ? "NONE" : s == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "ACTIVE" : s == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "INVALIDATED" : "?";
}

static void run(bool relaxed) {
  Cuda c; if (!c.init()) return;
  CUstream cs, bs;
  if (!TRY("streams", cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING)) || !TRY("streams", cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING))) return;
  CUdeviceptr buf; if (!TRY("buf", cuMemAlloc(&buf, 1 << 20))) return;
  void* pinned = nullptr; if (!TRY("pinned", cuMemHostAlloc(&pinned, 1 << 20, 0))) return;
  std::vector<char> pageable(1 << 20, 1);
  const size_t sz = 2u << 20; CUmemAllocationProp prop = prop_dev(); CUmemAccessDesc acc = access_rw();

  struct Op { const char* name; std::function<void()> prep; std::function<CUresult()> call; std::function<void()> clean; };
  // State shared by an op's prep/call/clean (all run on thread B).
  CUdeviceptr va = 0; CUmemGenericAllocationHandle h = 0; CUdeviceptr d = 0; CUevent ev = nullptr;
  auto reserve = [&] { cuMemAddressReserve(&va, sz, 0, 0, 0); };
  auto create = [&] { cuMemCreate(&h, sz, &prop, 0); };
  auto map = [&] { cuMemMap(va, sz, 0, h, 0); cuMemSetAccess(va, sz, &acc, 1); };
  auto unmap_all = [&] { cuMemUnmap(va, sz); cuMemRelease(h); cuMemAddressFree(va, sz); va = 0; h = 0; };
  std::vector<Op> ops = {
      {"cuMemAddressReserve", [] {}, [&] { return cuMemAddressReserve(&va, sz, 0, 0, 0); }, [&] { if (va) cuMemAddressFree(va, sz); va = 0; }},
      {"cuMemCreate", [] {}, [&] { return cuMemCreate(&h, sz, &prop, 0); }, [&] { if (h) cuMemRelease(h); h = 0; }},
      {"cuMemMap", [&] { reserve(); create(); }, [&] { return cuMemMap(va, sz, 0, h, 0); }, [&] { unmap_all(); }},
      {"cuMemSetAccess", [&] { reserve(); create(); cuMemMap(va, sz, 0, h, 0); }, [&] { return cuMemSetAccess(va, sz, &acc, 1); }, [&] { unmap_all(); }},
      {"cuMemUnmap", [&] { reserve(); create(); map(); }, [&] { return cuMemUnmap(va, sz); }, [&] { cuMemRelease(h); cuMemAddressFree(va, sz); }},
      {"cuMemRelease", [&] { create(); }, [&] { return cuMemRelease(h); }, [] {}},
      {"cuMemcpyAsync_pinned_own_stream", [&] { reserve(); create(); map(); }, [&] { return cuMemcpyAsync(va, (CUdeviceptr)pinned, 1 << 20, bs); },
       [&] { cuStreamSynchronize(bs); unmap_all(); }},
      {"cuMemcpyHtoDAsync_pageable_own_stream", [] {}, [&] { return cuMemcpyHtoDAsync(buf, pageable.data(), 1 << 20, bs); }, [&] { cuStreamSynchronize(bs); }},
      {"cuMemcpyDtoHAsync_pinned_own_stream", [] {}, [&] { return cuMemcpyDtoHAsync(pinned, buf, 1 << 20, bs); }, [&] { cuStreamSynchronize(bs); }},
      {"cuLaunchKernel_own_stream", [] {}, [&] { return launch_touch(c, bs, buf, 1024); }, [&] { cuStreamSynchronize(bs); }},
      {"cuEventRecord_own_stream", [&] { cuEventCreate(&ev, 0); }, [&] { return cuEventRecord(ev, bs); }, [&] { cuEventSynchronize(ev); cuEventDestroy(ev); }},
      {"cuEventQuery", [&] { cuEventCreate(&ev, 0); cuEventRecord(ev, bs); cuEventSynchronize(ev); }, [&] { return cuEventQuery(ev); }, [&] { cuEventDestroy(ev); }},
      {"cuEventSynchronize", [&] { cuEventCreate(&ev, 0); launch_touch(c, bs, buf, 1024); cuEventRecord(ev, bs); }, [&] { return cuEventSynchronize(ev); },
       [&] { cuEventSynchronize(ev); cuEventDestroy(ev); }},
      {"cuStreamQuery_own_stream", [] {}, [&] { return cuStreamQuery(bs); }, [] {}},
      {"cuStreamSynchronize_own_stream", [&] { launch_touch(c, bs, buf, 1024); }, [&] { return cuStreamSynchronize(bs); }, [&] { cuStreamSynchronize(bs); }},
      {"cuMemAlloc", [] {}, [&] { return cuMemAlloc(&d, 1 << 20); }, [&] { if (d) cuMemFree(d); d = 0; }},
      {"cuMemFree", [&] { cuMemAlloc(&d, 1 << 20); }, [&] { return cuMemFree(d); }, [&] { d = 0; }},
      {"cuMemAllocAsync_own_stream", [] {}, [&] { return cuMemAllocAsync(&d, 1 << 20, bs); }, [&] { if (d) cuMemFreeAsync(d, bs); cuStreamSynchronize(bs); d = 0; }},
      {"cuMemHostAlloc", [] {}, [&] { void* p = nullptr; CUresult r = cuMemHostAlloc(&p, 1 << 20, 0); if (p) cuMemFreeHost(p); return r; }, [] {}},
      {"cuMemGetInfo", [] {}, [&] { size_t f, t; return cuMemGetInfo(&f, &t); }, [] {}},
      {"cuCtxSynchronize", [] {}, [&] { return cuCtxSynchronize(); }, [] {}},
  };
  emit("thread_b_mode", q(relaxed ? "RELAXED (cuThreadExchangeStreamCaptureMode)" : "GLOBAL (default, unchanged)"));
  for (auto& op : ops) {
    Gate g; CUresult call_r = CUDA_SUCCESS, begin_r = CUDA_SUCCESS, end_r = CUDA_SUCCESS, launch1 = CUDA_SUCCESS, launch2 = CUDA_SUCCESS, xr = CUDA_SUCCESS;
    CUstreamCaptureStatus st_b = CU_STREAM_CAPTURE_STATUS_NONE, st_a = CU_STREAM_CAPTURE_STATUS_NONE; CUresult qb = CUDA_SUCCESS;
    bool timed_out = false;
    std::thread b([&] {
      cuCtxSetCurrent(c.ctx);
      if (relaxed) { CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED; xr = cuThreadExchangeStreamCaptureMode(&m); }
      op.prep(); cuStreamSynchronize(bs);
      g.set(1);
      if (!g.wait(2)) { timed_out = true; g.set(3); return; }
      call_r = op.call();
      qb = cuStreamIsCapturing(cs, &st_b);
      g.set(3);
      g.wait(4);
      op.clean();
    });
    if (!g.wait(1)) timed_out = true;
    begin_r = cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch1 = launch_touch(c, cs, buf, 1024);
    g.set(2);
    if (!g.wait(3)) timed_out = true;
    launch2 = launch_touch(c, cs, buf, 1024);
    cuStreamIsCapturing(cs, &st_a);
    CUgraph graph = nullptr; end_r = cuStreamEndCapture(cs, &graph);
    if (graph) cuGraphDestroy(graph);
    g.set(4); b.join();
    cuCtxSynchronize();  // clears nothing sticky; capture errors are not sticky
    emit(op.name,
           fmt("{\"call\":%s,\"status_seen_by_b\":\"%s\",\"status_before_end\":\"%s\",\"end_capture\":%s,\"invalidated\":%s,\"begin\":%s,\"a_launch_before\":%s,\"a_launch_after\":%s%s%s}",
               rj(call_r).c_str(), qb == CUDA_SUCCESS ? status_name(st_b) : ename(qb), status_name(st_a), rj(end_r).c_str(),
               (st_a == CU_STREAM_CAPTURE_STATUS_INVALIDATED || end_r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) ? "true" : "false", rj(begin_r).c_str(),
               rj(launch1).c_str(), rj(launch2).c_str(), relaxed ? (",\"exchange_mode\":" + rj(xr)).c_str() : "", timed_out ? ",\"timed_out\":true" : ""));
  }
  emit_r("ctx_sync_at_end", cuCtxSynchronize());
}

int main() {
  Parts P("probe_capture");
  P.run("thread_b_global", 60, [] { run(false); });
  P.run("thread_b_relaxed", 60, [] { run(true); });
  P.print();
  return 0;
}
