# Trains an MLP whose parameters, gradients and AdamW state (about 6 GiB)
# exceed a 4 GiB cap, for a few steps, and prints one RESULT line: the final
# loss (exact, hex), a hash of every parameter, the median step time, and what
# PyTorch saw of the device. Run with and without the shim and compare.
#   torch_paging.py LABEL [STEPS]
import hashlib, json, os, sys, time
import torch

label = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
d, layers, batch = 8192, 6, 512

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU()) for _ in range(layers)]).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1)
x = torch.randn(batch, d, generator=g).to(dev)
y = torch.randn(batch, d, generator=g).to(dev)

times = []
result = {"label": label, "limit": os.environ.get("VGPUMEM_LIMIT"),
          "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), "mem_get_info": torch.cuda.mem_get_info()}
try:
    for _ in range(steps):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    warm = sorted(times[1:]) or times
    result.update({"ok": True, "loss": loss.item().hex(), "params": h.hexdigest()[:16],
                   "step_ms": [round(t * 1e3, 2) for t in times], "median_step_ms": round(warm[len(warm) // 2] * 1e3, 2),
                   "max_memory_reserved": torch.cuda.max_memory_reserved()})
except Exception as e:  # an OOM or anything else: recorded, not hidden
    result.update({"ok": False, "error": f"{type(e).__name__}: {str(e)[:400]}"})
print("RESULT " + json.dumps(result), flush=True)
