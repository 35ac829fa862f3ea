#!/usr/bin/env python3
"""Assembles the vgpumem wheel from an install prefix (cmake --install BUILD
--prefix STAGING) and the Python package beside this file. Standard library
only: no setuptools, no network.

    make_wheel.py --prefix STAGING --out DIST

The wheel's package is a small install prefix (vgpumem/bin/vgpumem,
vgpumem/lib/libvgpumem.so, vgpumem/lib/vgpumem/ with the simulated driver and
libraries and the trainers of ``vgpumem demo`` and ``vgpumem bench``,
vgpumem/share/vgpumem/plot_timeline.py and plot_trace.py) plus the Python
modules; the ``vgpumem`` script runs the packaged command. A wheel is a zip with a *.dist-info directory (METADATA,
WHEEL, entry_points.txt and RECORD: every file's sha256 and size); see
https://packaging.python.org/en/latest/specifications/binary-distribution-format/
"""

import argparse
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "vgpumem"
# Fixed timestamps: the same inputs give the same wheel.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def command_version(command: Path) -> str:
    out = subprocess.run([str(command), "--version"], check=True, capture_output=True, text=True).stdout.split()
    if len(out) != 2 or out[0] != "vgpumem":
        sys.exit(f"make_wheel: {command} --version printed {' '.join(out)!r}, expected 'vgpumem X.Y.Z'")
    return out[1]


def find_libdir(prefix: Path) -> str:
    """CMAKE_INSTALL_LIBDIR of the install: where libvgpumem.so landed."""
    found = sorted(p.parent.relative_to(prefix) for p in prefix.glob("lib*/**/libvgpumem.so"))
    if not found:
        sys.exit(f"make_wheel: no libvgpumem.so under {prefix}; run cmake --install BUILD --prefix {prefix} first")
    return found[0].as_posix()


def platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")  # linux_x86_64


def package_files(prefix: Path, libdir: str, version: str):
    """(path in the wheel, bytes, executable) for every file of the package."""
    for source in sorted((HERE / PACKAGE).glob("*.py")):
        text = source.read_text(encoding="utf-8")
        if source.name == "_version.py":
            text = f'# The version of the command this wheel packages.\n__version__ = "{version}"\n'
        elif source.name == "_layout.py":
            text = text.replace('_LIBDIR = "lib"', f'_LIBDIR = "{libdir}"')
        yield f"{PACKAGE}/{source.name}", text.encode(), False
    yield f"{PACKAGE}/bin/vgpumem", (prefix / "bin" / "vgpumem").read_bytes(), True
    # One regular file: a zip holds no symbolic links, and users preload
    # libvgpumem.so by that name.
    yield f"{PACKAGE}/{libdir}/libvgpumem.so", (prefix / libdir / "libvgpumem.so").resolve().read_bytes(), True
    private = prefix / libdir / "vgpumem"
    if private.is_dir():
        for path in sorted(private.iterdir()):
            if path.is_file():
                yield f"{PACKAGE}/{libdir}/vgpumem/{path.name}", path.read_bytes(), os.access(path, os.X_OK)
    # The plotting scripts, where the command looks for them (bin/../share/vgpumem).
    for name in ("plot_timeline.py", "plot_trace.py"):
        plot = prefix / "share" / "vgpumem" / name
        if plot.is_file():
            yield f"{PACKAGE}/share/vgpumem/{plot.name}", plot.read_bytes(), True


def metadata(version: str) -> str:
    readme = (HERE.parent / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {PACKAGE}\n"
        f"Version: {version}\n"
        "Summary: Caps and pages the GPU memory of an unmodified CUDA program (PyTorch, JAX, ...)\n"
        "Requires-Python: >=3.8\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_entry(wheel: zipfile.ZipFile, name: str, data: bytes, executable: bool) -> None:
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    wheel.writestr(info, data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", required=True, type=Path, help="the install prefix (cmake --install --prefix)")
    parser.add_argument("--out", required=True, type=Path, help="directory for the .whl")
    args = parser.parse_args()
    prefix = args.prefix.resolve()

    version = command_version(prefix / "bin" / "vgpumem")
    libdir = find_libdir(prefix)
    tag = f"py3-none-{platform_tag()}"
    dist_info = f"{PACKAGE}-{version}.dist-info"
    files = list(package_files(prefix, libdir, version))
    files.append((f"{dist_info}/METADATA", metadata(version).encode(), False))
    files.append((
        f"{dist_info}/WHEEL",
        f"Wheel-Version: 1.0\nGenerator: vgpumem make_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        False,
    ))
    files.append((f"{dist_info}/entry_points.txt", b"[console_scripts]\nvgpumem = vgpumem.__main__:main\n", False))
    record = "".join(record_line(name, data) + "\n" for name, data, _ in files) + f"{dist_info}/RECORD,,\n"

    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{PACKAGE}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w") as wheel:
        for name, data, executable in files:
            write_entry(wheel, name, data, executable)
        write_entry(wheel, f"{dist_info}/RECORD", record.encode(), False)
    print(target)


if __name__ == "__main__":
    main()
