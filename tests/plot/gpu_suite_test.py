#!/usr/bin/env python3
"""scripts/gpu/suite.py without a GPU: its parts run a stand-in workload
(gpu_suite_stand_in.py, a memory model behind train_workload.py's interface)
and a stand-in test_cuda.py, so what the suite derives and reports is
checked here rather than in the GPU's scarce minutes: every policy at every
cap, each cap the right fraction of the uncapped peak; the capacity walk's
largest batches under one cap for PyTorch alone, checkpointing, save_on_cpu
and vgpumem; the test-by-test comparison of PyTorch's tests with and without
the shim; JAX skipped with its reason where there is none; --resume running
nothing twice; the summary's tables; the plots where matplotlib is.

  gpu_suite_test.py PATH/TO/gpu/suite.py
"""
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect, png_size, python_with, run  # noqa: E402

SUITE = sys.argv[1]
MIB = 1 << 20


def suite(python, work, out, *args):
    env = dict(os.environ, VGPUMEM_SUITE_TRAIN_SCRIPT=os.path.join(HERE, "gpu_suite_stand_in.py"))
    return run(python, SUITE, out, os.path.join(work, "build"), "--budget", "300", *args, env=env)


def main():
    python = python_with("matplotlib") or sys.executable
    work = tempfile.mkdtemp(prefix="gpu-suite-test.")
    try:
        tests = os.path.join(work, "build", "pytorch-tests")
        os.makedirs(tests)
        shutil.copy(os.path.join(HERE, "gpu_suite_stand_in_tests.py"), os.path.join(tests, "test_cuda.py"))
        out = os.path.join(work, "out")
        r = suite(python, work, out, "--parts", "caps,capacity,jax,torchtests,async,alternatives",
                  "--workloads", "resnet50")
        expect(r.returncode == 0, "the suite runs its parts on the stand-ins", r)
        with open(os.path.join(out, "results.json")) as f:
            steps = json.load(f)["steps"]

        # The stand-in's uncapped step needs 64 x 50 MiB = 3200 MiB.
        expect(steps["resnet50-noshim"]["result"]["max_memory_reserved"] == 3200 * MIB, "the uncapped peak", r)
        for policy in ("auto", "lru", "vdnn-all", "vdnn-conv"):
            for pct, limit in (("50", 1600), ("33", 1066), ("25", 800)):
                step = steps.get(f"resnet50-{policy}{pct}", {})
                expect(step.get("env", {}).get("VGPUMEM_LIMIT") == str(limit * MIB)
                       and step.get("env", {}).get("VGPUMEM_POLICY") == policy and step["result"]["ok"],
                       f"{policy} at {pct} % runs under {limit} MiB")

        # Under 1600 MiB: PyTorch alone fits 32 samples, save_on_cpu 64, checkpointing 128; the ladder is
        # 16, 32, 48, 64, 96, 128, 192, 256; vgpumem trains every batch from PyTorch's largest up.
        ways = steps["resnet50-capacity"]["capacity"]["ways"]
        expect(steps["resnet50-capacity"]["capacity"]["cap"] == 1600 * MIB, "the capacity cap is half the peak")
        for way, largest, tried in (("pytorch", 32, [16, 32, 48]), ("save_on_cpu", 64, [16, 32, 48, 64, 96]),
                                    ("checkpoint", 128, [16, 32, 48, 64, 96, 128, 192]),
                                    ("vgpumem", 256, [32, 48, 64, 96, 128, 192, 256])):
            expect(ways[way]["largest_batch"] == largest and [s["batch"] for s in ways[way]["steps"]] == tried,
                   f"{way}: the largest batch under the cap is {largest}, found walking {tried}")
        expect("OutOfMemoryError" in ways["pytorch"]["steps"][-1]["error"], "the failed batch says why")
        expect(ways["vgpumem"]["ladder_end"] and not ways["checkpoint"]["ladder_end"],
               "the ladder's top is reported as 'at least'")
        expect(ways["vgpumem"]["samples_per_s"] == round(256e3 / round(0.5 * 256 * (1 + (12800 - 1600) / 1600), 3), 2),
               "samples per second at the largest batch")
        for label in ("resnet50-fit50-pytorch-b48", "resnet50-fit50-vgpumem-b256"):
            expect(steps[label].get("part") == "capacity" and steps[label]["env"]["VGPUMEM_LIMIT"] == str(1600 * MIB),
                   f"{label} ran under the cap, as the capacity part's")

        expect("no JAX with a GPU here" in steps["jax"]["skipped"], "JAX is skipped with its reason")

        # async: its own uncapped run under cudaMallocAsync, its caps a half of that run's peak.
        for label in ("resnet50-async-noshim", "resnet50-async-auto50", "gpt2-async-lru50"):
            expect(steps[label]["env"].get("PYTORCH_CUDA_ALLOC_CONF") == "backend:cudaMallocAsync",
                   f"{label} runs under cudaMallocAsync")
        expect(steps["gpt2-async-auto50"]["env"]["VGPUMEM_LIMIT"] == str(100 * MIB)
               and steps["gpt2-async-auto50"]["result"]["steps"] == 8, "GPT-2 under cudaMallocAsync: 8 steps, half of its 4 x 50 MiB")
        # alternatives: checkpointing's peak at the usual batch is 64 x 50 MiB / 4, vgpumem capped there.
        expect(steps["resnet50-auto-at-checkpoint"]["env"]["VGPUMEM_LIMIT"] == str(800 * MIB)
               and steps["resnet50-auto-at-save_on_cpu"]["env"]["VGPUMEM_LIMIT"] == str(1600 * MIB),
               "the alternatives' peaks are vgpumem's caps")

        noshim, shim = steps["torchtests-noshim"], steps["torchtests-shim-nocap"]
        expect(noshim["counts"] == {"ok": 2, "skipped": 1, "ERROR": 1}, f"the tests' outcomes are read: {noshim['counts']}")
        expect(noshim["tests"]["__main__.TestCuda.test_fails_under_a_preload"] == "ok"
               and noshim["tests"]["__main__.TestCudaMallocAsync.test_errors"] == "ERROR"
               and noshim["ran"] == 4, "each test by name, a docstring's and a printing test's outcome too")
        expect(shim["differences"] == {"__main__.TestCuda.test_fails_under_a_preload":
                                       {"without_shim": "ok", "here": "FAIL"}},
               "the one test that differs under the shim, and only it")
        expect("torchtests-cap32gib-auto" in steps, "the capped run of the tests")

        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
        expect("| resnet50 | 1600 | pytorch | 32 |" in summary and "| resnet50 | 1600 | vgpumem | ≥ 256 |" in summary,
               "the summary's capacity table")
        expect("| torchtests-shim-nocap | 1 |" in summary and "test_fails_under_a_preload: ok → FAIL" in summary,
               "the summary's table of PyTorch's tests")
        expect("| resnet50-vdnn-conv25 |" in summary and "resnet50-fit50" not in summary.split("| workload |")[0],
               "the step table has the caps' runs and not the capacity walk's")
        if python_with("matplotlib") == python:
            expect(png_size(os.path.join(out, "step-times.png")) and png_size(os.path.join(out, "capacity.png")),
                   "the step times and the capacity are drawn", r)
            expect(not os.path.exists(os.path.join(out, "moved.png")), "nothing moved, no picture of it")
        else:
            expect("no matplotlib" in r.stdout, "without matplotlib the suite says how to plot", r)

        again = os.path.join(work, "again")
        r = suite(python, work, again, "--parts", "caps", "--workloads", "resnet50",
                  "--resume", os.path.join(out, "results.json"))
        with open(os.path.join(again, "log.txt")) as f:
            log = f.read()
        expect(r.returncode == 0 and "== " not in log and "from the resumed results" in r.stdout,
               "--resume runs none of the steps an earlier call finished", r)
        with open(os.path.join(again, "results.json")) as f:
            expect("resnet50-capacity" in json.load(f)["steps"], "--resume keeps the earlier call's results")

        with open(os.path.join(out, "results.json")) as f:
            other = json.load(f)
        other["meta"]["nvidia_smi"] = "NVIDIA H100 80GB HBM3, 580.00, 81559 MiB, 1980 MHz"
        elsewhere = os.path.join(work, "elsewhere.json")
        with open(elsewhere, "w") as f:
            json.dump(other, f)
        r = suite(python, work, os.path.join(work, "moved"), "--parts", "caps", "--resume", elsewhere)
        expect(r.returncode != 0 and "its runs were on 'NVIDIA H100" in r.stderr,
               "--resume refuses another device's results (their peaks are not this one's)", r)

        r = suite(python, work, os.path.join(work, "bad"), "--parts", "caps,nosuch")
        expect(r.returncode != 0 and "unknown part 'nosuch'" in r.stderr, "an unknown part is named", r)
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
