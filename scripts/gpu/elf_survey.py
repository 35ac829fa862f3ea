"""ELF survey of the libraries PyTorch loads (research/cuda-facts.md §8.1).

    elf_survey.py            -> one JSON object on stdout

For torch/lib/*.so*, site-packages/nvidia/**/lib*.so* and triton's *.so: which
NEED libcudart / libcuda (readelf -d), how many undefined cu*/cuda* symbols
they import (nm -D --undefined-only), and whether they carry the strings of a
static cudart bootstrap ("cuGetProcAddress_v2", "libcuda.so.1"). Finds the
packages without importing them.
"""
import concurrent.futures as cf
import glob
import importlib.util
import json
import mmap
import os
import re
import shutil
import subprocess
import sys

MARKERS = [b"cuGetProcAddress_v2", b"libcuda.so.1", b"cuGetExportTable", b"cudaGetDriverEntryPointByVersion"]


def pkg_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    return locs[0] if locs else (os.path.dirname(spec.origin) if spec.origin else None)


def survey(path):
    r = {}
    try:
        d = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True, timeout=60).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", d)
        r["needed_cuda"] = [n for n in needed if re.match(r"lib(cuda|cudart|nvrtc|cublas|cudnn|nccl|cupti)", n)]
        r["needs_cudart"] = any(n.startswith("libcudart") for n in needed)
        r["needs_libcuda"] = any(n.startswith("libcuda.so") for n in needed)
        u = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True, timeout=60).stdout
        syms = [ln.split()[-1] for ln in u.splitlines() if ln.strip()]
        cu = sorted({s.split("@")[0] for s in syms if re.match(r"cu[A-Z]", s)})
        cuda = sorted({s.split("@")[0] for s in syms if s.startswith("cuda")})
        r["undef_cu"] = len(cu)
        r["undef_cuda"] = len(cuda)
        if cu:
            r["undef_cu_names"] = cu[:40]
        if cuda:
            r["undef_cuda_sample"] = [s for s in cuda if "Malloc" in s or "Free" in s or "Launch" in s][:20]
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            r["strings"] = [k.decode() for k in MARKERS if m.find(k) >= 0]
        r["size_mb"] = round(os.path.getsize(path) / 1e6, 1)
    except Exception as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
    return r


def main():
    out = {"tools": {t: bool(shutil.which(t)) for t in ("readelf", "nm")}, "python": sys.version.split()[0]}
    roots = {k: pkg_dir(k) for k in ("torch", "nvidia", "triton")}
    out["roots"] = roots
    files = []
    if roots["torch"]:
        files += glob.glob(os.path.join(roots["torch"], "lib", "*.so*"))
        files += glob.glob(os.path.join(roots["torch"], "_C*.so"))
    if roots["nvidia"]:
        files += glob.glob(os.path.join(roots["nvidia"], "**", "lib*.so*"), recursive=True)
    if roots["triton"]:
        files += glob.glob(os.path.join(roots["triton"], "**", "*.so*"), recursive=True)
    files = sorted({os.path.realpath(f) for f in files if os.path.isfile(f)})
    if not (out["tools"]["readelf"] and out["tools"]["nm"]):
        out["error"] = "readelf/nm missing"
        print(json.dumps(out))
        return
    with cf.ThreadPoolExecutor(max_workers=12) as ex:
        res = dict(zip(files, ex.map(survey, files)))

    def short(p):
        for k, v in roots.items():
            if v and p.startswith(os.path.realpath(v)):
                return k + p[len(os.path.realpath(v)):]
        return p

    libs = {short(p): r for p, r in res.items()}
    out["count"] = len(libs)
    out["needs_cudart"] = sorted(k for k, r in libs.items() if r.get("needs_cudart"))
    out["needs_libcuda"] = sorted(k for k, r in libs.items() if r.get("needs_libcuda"))
    out["imports_cu_symbols"] = {k: r["undef_cu"] for k, r in libs.items() if r.get("undef_cu")}
    out["static_cudart_bootstrap"] = sorted(k for k, r in libs.items()
                                            if "cuGetProcAddress_v2" in r.get("strings", []) and not r.get("needs_cudart"))
    out["imports_cuda_runtime_symbols"] = {k: r["undef_cuda"] for k, r in libs.items() if r.get("undef_cuda")}
    out["libs"] = libs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
