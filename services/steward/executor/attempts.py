"""An executor's memory of its attempts, on disk, so it survives its own restart: one small JSON record
per attempt (`jobs/<job>/attempt-<n>.json`), the shim's pid file and exit file beside it, and its log.

A process is recognised by pid *and* start time, so a recycled pid is never mistaken for the job."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from steward.paths import UnsafePath, under


@dataclass(frozen=True)
class AttemptRecord:
    job_id: str
    attempt: int
    command: list[str]
    assignments: dict[str, list[int]]
    checkpoint_dir: str
    job_class: str = "batch"
    pid: int = 0
    create_time: float = 0.0
    started_at: float = 0.0
    resumed_from: str = ""
    signalled_at: float | None = None
    killed: bool = False
    checkpoint_seen: float = 0.0  # newest checkpoint mtime already reported
    idle_since: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        return sorted(self.assignments)


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class AttemptStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def job_dir(self, job_id: str) -> Path:
        """The attempts' folder of one job: `jobs/<job>`, refused (`UnsafePath`) unless under the root."""
        return under(self.root, "jobs", job_id)

    def path(self, job_id: str, attempt: int, suffix: str) -> Path:
        return under(self.root, "jobs", job_id, f"attempt-{attempt}{suffix}")

    def load(self, job_id: str, attempt: int) -> AttemptRecord | None:
        """The attempt's record; None when there is none (an id that is no path holds none)."""
        try:
            data = read_json(self.path(job_id, attempt, ".json"))
        except UnsafePath:
            return None
        return AttemptRecord(**data) if data else None

    def save(self, rec: AttemptRecord) -> AttemptRecord:
        self.job_dir(rec.job_id).mkdir(parents=True, exist_ok=True)
        write_json(self.path(rec.job_id, rec.attempt, ".json"), asdict(rec))
        return rec

    def update(self, rec: AttemptRecord, **changes: Any) -> AttemptRecord:
        return self.save(replace(rec, **changes))

    def exit_of(self, rec: AttemptRecord) -> dict[str, Any] | None:
        return read_json(self.path(rec.job_id, rec.attempt, ".exit"))

    def shim_pid(self, job_id: str, attempt: int) -> int | None:
        data = read_json(self.path(job_id, attempt, ".pid"))
        return int(data["pid"]) if data and "pid" in data else None

    def all(self) -> Iterator[AttemptRecord]:
        for path in sorted((self.root / "jobs").glob("*/attempt-*.json")):
            data = read_json(path)
            if data:
                yield AttemptRecord(**data)

    def drained(self) -> set[str]:
        data = read_json(self.root / "drained.json")
        return set(data.get("nodes", [])) if data else set()

    def set_drained(self, nodes: set[str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json(self.root / "drained.json", {"nodes": sorted(nodes)})


def process_start_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def alive(rec: AttemptRecord) -> bool:
    """The attempt's shim still runs (same pid, same start time, not a zombie). A record of the Slurm executor
    (its `pid` is a Slurm job id) is no process of this machine, and neither is a record without the start
    time the node agent writes with the pid: its callers signal the pid's process group, and a number that
    is not our shim's (1, 2, ... as Slurm numbers its jobs) would signal someone else's processes."""
    if rec.pid <= 1 or not rec.create_time or "slurm_job" in rec.extra:
        return False
    try:
        proc = psutil.Process(rec.pid)
        if abs(proc.create_time() - rec.create_time) > 0.5:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def newest_mtime(folder: Path) -> float:
    """The newest modification time of anything in `folder` (0 when empty or missing)."""
    newest = 0.0
    try:
        for dirpath, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
                except OSError:
                    continue
    except OSError:
        return 0.0
    return newest


def jobs_left_running(run_dir: Path) -> list[dict[str, Any]]:
    """The job processes the node agents of a run folder still run (their shims alive): what `steward down`
    leaves behind, by executor, job and attempt."""
    left = []
    for root in sorted(p for p in (run_dir / "executor").glob("*") if p.is_dir()):
        store = AttemptStore(root)
        for rec in store.all():
            if store.exit_of(rec) is None and alive(rec):
                left.append({"executor": root.name, "job_id": rec.job_id, "attempt": rec.attempt, "pid": rec.pid,
                             "gpus": rec.assignments})
    return left
