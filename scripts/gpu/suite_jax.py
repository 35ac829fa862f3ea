"""JAX under vgpumem (issue 16, item 3): jax_workload.py without the shim,
then under it with no cap and at a half and a third of the uncapped peak,
every loss and parameter compared with the run without the shim.

XLA's allocator decides what the pager sees. By default it takes 75 % of
the free memory cuMemGetInfo reports in one allocation at start (under a cap,
75 % of the cap) and carves every buffer out of it: one allocation that
every kernel touches. So the capped runs use
XLA_PYTHON_CLIENT_ALLOCATOR=platform: every buffer its own cuMemAlloc, freed
when it dies, as PyTorch's allocator's segments are; and one capped run
keeps XLA's own allocator without preallocation
(XLA_PYTHON_CLIENT_PREALLOCATE=false: it grows its pool by cuMemAlloc as
needed) to show what that costs. The uncapped peak comes from XLA's own
allocator (the platform one keeps no count). XLA's GPU kernels are made
deterministic (--xla_gpu_deterministic_ops) so that runs compare bit for bit.
"""
import os
import subprocess

from suite_steps import HERE, PY, limit_at, peak_of_step

JAX = os.path.join(HERE, "jax_workload.py")
DETERMINISTIC = {"XLA_FLAGS": "--xla_gpu_deterministic_ops=true"}
GROWING = dict(DETERMINISTIC, XLA_PYTHON_CLIENT_PREALLOCATE="false")
PLATFORM = dict(DETERMINISTIC, XLA_PYTHON_CLIENT_ALLOCATOR="platform")


def jax_argv(label, steps=16):
    return [PY, JAX, label, str(steps)]


def jax_version():
    """jax's version and devices, or None and why not."""
    try:
        p = subprocess.run([PY, "-c", "import jax; print(jax.__version__, jax.devices())"], capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "importing jax took over 120 s"
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return p.stdout.strip(), None


def part_jax(suite):
    version, why_not = jax_version()
    if version is None:
        suite.results["jax"] = {"skipped": f"no JAX with a GPU here: {why_not}"}
        return
    suite.results["jax-version"] = {"version": version}
    suite.run("jax-noshim", jax_argv("noshim"), GROWING, 150)
    suite.run("jax-platform-noshim", jax_argv("platform_noshim"), PLATFORM, 150)
    suite.run("jax-shim-nocap", jax_argv("shim_nocap"), PLATFORM, 150, shim=True, trace=True)
    peak = peak_of_step(suite, "jax-noshim")
    if not peak:
        suite.results["jax-capped"] = {"skipped": "no uncapped peak from jax-noshim"}
        return
    for label, fraction, env in (("jax-auto50", 0.5, PLATFORM), ("jax-auto33", 1 / 3, PLATFORM),
                                 ("jax-growing-auto50", 0.5, GROWING)):
        capped = dict(env, VGPUMEM_LIMIT=limit_at(peak, fraction), VGPUMEM_POLICY="auto")
        suite.run(label, jax_argv(label.removeprefix("jax-")), capped, 240, shim=True, trace=True)
    torture = dict(PLATFORM, VGPUMEM_LIMIT=limit_at(peak, 0.5), VGPUMEM_POLICY="lru", VGPUMEM_CHECK="torture")
    suite.run("jax-torture50", jax_argv("torture50", steps=3), torture, 240, shim=True, trace=True)
