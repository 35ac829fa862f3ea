"""One unmodified-style training run of a standard workload, for comparing
runs with and without vgpumem bit for bit.

    train_workload.py WORKLOAD LABEL [STEPS] [BATCH] [MEMORY]

WORKLOAD: resnet50, vgg16 (torchvision), bert (a BERT-large-style encoder),
gpt2 (a GPT-2-medium-style decoder), both from `transformers` with random
weights. MEMORY: plain (the default), or one of the ways PyTorch itself
saves device memory that vgpumem is compared against at equal peak:
save_on_cpu (torch.autograd.graph.save_on_cpu around the forward pass, pinned)
or checkpoint (activation checkpointing: each ResNet bottleneck, VGG's
feature stack in four segments, transformers' own gradient checkpointing;
non-reentrant; batch norm's running statistics see the recomputed forward
too, so parameters after the step are not comparable bit for bit with plain,
the loss is). Synthetic data, fixed seeds, bf16 autocast, AdamW (PyTorch's default
foreach kernels, whose pointer tables the shim must follow), deterministic
algorithms where PyTorch offers them (warn_only: ResNet's 1x1 adaptive
average pool has no deterministic backward, but each input gets exactly one
atomic add onto zero, so it is deterministic anyway; the comparison of two
runs without the shim is what proves it). Attention is `eager` so that its
backward has no atomics.

Nothing here knows about vgpumem: the launcher sets LD_PRELOAD, VGPUMEM_*,
PYTORCH_CUDA_ALLOC_CONF. Prints one line, RESULT {json}: the loss of every
step (exact, float.hex), a SHA-256 of every parameter after the last step,
step times, PyTorch's and NVML's view of device memory.
"""
import hashlib
import json
import os
import sys
import threading
import time


def nvml_peak_sampler():
    """Samples this process's device memory as NVML sees it (the physical
    bytes, whatever the shim reports to PyTorch) every 5 ms in a thread."""
    state = {"peak": None, "error": None, "samples": 0}
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        pid = os.getpid()
    except Exception as e:  # recorded, never fatal
        state["error"] = f"{type(e).__name__}: {e}"[:200]
        return state, lambda: None
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if p.pid == pid and p.usedGpuMemory is not None:
                        state["peak"] = max(state["peak"] or 0, p.usedGpuMemory)
                state["samples"] += 1
            except Exception as e:
                state["error"] = f"{type(e).__name__}: {e}"[:200]
                return
            stop.wait(0.005)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return state, lambda: (stop.set(), t.join(1.0))


def build(workload, batch, torch, dev, data_seed=1):
    """The model (its weights from the global generator), a function (model) -> loss on fixed synthetic
    data drawn from a generator seeded with `data_seed`."""
    g = torch.Generator().manual_seed(data_seed)
    if workload in ("resnet50", "vgg16"):
        import torchvision
        model = getattr(torchvision.models, workload)(weights=None, num_classes=1000)
        x = torch.randn(batch, 3, 224, 224, generator=g).to(dev)
        y = torch.randint(0, 1000, (batch,), generator=g).to(dev)
        return model, lambda m: torch.nn.functional.cross_entropy(m(x), y)
    import transformers
    transformers.logging.set_verbosity_error()
    seq = 512 if workload == "bert" else 1024

    def eager_config(cls, **kw):
        try:
            return cls(attn_implementation="eager", **kw)
        except TypeError:  # a transformers that takes no such argument
            cfg = cls(**kw)
            cfg._attn_implementation = "eager"
            return cfg
    if workload == "bert":
        cfg = eager_config(transformers.BertConfig, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                           intermediate_size=4096, max_position_embeddings=512)
        model = transformers.BertForMaskedLM(cfg)
    elif workload == "gpt2":
        cfg = eager_config(transformers.GPT2Config, n_embd=1024, n_layer=24, n_head=16, n_positions=1024)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        raise SystemExit(f"unknown workload {workload!r}: expected resnet50, vgg16, bert or gpt2")
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(dev)
    return model, lambda m: m(input_ids=ids, labels=ids).loss


def checkpointed(torch, inner, segments=None):
    """`inner` wrapped so that its activations are recomputed in the backward pass (in `segments` if given)."""
    import torch.utils.checkpoint as cp

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            if segments:
                return cp.checkpoint_sequential(self.inner, segments, x, use_reentrant=False)
            return cp.checkpoint(self.inner, x, use_reentrant=False)
    return Checkpointed()


def with_memory_mode(mode, workload, model, loss_of, torch):
    """loss_of under MEMORY (see the module's docstring); the model is changed in place for checkpoint."""
    if mode == "plain":
        return loss_of
    if mode == "save_on_cpu":
        def saved_on_cpu(m):
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                return loss_of(m)
        return saved_on_cpu
    if mode != "checkpoint":
        raise SystemExit(f"unknown memory mode {mode!r}: expected plain, save_on_cpu or checkpoint")
    if workload == "resnet50":
        for name in ("layer1", "layer2", "layer3", "layer4"):
            layer = getattr(model, name)
            for i in range(len(layer)):
                layer[i] = checkpointed(torch, layer[i])
    elif workload == "vgg16":
        model.features = checkpointed(torch, model.features, segments=4)
    else:
        try:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:  # a transformers without the keyword
            model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return loss_of


def deterministic(torch):
    """Deterministic algorithms where PyTorch offers them, no TF32: runs comparable bit for bit."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def train_steps(torch, model, opt, loss_of, steps, losses, times):
    """`steps` timed steps of bf16-autocast training, each loss (exact, float.hex) and time appended as it
    comes, so that what ran before an error is kept."""
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(model)
        loss.backward()
        opt.step()
        losses.append(loss.item().hex())  # synchronises
        times.append(time.perf_counter() - t0)


def parameters_digest(model):
    """The first 16 hex digits of a SHA-256 of every parameter, in order."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def median_ms_second_half(times):
    tail = sorted(times[len(times) // 2:])
    return round(tail[len(tail) // 2] * 1e3, 3)


def main():
    workload, label = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    default_batch = {"resnet50": 64, "vgg16": 32, "bert": 8, "gpt2": 8}
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else default_batch.get(workload, 8)
    memory = sys.argv[5] if len(sys.argv) > 5 else "plain"
    result = {"workload": workload, "label": label, "steps": steps, "batch": batch,
              "limit": os.environ.get("VGPUMEM_LIMIT"), "policy": os.environ.get("VGPUMEM_POLICY"),
              "check": os.environ.get("VGPUMEM_CHECK"), "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
              "shim": "vgpumem" in os.environ.get("LD_PRELOAD", ""), "memory": memory}
    t_start = time.perf_counter()
    import torch
    deterministic(torch)
    dev = torch.device("cuda")
    result["mem_get_info"] = list(torch.cuda.mem_get_info())
    nvml, stop_nvml = nvml_peak_sampler()
    torch.manual_seed(0)
    times, losses = [], []
    try:
        model, loss_of = build(workload, batch, torch, dev)
        loss_of = with_memory_mode(memory, workload, model, loss_of, torch)
        model = model.to(dev).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        result["parameters"] = sum(p.numel() for p in model.parameters())
        result["attention"] = getattr(getattr(model, "config", None), "_attn_implementation", None)
        train_steps(torch, model, opt, loss_of, steps, losses, times)
        result.update({"ok": True, "params": parameters_digest(model), "final_loss": losses[-1]})
        result["median_step_ms_second_half"] = median_ms_second_half(times)
    except Exception as e:  # an OOM or anything else: recorded, not hidden
        result.update({"ok": False, "error": f"{type(e).__name__}: {str(e)[:600]}"})
    stop_nvml()
    result.update({"losses": losses, "step_ms": [round(t * 1e3, 3) for t in times],
                   "max_memory_reserved": torch.cuda.max_memory_reserved(),
                   "max_memory_allocated": torch.cuda.max_memory_allocated(),
                   "nvml_process_peak": nvml["peak"], "nvml_samples": nvml["samples"], "nvml_error": nvml["error"],
                   "wall_s": round(time.perf_counter() - t_start, 2)})
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
