# §8.3/§8.10: kernels the profiler sees vs launches the shim hooked, per phase,
# each phase in a fresh process. Usage: phases.py PHASE [profile]
import os, sys, json
import torch, torch.nn.functional as F
phase, profile = sys.argv[1], len(sys.argv) > 2
dev = "cuda"; torch.manual_seed(0)
# Warm everything the phase needs outside the measured region, then synchronise.
def run():
    if phase == "elementwise":
        a = torch.randn(1 << 20, device=dev); b = (a + 1) * 2; c = torch.relu(b); return c.sum()
    if phase == "matmul_fp32":
        a = torch.randn(2048, 2048, device=dev); return (a @ a).sum()
    if phase == "matmul_bf16":
        a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16); return (a @ a).float().sum()
    if phase == "conv":
        x = torch.randn(16, 32, 32, 32, device=dev, requires_grad=True); w = torch.randn(64, 32, 3, 3, device=dev, requires_grad=True)
        y = F.conv2d(x, w, padding=1); y.sum().backward(); return y.sum()
    if phase == "sdpa":
        q = torch.randn(4, 8, 512, 64, device=dev, dtype=torch.bfloat16); return F.scaled_dot_product_attention(q, q, q).float().sum()
    if phase == "triton":
        import triton, triton.language as tl
        @triton.jit
        def k(x, o, n, B: tl.constexpr):
            i = tl.program_id(0) * B + tl.arange(0, B); m = i < n; tl.store(o + i, tl.load(x + i, mask=m) * 2, mask=m)
        x = torch.ones(1 << 16, device=dev); o = torch.empty_like(x); k[(64,)](x, o, 1 << 16, B=1024); return o.sum()
    if phase == "compile":
        f = torch.compile(lambda t: torch.sin(t) * 2 + 1)
        return f(torch.randn(4096, device=dev)).sum()
    raise SystemExit("unknown phase")
if profile:
    from torch.profiler import profile as prof, ProfilerActivity
    with prof(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        run(); torch.cuda.synchronize()
    kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    print("PHASE " + json.dumps({"phase": phase, "profiler_kernels": len(kernels)}))
else:
    run(); torch.cuda.synchronize(); print("PHASE " + json.dumps({"phase": phase, "done": True}))
