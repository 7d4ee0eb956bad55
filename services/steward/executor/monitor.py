"""Utilisation of a running attempt, for idle sessions (issue 6 "Idle sessions"): GPU utilisation from
`nvidia-smi` where GPUs exist, CPU activity of the process tree (psutil) where they don't."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Sample:
    at: float
    cpu_percent: float
    gpu_util: float | None
    source: str


def gpu_utilisation(indices: list[int]) -> float | None:
    """Mean utilisation (%) of the given GPU indices, or None without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None or not indices:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    util = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                util[int(parts[0])] = float(parts[1])
            except ValueError:
                continue
    values = [util[i] for i in indices if i in util]
    return sum(values) / len(values) if values else None


def discover_gpus() -> int | None:
    """The number of GPUs `nvidia-smi -L` lists, or None without it (emulated GPU slots then)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class TreeCpu:
    """CPU use of a process and its descendants between two samples (percent of one core)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.last: tuple[float, float] | None = None

    def _cpu_seconds(self) -> float:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        return total

    def percent(self) -> float | None:
        now, cpu = time.monotonic(), self._cpu_seconds()
        last, self.last = self.last, (now, cpu)
        if last is None or now <= last[0]:
            return None
        return max(0.0, (cpu - last[1]) / (now - last[0]) * 100.0)


class IdleTracker:
    """Turns samples into transitions: idle (after `min_idle_s` of quiet, with the time it began) or busy."""

    def __init__(self, cpu_threshold: float, gpu_threshold: float, min_idle_s: float,
                 idle_since: float | None = None) -> None:
        self.cpu_threshold = cpu_threshold
        self.gpu_threshold = gpu_threshold
        self.min_idle_s = min_idle_s
        self.reported_idle_since = idle_since
        self.quiet_since: float | None = idle_since

    def quiet(self, sample: Sample) -> bool:
        if sample.gpu_util is not None:
            return sample.gpu_util < self.gpu_threshold
        return sample.cpu_percent < self.cpu_threshold

    def observe(self, sample: Sample) -> tuple[bool, float] | None:
        """A transition to report: (True, since) when it turned idle, (False, at) when busy again."""
        if self.quiet(sample):
            if self.quiet_since is None:
                self.quiet_since = sample.at
            if self.reported_idle_since is None and sample.at - self.quiet_since >= self.min_idle_s:
                self.reported_idle_since = self.quiet_since
                return True, self.quiet_since
            return None
        self.quiet_since = None
        if self.reported_idle_since is not None:
            self.reported_idle_since = None
            return False, sample.at
        return None
