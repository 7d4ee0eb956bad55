"""What the benchmarks read of other processes from /proc (Linux): the children of a process."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid` (PostgreSQL's backends, a shim's job), empty when none or gone."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out
