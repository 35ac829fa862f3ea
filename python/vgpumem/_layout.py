"""Where the packaged files are: an install prefix inside the package
(``bin/vgpumem``, ``lib/libvgpumem.so``, ``lib/vgpumem/`` with the simulated
driver), the layout the command expects around itself."""

from pathlib import Path

_PREFIX = Path(__file__).resolve().parent
_LIBDIR = "lib"  # rewritten by make_wheel.py to the build's CMAKE_INSTALL_LIBDIR


def command_path() -> Path:
    """The ``vgpumem`` command."""
    return _PREFIX / "bin" / "vgpumem"


def library_path() -> Path:
    """``libvgpumem.so``, for ``LD_PRELOAD``."""
    return _PREFIX / _LIBDIR / "libvgpumem.so"
