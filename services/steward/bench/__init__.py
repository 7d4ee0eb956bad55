"""Benchmarks: each module `steward.bench.NAME` exposes `run(**options) -> dict` and is reached as
`steward bench NAME`; they print JSON, they never assert on time."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse `type`: a whole number of at least `minimum` (nodes, jobs, repeats); anything else is refused
    by name, as a usage error (it ran with nothing to measure, or failed deep inside with an IndexError)."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    whole.__name__ = f"a whole number >= {minimum}"
    return whole
