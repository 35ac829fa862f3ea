import os, sys, json, time, hashlib
import torch, torch.nn as nn, torch.nn.functional as F
mode = sys.argv[1]
out = {"mode": mode, "limit": os.environ.get("VGPUMEM_LIMIT")}
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")
free, total = torch.cuda.mem_get_info()
out["mem_get_info"] = [free, total]
out["props_total"] = torch.cuda.get_device_properties(0).total_memory
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.c1 = nn.Conv2d(3, 32, 3, padding=1); s.c2 = nn.Conv2d(32, 64, 3, padding=1); s.fc = nn.Linear(64 * 8 * 8, 10)
    def forward(s, x):
        x = F.max_pool2d(F.relu(s.c1(x)), 2); x = F.max_pool2d(F.relu(s.c2(x)), 2); return s.fc(x.flatten(1))
net = Net().to(dev); opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator(device="cpu").manual_seed(1)
X = torch.randn(64, 3, 32, 32, generator=g).to(dev); Y = torch.randint(0, 10, (64,), generator=g).to(dev)
times = []
for step in range(30):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True); loss = F.cross_entropy(net(X), Y); loss.backward(); opt.step()
    torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
out["cnn_loss"] = loss.item().hex()
h = hashlib.sha256()
for p in net.parameters(): h.update(p.detach().cpu().numpy().tobytes())
out["cnn_params_sha"] = h.hexdigest()[:16]
out["cnn_step_ms_median"] = sorted(times[5:])[len(times[5:]) // 2] * 1e3
a = torch.randn(1024, 1024, device=dev); out["mm32"] = (a @ a).sum().item().hex()
b = a.bfloat16(); out["mm16"] = float((b @ b).float().sum().item())
q = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16)
out["sdpa"] = float(F.scaled_dot_product_attention(q, q, q).float().sum().item())
try:
    import triton, triton.language as tl
    @triton.jit
    def add_k(x, y, o, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK); m = i < n
        tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
    x = torch.ones(4096, device=dev); o = torch.empty_like(x); add_k[(4,)](x, x, o, 4096, BLOCK=1024)
    out["triton"] = float(o.sum().item())
except Exception as e:
    out["triton"] = "error: %r" % (e,)
torch.cuda.synchronize()
try:
    big = torch.empty(int(6 * 2**30), dtype=torch.uint8, device=dev)
    out["big_alloc"] = "succeeded"
    del big
except torch.OutOfMemoryError as e:
    out["big_alloc"] = "OutOfMemoryError: " + str(e).split("\n")[0][:300]
out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
print("RESULT " + json.dumps(out), flush=True)
