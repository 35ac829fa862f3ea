#!/usr/bin/env python3
"""Does the simulated driver reproduce what paging cost on the H200?

On 2026-11-27 an H200 trained ResNet-50 (batch 64) and a GPT-2-medium-style
decoder (batch 4, eager attention) under vgpumem `lru` at half their peak,
with the pager's settings of that day (2 MiB chunks, each its own physical
allocation): 9.15x and 18.8x the uncapped step (docs/results.md). This runs
the layered workloads shaped like them on the simulated driver with the
pager's settings of that run, under a cost model (`calibrated`, the default,
and `idle`, the model before it), and prints step / uncapped beside the
H200's.

What is set to the H200's and why:
  * the link: 49 GB/s each way (the pager's own copies on the H200 measured
    48 to the host, 49-50 back);
  * kernel durations: scaled (VGPUSIM_KERNEL_TIME_SCALE) so the workload's
    uncapped step is the H200's uncapped step (36.06 ms, 156.75 ms): the
    question is step / uncapped, and the layered models' kernels are an
    idealised roofline, faster than PyTorch's;
  * the pager: VGPUMEM_BLOCK_BYTES=2MiB, VGPUMEM_PIECE_BYTES=off, the cap half
    the workload's peak.
GPT-2 runs with fewer layers than 24 (--layers) where the machine has too
little memory for the full model: every buffer keeps its full size, so every
unit its full number of handles; the time scale is taken from the full model.

The workloads issue a step as PyTorch did on the H200: backward from a second
thread on the same stream, per-step tensors from a caching allocator whose
placements alternate between steps (--trainer-args, the default), GPT-2 with
eager attention (the H200 run's).

Usage: scripts/sim/h200_paging.py BUILD_DIR OUT_DIR [--models resnet50,gpt2]
       [--gpt2-layers 6] [--steps 6] [--cost-models calibrated,idle]
       [--trainer-args "--backward-thread --allocator caching"]
Writes OUT_DIR/h200_paging.json and prints a markdown table.
"""
import argparse
import json
import os
import re
import subprocess
import sys

H200 = {  # docs/results.md, 2026-11-27, median step of the second half
    "resnet50": {"uncapped_ms": 36.06, "lru_ms": 329.9, "ratio": 9.15},
    "gpt2": {"uncapped_ms": 156.75, "lru_ms": 2946.0, "ratio": 18.8},
}
LINK_GBPS = "49"


def trainer_args(model, layers):
    if model == "resnet50":
        return ["--model", "resnet50", "--batch", "64"]
    args = ["--model", "gpt2-medium", "--batch", "4", "--attention", "eager"]
    if layers:
        args += ["--layers", str(layers)]
    return args


def run(cmd, env, timeout):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    text = out.stdout + out.stderr
    match = re.search(r"^RESULT (.*)$", text, re.M)
    if out.returncode != 0 or match is None:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {out.returncode}):\n{text[-3000:]}")
    return dict(kv.split("=", 1) for kv in match.group(1).split()), text


def compute_ms(trainer, args):
    out = subprocess.run([trainer] + args + ["--scale", "1", "--describe"], capture_output=True, text=True, check=True)
    match = re.search(r"compute per step ([0-9.]+) ms", out.stdout)
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--models", default="resnet50,gpt2")
    parser.add_argument("--gpt2-layers", type=int, default=6)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--cost-models", default="calibrated,idle")
    parser.add_argument("--trainer-args", default="--backward-thread --allocator caching",
                        help="trainer options that make the step PyTorch's (the default), or '' for one thread")
    parser.add_argument("--timeout", type=int, default=1800)
    o = parser.parse_args()
    build = os.path.abspath(o.build)
    trainer = os.path.join(build, "bin", "layered_trainer")
    shim = os.path.join(build, "lib", "libvgpumem.so")
    sim_dir = os.path.join(build, "lib", "sim")
    os.makedirs(o.out, exist_ok=True)
    extra = o.trainer_args.split()
    rows = []
    for model in o.models.split(","):
        full = trainer_args(model, None) + extra
        args = trainer_args(model, o.gpt2_layers if model == "gpt2" else None) + extra
        # The compute of the full model against the H200's uncapped step: the
        # trainer's per-step overhead (batch upload, loss read) is small.
        time_scale = H200[model]["uncapped_ms"] / compute_ms(trainer, full)
        for cost_model in o.cost_models.split(","):
            base = dict(os.environ)
            base.update({
                "LD_LIBRARY_PATH": sim_dir + ":" + base.get("LD_LIBRARY_PATH", ""),
                "VGPUSIM_DEVICE_MEMORY": "64GiB",
                "VGPUSIM_LINK_GBPS": LINK_GBPS,
                "VGPUSIM_COST_MODEL": cost_model,
                "VGPUSIM_KERNEL_TIME_SCALE": f"{time_scale:.6f}",
            })
            cmd = [trainer] + args + ["--scale", "1", "--steps", str(o.steps)]
            uncapped, _ = run(cmd, base, o.timeout)
            peak = int(uncapped["peak_device_bytes_wanted"])
            cap = peak // 2
            env = dict(base)
            trace = os.path.join(o.out, f"{model}-{cost_model}-lru50.trace.json")
            report = os.path.join(o.out, f"{model}-{cost_model}-lru50.simulator.json")
            env.update({
                "LD_PRELOAD": shim,
                "VGPUMEM_DRIVER": os.path.join(sim_dir, "libcuda.so.1"),
                "VGPUMEM_LIMIT": str(cap),
                "VGPUMEM_POLICY": "lru",
                "VGPUMEM_BLOCK_BYTES": "2MiB",
                "VGPUMEM_PIECE_BYTES": "off",
                "VGPUMEM_TRACE": trace,
                "VGPUSIM_REPORT": report,
            })
            capped, _ = run(cmd, env, o.timeout)
            step_un = float(uncapped["step_ns"]) / 1e6
            step_lru = float(capped["step_ns"]) / 1e6
            same = (uncapped["loss"], uncapped["weights_fnv1a"]) == (capped["loss"], capped["weights_fnv1a"])
            row = {
                "workload": model, "cost_model": cost_model, "trainer": cmd[1:], "kernel_time_scale": time_scale,
                "peak_bytes": peak, "cap_bytes": cap, "uncapped_ms": step_un, "lru_ms": step_lru,
                "ratio": step_lru / step_un, "h200_ratio": H200[model]["ratio"],
                "within_25pct": abs(step_lru / step_un / H200[model]["ratio"] - 1) <= 0.25,
                "bit_identical": same, "moved_in_bytes": int(capped["copied_in"]),
                "moved_out_bytes": int(capped["copied_out"]),
            }
            try:
                summary = json.load(open(trace))["vgpumem"]["paging"]
                row["host_time_ns"] = summary.get("host_time_ns")
            except (OSError, KeyError, ValueError):
                pass
            try:
                sim = json.load(open(report))
                row["driver_lock_waited_ns"] = sim.get("driver_lock_waited_ns")
            except (OSError, ValueError):
                pass
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(o.out, "h200_paging.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print("| workload | cost model | uncapped | `lru` at half | × uncapped | H200 × uncapped | within ±25 % | moved in / out per step | bit-identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['cost_model']} | {r['uncapped_ms']:.2f} ms | {r['lru_ms']:.1f} ms | "
              f"{r['ratio']:.2f} | {r['h200_ratio']:.2f} | {'yes' if r['within_25pct'] else 'no'} | "
              f"{r['moved_in_bytes'] / 1e9:.2f} / {r['moved_out_bytes'] / 1e9:.2f} GB | {'yes' if r['bit_identical'] else 'NO'} |")
    return 0 if all(r["bit_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
