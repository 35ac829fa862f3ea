"""Reads the summary of a vgpumem trace (``--trace FILE`` / ``VGPUMEM_TRACE``).

The file is Chrome trace-event JSON with vgpumem's summary under the key
``vgpumem``; docs/trace-format.md lists every key. ``read_summary`` gives the
figures most runs are judged by as attributes, and the whole summary as
``raw``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union


@dataclass(frozen=True)
class DeviceSummary:
    device: int
    cap: Optional[int]  # bytes; None when the device had no cap
    peak: int  # the most bytes charged to the cap at once
    counted_at_exit: int


@dataclass(frozen=True)
class TraceSummary:
    format_version: int  # the trace format's version (1)
    vgpumem_version: Optional[str]  # the library that wrote it
    pid: Optional[int]
    launches: int
    ooms_returned: int  # allocations refused because of a cap
    devices: List[DeviceSummary]
    paging: Optional[Dict[str, Any]]  # present when paging was on
    raw: Dict[str, Any] = field(repr=False)

    @property
    def peak_bytes(self) -> int:
        """The highest peak over all devices."""
        return max((d.peak for d in self.devices), default=0)

    @property
    def bytes_offloaded(self) -> int:
        return int((self.paging or {}).get("bytes_offloaded", 0))

    @property
    def bytes_prefetched(self) -> int:
        return int((self.paging or {}).get("bytes_prefetched", 0))

    @property
    def stall_ns(self) -> int:
        """GPU time launches and copies waited for data on its way in."""
        return int((self.paging or {}).get("stall_ns", 0))


def read_summary(path: Union[str, Path]) -> TraceSummary:
    """The summary of the trace at ``path``; ValueError if it is not a vgpumem trace."""
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    summary = document.get("vgpumem") if isinstance(document, dict) else None
    if not isinstance(summary, dict):
        raise ValueError(f"{path}: not a vgpumem trace (no 'vgpumem' summary)")
    devices = [
        DeviceSummary(
            device=int(d["device"]),
            cap=None if d.get("cap") is None else int(d["cap"]),
            peak=int(d.get("peak", 0)),
            counted_at_exit=int(d.get("counted_at_exit", 0)),
        )
        for d in summary.get("devices", [])
    ]
    return TraceSummary(
        format_version=int(summary.get("version", 0)),
        vgpumem_version=summary.get("vgpumem_version"),
        pid=summary.get("pid"),
        launches=int(summary.get("launches", 0)),
        ooms_returned=int(summary.get("ooms_returned", 0)),
        devices=devices,
        paging=summary.get("paging"),
        raw=summary,
    )
