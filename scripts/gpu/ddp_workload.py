"""Two training processes on one GPU, as torchrun starts them (issue 16: each
under its own cap, each training correctly).

    torchrun --standalone --nproc_per_node 2 ddp_workload.py WORKLOAD LABEL [STEPS] [BATCH]

Each rank builds the same model as train_workload.py (same seeds), trains it
under DistributedDataParallel with the gloo backend (gloo all-reduces CUDA
tensors through the host, so nothing but the two processes' own memory is on
the device) on its own synthetic batch, and reports its losses, a SHA-256 of
its parameters (the same on both ranks after every step, DDP's promise),
step times and its peaks. Rank 0 gathers both and prints one line,
RESULT {json}, with "ranks": [rank 0's, rank 1's], and "workload" and
"max_memory_reserved" as the larger rank's, so the suite's caps work as for
one process. Nothing here knows about vgpumem: the launcher sets
LD_PRELOAD and VGPUMEM_* for both ranks (and torchrun's own agent, which
makes no CUDA call).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The same models, training step, digest and sampler as one process.
from train_workload import (build, deterministic, median_ms_second_half, nvml_peak_sampler,  # noqa: E402
                            parameters_digest, train_steps)


def main():
    workload, label = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else {"resnet50": 32, "gpt2": 2}.get(workload, 8)
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    deterministic(torch)
    dev = torch.device("cuda", 0)  # one GPU, both ranks
    torch.cuda.set_device(dev)
    mine = {"rank": rank, "limit": os.environ.get("VGPUMEM_LIMIT"),
            "shim": "vgpumem" in os.environ.get("LD_PRELOAD", "")}
    nvml, stop_nvml = nvml_peak_sampler()
    times, losses = [], []
    try:
        torch.manual_seed(0)  # the same initial weights on both ranks (DDP broadcasts rank 0's anyway)
        model, loss_of = build(workload, batch, torch, dev, data_seed=1 + rank)  # each rank its own batch
        model = model.to(dev).train()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
        train_steps(torch, ddp, opt, loss_of, steps, losses, times)
        mine.update({"ok": True, "params": parameters_digest(model),
                     "median_step_ms_second_half": median_ms_second_half(times)})
    except Exception as e:  # recorded, not hidden
        mine.update({"ok": False, "error": f"{type(e).__name__}: {str(e)[:600]}"})
    stop_nvml()
    mine.update({"losses": losses, "step_ms": [round(t * 1e3, 3) for t in times],
                 "max_memory_reserved": torch.cuda.max_memory_reserved(),
                 "nvml_process_peak": nvml["peak"], "nvml_error": nvml["error"]})
    both = [None, None]
    dist.all_gather_object(both, mine)
    if rank == 0:
        ok = all(r and r.get("ok") for r in both)
        result = {"workload": workload, "label": label, "steps": steps, "batch": batch, "ranks": both, "ok": ok,
                  "ranks_agree": ok and both[0]["params"] == both[1]["params"],
                  "max_memory_reserved": max(r["max_memory_reserved"] for r in both),
                  "losses": both[0]["losses"], "params": both[0].get("params"),
                  "median_step_ms_second_half": both[0].get("median_step_ms_second_half"),
                  "nvml_process_peak": max((r.get("nvml_process_peak") or 0) for r in both) or None}
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
