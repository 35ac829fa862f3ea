"""One JAX training run for comparing runs with and without vgpumem bit for
bit: a deep MLP (residual blocks of LayerNorm, two bf16 matmuls and GELU)
trained with AdamW written out in jax.numpy, so that nothing but `jax` (with
its CUDA plugin) is needed: no Flax, no Optax, no downloads.

    jax_workload.py LABEL [STEPS] [BATCH] [WIDTH] [DEPTH]

Nothing here knows about vgpumem; the launcher sets LD_PRELOAD, VGPUMEM_*
and XLA's allocator (XLA_PYTHON_CLIENT_ALLOCATOR, _PREALLOCATE, _MEM_FRACTION,
see docs/results.md). The step is one jitted function with the parameters
and optimizer state donated, as JAX programs are usually written. Prints one
line, RESULT {json}, in train_workload.py's shape: the loss of every step
(exact, float.hex), a SHA-256 of every parameter after the last step, step
times, and the device's peak bytes in use as XLA's allocator counts them
(max_memory_reserved, which the suite's caps are fractions of; absent under
the platform allocator, which keeps no count).
"""
import hashlib
import json
import os
import sys
import time


def model(jax, jnp, width, depth, key):
    keys = jax.random.split(key, depth + 2)
    scale = width ** -0.5

    def dense(k, n_in, n_out):
        return jax.random.normal(k, (n_in, n_out), jnp.float32) * scale
    params = {"embed": dense(keys[0], width, width), "out": dense(keys[1], width, 1000),
              "blocks": [{"up": dense(jax.random.fold_in(keys[i + 2], 0), width, 4 * width),
                          "down": dense(jax.random.fold_in(keys[i + 2], 1), 4 * width, width),
                          "norm": jnp.ones((width,), jnp.float32)} for i in range(depth)]}

    def matmul(x, w):  # bf16 inputs, f32 accumulation: what autocast does in the PyTorch workloads
        return jnp.dot(x.astype(jnp.bfloat16), w.astype(jnp.bfloat16), preferred_element_type=jnp.float32)

    def loss(p, x, y):
        h = matmul(x, p["embed"])
        for b in p["blocks"]:
            n = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-5) * b["norm"]
            h = h + matmul(jax.nn.gelu(matmul(n, b["up"])), b["down"])
        logits = matmul(h, p["out"])
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=-1))
    return params, loss


def adamw(jax, jnp, loss, lr=1e-4, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    def step(params, m, v, t, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = jax.tree_util.tree_map(
            lambda p, a, s: p - lr * ((a / c1) / (jnp.sqrt(s / c2) + eps) + wd * p), params, m, v)
        return params, m, v, t, value
    return jax.jit(step, donate_argnums=(0, 1, 2))


def digest(jax, params):
    import numpy as np
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(params):
        h.update(np.asarray(jax.device_get(leaf)).tobytes())
    return h.hexdigest()[:16]


def main():
    label = sys.argv[1]
    given = [int(a) for a in sys.argv[2:6]]
    # About 540 M parameters (8.6 GB with gradients and AdamW's state) and as much again in activations.
    steps, batch, width, depth = given + [16, 4096, 2048, 16][len(given):]
    result = {"workload": "jax", "label": label, "steps": steps, "batch": batch, "width": width, "depth": depth,
              "limit": os.environ.get("VGPUMEM_LIMIT"), "policy": os.environ.get("VGPUMEM_POLICY"),
              "check": os.environ.get("VGPUMEM_CHECK"), "shim": "vgpumem" in os.environ.get("LD_PRELOAD", ""),
              "xla_allocator": {k: v for k, v in os.environ.items() if k.startswith("XLA_")}}
    t_start = time.perf_counter()
    losses, times = [], []
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    result["device"] = str(dev)
    try:
        params, loss = model(jax, jnp, width, depth, jax.random.PRNGKey(0))
        params = jax.device_put(params, dev)
        m = jax.tree_util.tree_map(jnp.zeros_like, params)
        v = jax.tree_util.tree_map(jnp.zeros_like, params)
        t = jnp.zeros((), jnp.float32)
        data = jax.random.PRNGKey(1)
        x = jax.device_put(jax.random.normal(data, (batch, width), jnp.float32), dev)
        y = jax.device_put(jax.random.randint(jax.random.fold_in(data, 1), (batch,), 0, 1000), dev)
        step = adamw(jax, jnp, loss)
        for _ in range(steps):
            t0 = time.perf_counter()
            params, m, v, t, value = step(params, m, v, t, x, y)
            losses.append(float(value).hex())  # waits for the step
            times.append(time.perf_counter() - t0)
        tail = sorted(times[len(times) // 2:])
        result.update({"ok": True, "params": digest(jax, params), "final_loss": losses[-1],
                       "median_step_ms_second_half": round(tail[len(tail) // 2] * 1e3, 3)})
    except Exception as e:  # an out-of-memory or anything else: recorded, not hidden
        result.update({"ok": False, "error": f"{type(e).__name__}: {str(e)[:600]}"})
    stats = {}
    try:
        stats = dev.memory_stats() or {}
    except Exception as e:
        result["memory_stats_error"] = str(e)[:200]
    result.update({"losses": losses, "step_ms": [round(x * 1e3, 3) for x in times],
                   "max_memory_reserved": stats.get("peak_bytes_in_use"),
                   "wall_s": round(time.perf_counter() - t_start, 2)})
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
