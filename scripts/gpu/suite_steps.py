"""What the suite's parts share: how a training step is spelled, and the caps
derived from the uncapped run's peak.

The workload script is train_workload.py unless VGPUMEM_SUITE_TRAIN_SCRIPT
names another (the suite's own test runs a stand-in that needs no GPU).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
TRAIN = os.environ.get("VGPUMEM_SUITE_TRAIN_SCRIPT") or os.path.join(HERE, "train_workload.py")
STEPS = {"resnet50": 16, "gpt2": 16, "bert": 16, "vgg16": 16}
BATCH = {"resnet50": 64, "gpt2": 4, "bert": 8, "vgg16": 32}
CHUNK = 2 << 20


def train_argv(workload, label, steps=None, batch=None, memory=None):
    argv = [PY, TRAIN, workload, label, str(steps or STEPS[workload]), str(batch or BATCH[workload])]
    return argv + [memory] if memory else argv


def peak_of_step(suite, label):
    """torch.cuda.max_memory_reserved of the step `label`, if it ran to the end."""
    r = suite.results.get(label, {}).get("result", {})
    return r.get("max_memory_reserved") if r.get("ok") else None


def peak_of(suite, workload, suffix=""):
    return peak_of_step(suite, f"{workload}{suffix}-noshim")


def compared_with(steps, label, result):
    """(workload key, the result of the run without the shim that the step `label` compares with): its
    workload's, under the same allocator (`-async` steps have their own uncapped run)."""
    w = result["workload"] + ("-async" if "-async" in label else "")
    return w, (steps.get(f"{w}-noshim") or {}).get("result") or {}


def limit_at(peak, fraction=1.0):
    """VGPUMEM_LIMIT for `fraction` of `peak`, in whole 2 MiB chunks."""
    return str(int(peak * fraction) // CHUNK * CHUNK)


def cap_env(suite, workload, fraction, suffix=""):
    peak = peak_of(suite, workload, suffix)
    if not peak:
        return None
    return {"VGPUMEM_LIMIT": limit_at(peak, fraction)}


def ensure_uncapped(suite, workload, suffix="", alloc_env=None, steps=None, timeout=150):
    """The uncapped run without the shim that every cap of `workload` is a fraction of: run now unless this
    call (or the results it resumed) already has it. Returns its peak, or None."""
    label = f"{workload}{suffix}-noshim"
    if peak_of_step(suite, label) is None:
        suite.run(label, train_argv(workload, "noshim", steps=steps), dict(alloc_env or {}), timeout)
    return peak_of_step(suite, label)


def percent(fraction):
    return f"{round(fraction * 100)}"
