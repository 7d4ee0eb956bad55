"""The simulator's worker processes (`--workers N` of a comparison and of the suite): how many, and the pool."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from steward.sim.errors import SimError


def worker_count(workers: int) -> int:
    """`--workers N`: at least one process; 0 or less is refused by name (a comparison ran it as 1, silently)."""
    if workers < 1:
        raise SimError(f"--workers must be >= 1, got {workers}")
    return workers


def _end_quietly_on_interrupt() -> None:
    # Ctrl-C reaches every process of the terminal's group: a worker ends at once, without the traceback of its
    # wait on the task queue; the parent says "interrupted" once (steward.sim.cli)
    signal.signal(signal.SIGINT, _exit_interrupted)


def _exit_interrupted(_signum: int, _frame: Any) -> None:
    os._exit(130)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` processes whose workers end quietly on Ctrl-C."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_end_quietly_on_interrupt)
