#!/usr/bin/env python3
"""A stand-in for scripts/gpu/train_workload.py that needs no GPU, for the
suite's own test: the same arguments and RESULT line, from a memory model.

    gpu_suite_stand_in.py WORKLOAD LABEL STEPS BATCH [MEMORY]

A step needs FIXED + BATCH * PER_SAMPLE * SAVED[MEMORY] bytes. Under a cap
(VGPUMEM_LIMIT) with VGPUMEM_POLICY=off, a step that needs more fails as
PyTorch's out-of-memory error does; under a paging policy it trains, slower
by what does not fit. Losses and parameters are the same in every run.
"""
import json
import os
import sys

MIB = 1 << 20
FIXED = 0  # so that PyTorch alone fits the ladder's second batch under half the peak
PER_SAMPLE = 50 * MIB
SAVED = {"plain": 1.0, "save_on_cpu": 0.5, "checkpoint": 0.25}


def main():
    workload, label, steps, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    memory = sys.argv[5] if len(sys.argv) > 5 else "plain"
    need = FIXED + int(batch * PER_SAMPLE * SAVED[memory])
    limit = int(os.environ["VGPUMEM_LIMIT"]) if os.environ.get("VGPUMEM_LIMIT") else None
    policy = os.environ.get("VGPUMEM_POLICY")
    result = {"workload": workload, "label": label, "steps": steps, "batch": batch, "memory": memory,
              "limit": os.environ.get("VGPUMEM_LIMIT"), "policy": policy}
    if limit is not None and need > limit and policy == "off":
        result.update(ok=False, error=f"OutOfMemoryError: CUDA out of memory. Tried to allocate {need - limit} bytes",
                      losses=[], max_memory_reserved=limit)
    else:
        over = max(0, need - limit) / limit if limit else 0
        ms = round(0.5 * batch * (1 + over), 3)
        result.update(ok=True, losses=[(1 / (i + 1)).hex() for i in range(steps)], params="0123456789abcdef",
                      median_step_ms_second_half=ms, step_ms=[ms] * steps,
                      max_memory_reserved=min(need, limit) if limit else need)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
