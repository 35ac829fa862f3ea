"""Launch accounting per workload phase (research/cuda-facts.md §8.2, §8.3, §8.10).

    torch_lookups.py PHASE [--profile]

Runs ONE phase in a fresh process, so the shim's totals at exit (trace summary
"launches", "launches_by_entry_point", "lookups") belong to that phase alone.
run_all.sh runs every phase twice: once under the shim (LD_PRELOAD, VGPUMEM_TRACE)
and once without it under torch.profiler (CUPTI), which is started before any
CUDA work so it sees the same kernels the shim sees; the driver script then
compares shim launches with profiler kernels per phase. With the shim AND
--profile (one phase) it checks that the profiler works with the shim loaded.

Prints one line: RESULT {json}.
"""
import json
import os
import sys
import time

PHASES = ["elementwise", "matmul_fp32", "matmul_bf16", "conv", "sdpa", "triton", "compile"]


def run(phase, torch):
    import torch.nn.functional as F
    dev = "cuda"
    torch.manual_seed(0)
    if phase == "elementwise":
        a = torch.randn(1 << 20, device=dev)
        b = (a + 1) * 2
        c = torch.relu(b)
        return c.sum().item()
    if phase == "matmul_fp32":
        a = torch.randn(2048, 2048, device=dev)
        return (a @ a).sum().item()
    if phase == "matmul_bf16":
        a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
        return (a @ a).float().sum().item()
    if phase == "conv":
        torch.backends.cudnn.benchmark = False
        x = torch.randn(16, 32, 32, 32, device=dev, requires_grad=True)
        w = torch.randn(64, 32, 3, 3, device=dev, requires_grad=True)
        y = F.conv2d(x, w, padding=1)
        y.sum().backward()
        return (y.sum() + x.grad.sum() + w.grad.sum()).item()
    if phase == "sdpa":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q = torch.randn(4, 8, 512, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            o.float().sum().backward()
        return o.float().sum().item()
    if phase == "triton":
        import triton
        import triton.language as tl

        @triton.jit
        def add_kernel(x, y, o, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

        x = torch.ones(1 << 16, device=dev)
        o = torch.empty_like(x)
        add_kernel[(64,)](x, x, o, 1 << 16, BLOCK=1024)
        return o.sum().item()
    if phase == "compile":
        f = torch.compile(lambda t: torch.sin(t) * 2 + torch.cos(t))
        return f(torch.randn(4096, device=dev)).sum().item()
    raise SystemExit("unknown phase " + phase)


def main():
    phase = sys.argv[1]
    profile = "--profile" in sys.argv[2:]
    out = {"phase": phase, "profile": profile, "shim": bool(os.environ.get("LD_PRELOAD")), "pid": os.getpid()}
    t0 = time.time()
    import torch
    out["torch"] = torch.__version__
    try:
        if profile:
            from torch.profiler import ProfilerActivity, profile as prof
            with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                out["value"] = run(phase, torch)
                torch.cuda.synchronize()
            kinds = {}
            kernels = []
            for e in p.events():
                if e.device_type != torch.autograd.DeviceType.CUDA:
                    continue
                n = e.name.lower()
                kind = "memcpy" if "memcpy" in n else "memset" if "memset" in n else "kernel"
                kinds[kind] = kinds.get(kind, 0) + 1
                if kind == "kernel":
                    kernels.append(e.name)
            out["profiler_kernels"] = len(kernels)
            out["profiler_device_events"] = kinds
            names = {}
            for k in kernels:
                names[k[:80]] = names.get(k[:80], 0) + 1
            out["profiler_kernel_names"] = dict(sorted(names.items(), key=lambda kv: -kv[1])[:25])
        else:
            out["value"] = run(phase, torch)
            torch.cuda.synchronize()
        out["ok"] = True
    except Exception as e:  # record, never die silently
        out["ok"] = False
        out["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
    out["seconds"] = round(time.time() - t0, 2)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
