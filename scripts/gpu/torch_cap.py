"""PyTorch under the shim's cap: bit-identity, OOM behaviour, step time.

    torch_cap.py MODE

MODE is only a label. run_all.sh runs it without the shim, under the shim
without a cap, under VGPUMEM_LIMIT=4GiB, and under the cap with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and backend:cudaMallocAsync.
It reports torch.cuda.mem_get_info() (total must equal the cap), trains a CNN
and a small transformer (fixed seed, deterministic algorithms; the launcher
sets CUBLAS_WORKSPACE_CONFIG=:4096:8) for STEPS steps each and prints the final
losses (exact, float.hex) and parameter hashes (must be bit-identical across
modes) and the median step time; then a 3 GiB allocation (fits a 4 GiB cap) and
a 6 GiB one (must raise torch.OutOfMemoryError under the cap).

Prints one line: RESULT {json}. Keys mode, cnn_loss, cnn_params_sha,
cnn_step_ms_median, mem_get_info, big_alloc are kept from the earlier version
of this script.
"""
import hashlib
import json
import os
import sys
import time

STEPS = int(os.environ.get("TORCH_CAP_STEPS", "50"))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "run"
    out = {"mode": mode, "limit": os.environ.get("VGPUMEM_LIMIT"), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
           "shim": bool(os.environ.get("LD_PRELOAD")), "steps": STEPS}
    t_start = time.time()
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    out["torch"] = torch.__version__
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")

    def step_errors(name, fn):
        try:
            fn()
        except Exception as e:
            out[name + "_error"] = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:400])

    free, total = torch.cuda.mem_get_info()
    out["mem_get_info"] = [free, total]
    out["props_total"] = torch.cuda.get_device_properties(0).total_memory

    def params_hash(model):
        h = hashlib.sha256()
        for p in model.parameters():
            h.update(p.detach().cpu().numpy().tobytes())
        return h.hexdigest()[:16]

    def train(prefix, model, batch, loss_fn, opt):
        times = []
        for _ in range(STEPS):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model, batch)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        warm = sorted(times[10:]) or sorted(times)
        out[prefix + "_loss"] = loss.item().hex()
        out[prefix + "_params_sha"] = params_hash(model)
        out[prefix + "_step_ms_median"] = round(warm[len(warm) // 2] * 1e3, 4)
        out[prefix + "_step_ms_min"] = round(warm[0] * 1e3, 4)

    def cnn():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 8 * 8, 10)).to(dev)
        g = torch.Generator().manual_seed(1)
        X = torch.randn(64, 3, 32, 32, generator=g).to(dev)
        Y = torch.randint(0, 10, (64,), generator=g).to(dev)
        train("cnn", net, (X, Y), lambda m, b: F.cross_entropy(m(b[0]), b[1]), torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))

    def transformer():
        torch.manual_seed(0)

        class Tiny(nn.Module):
            def __init__(self, vocab=1000, d=256, layers=4):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True), layers)
                self.out = nn.Linear(d, vocab)

            def forward(self, x):
                return self.out(self.enc(self.emb(x)))

        m = Tiny().to(dev)
        g = torch.Generator().manual_seed(2)
        tok = torch.randint(0, 1000, (32, 128), generator=g).to(dev)
        train("transformer", m, tok, lambda mm, t: F.cross_entropy(mm(t[:, :-1]).flatten(0, 1), t[:, 1:].flatten()),
              torch.optim.AdamW(m.parameters(), lr=1e-3))

    def extras():
        a = torch.randn(1024, 1024, device=dev, generator=torch.Generator(device="cuda").manual_seed(3))
        out["mm32"] = (a @ a).sum().item().hex()
        out["mm16"] = (a.bfloat16() @ a.bfloat16()).float().sum().item().hex()
        qk = a[:512].reshape(1, 8, 64, 1024)[..., :64].contiguous().bfloat16()
        out["sdpa"] = F.scaled_dot_product_attention(qk, qk, qk).float().sum().item().hex()

    def triton_add():
        import triton
        import triton.language as tl

        @triton.jit
        def add_k(x, y, o, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

        x = torch.arange(4096, device=dev, dtype=torch.float32)
        o = torch.empty_like(x)
        add_k[(4,)](x, x, o, 4096, BLOCK=1024)
        out["triton"] = o.sum().item().hex()

    step_errors("cnn", cnn)
    step_errors("transformer", transformer)
    step_errors("extras", extras)
    step_errors("triton", triton_add)
    torch.cuda.synchronize()

    for name, gib in (("alloc_3g", 3), ("big_alloc", 6)):
        try:
            t = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=dev)
            t.fill_(1)
            torch.cuda.synchronize()
            out[name] = "succeeded"
            del t
        except torch.OutOfMemoryError as e:
            out[name] = "OutOfMemoryError: " + str(e).split("\n")[0][:300]
        except Exception as e:
            out[name] = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:300])
        torch.cuda.empty_cache()
    # Still usable after the OOM?
    try:
        out["after_oom_matmul"] = (torch.ones(256, 256, device=dev) @ torch.ones(256, 256, device=dev)).sum().item()
    except Exception as e:
        out["after_oom_matmul"] = "%s: %s" % (type(e).__name__, str(e)[:200])
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    out["seconds"] = round(time.time() - t_start, 2)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
