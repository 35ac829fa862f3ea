"""vgpumem: caps and pages the GPU memory of an unmodified CUDA program.

The wheel carries the ``vgpumem`` command and ``libvgpumem.so``; run a program
under it with ``vgpumem run --limit 8GiB -- python train.py`` or
``python -m vgpumem run ...``. From Python:

    import vgpumem
    vgpumem.library_path()            # the libvgpumem.so to preload
    s = vgpumem.read_summary("trace.json")
    s.peak_bytes, s.bytes_offloaded   # what a run under a cap did
"""

from vgpumem._layout import command_path, library_path
from vgpumem._version import __version__
from vgpumem.trace import DeviceSummary, TraceSummary, read_summary

__all__ = ["__version__", "command_path", "library_path", "read_summary", "TraceSummary", "DeviceSummary"]
