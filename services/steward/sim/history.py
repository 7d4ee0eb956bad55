"""Recorded history for the what-if (`--from-events FILE`): turn a record into a `Scenario`.

Formats are chosen by the file's suffix through `LOADERS`:

- `.yaml` / `.yml`: the recorded trace format, a scenario YAML naming its trace CSV.
- `.ndjson` / `.jsonl`: the event log exported by `steward audit export --ndjson`
  (services/steward/audit/export.py: a `header` line with `format: steward-audit-export/1`, one
  `event` line per stored event — position, type, payload, recorded_at, ... — then `checkpoint`
  lines). The log is folded the way the ledger folds it:
  - `AllocationsSet` (parent `cluster` is the root) builds the tree; later events change shares;
  - `NodeRegistered` gives the nodes (GPUs, model, topology path);
  - the last `PolicySet` gives the policy settings in force (window, caps, grace, knobs);
  - `JobSubmitted` gives each job (project, GPUs, class, min_runtime, resumable, priority, submit
    time); its run time is *measured*: the sum of its runs, each from `JobStarted` (`started_at`)
    to the event that ended it (`JobCompleted`, `JobFailed`, `JobCancelled`, `JobPreempted`,
    `JobLost`, at `recorded_at`); a run still open at the end of the log counts up to the log's
    last event. Jobs that never ran are left out (their run time is unknown), and so are sessions
    restored under a new id (the new job is replayed).
  Submit times are rebased to the first submission. Errors name the line of the file.

Overrides (`--set`) are applied the same way for every format: before validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steward.sim.errors import ScenarioError
from steward.sim.scenario import (
    Scenario,
    TraceJob,
    apply_overrides,
    load_scenario,
    scenario_from_jobs,
    utf8_lines,
)

Loader = Callable[[Path, Mapping[str, Any]], Scenario]

EXPORT_FORMAT_PREFIX = "steward-audit-export/"
"""`steward.store.verifier.EXPORT_FORMAT` is `steward-audit-export/1`; other major versions are refused."""
SUPPORTED_FORMATS = frozenset({"steward-audit-export/1"})
ROOT = "cluster"  # steward.domain.commands.ROOT: the parent of the top allocations
RUN_ENDS = frozenset({"JobCompleted", "JobFailed", "JobCancelled", "JobPreempted", "JobLost"})
DAY_S = 86400.0
# PolicySet settings that are sections of the scenario's `policy:` (seconds -> the scenario's units)
POLICY_FROM_SETTINGS: dict[str, tuple[str, float]] = {
    "window_s": ("window_days", DAY_S),
    "half_life_s": ("half_life_days", DAY_S),
    "max_min_runtime_s": ("max_min_runtime_s", 1.0),
    "session_cap_s": ("session_cap_s", 1.0),
    "checkpoint_interval_s": ("checkpoint_interval_s", 1.0),
    "restart_overhead_s": ("restart_overhead_s", 1.0),
    "preemption_grace_s": ("preemption_grace_s", 1.0),
}


def _load_yaml(path: Path, overrides: Mapping[str, Any]) -> Scenario:
    return load_scenario(path, overrides)


@dataclass
class _Job:
    line: int
    project: str
    gpus: int
    klass: str
    min_runtime_s: float
    resumable: bool
    priority: int
    submitted_at: float
    ran: float = 0.0
    run_start: float | None = None
    started: bool = False


def _field(where: str, payload: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in payload:
        raise ScenarioError(f"{where}: missing payload field {key!r}")
    value = payload[key]
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise ScenarioError(f"{where}: payload field {key!r} has the wrong type ({value!r})")
    return value


def _finite(where: str, payload: Mapping[str, Any], key: str) -> float:
    """A number field that must be finite (JSON's NaN and Infinity parse: a NaN submit time made every job's 0)."""
    value = float(_field(where, payload, key, (int, float)))
    if not math.isfinite(value):
        raise ScenarioError(f"{where}: payload field {key!r} is not a finite number ({value!r})")
    return value


class _Fold:
    """The export folded into the parts of a scenario."""

    def __init__(self, fname: str) -> None:
        self.fname = fname
        self.shares: dict[str, tuple[str, float]] = {}  # child -> (parent, share), in first-seen order
        self.nodes: dict[str, dict[str, Any]] = {}
        self.policy: dict[str, Any] = {}
        self.jobs: dict[str, _Job] = {}
        self.restored: set[str] = set()
        self.last_at = 0.0
        self.header = False
        self.events = 0

    def line(self, n: int, item: Any) -> None:
        where = f"{self.fname} line {n}"
        if not isinstance(item, dict) or "kind" not in item:
            raise ScenarioError(f"{where}: not a line of `steward audit export --ndjson` (a JSON object with a 'kind')")
        kind = item["kind"]
        if kind == "header":
            fmt = item.get("format")
            if fmt not in SUPPORTED_FORMATS:
                raise ScenarioError(
                    f"{where}: export format {fmt!r} is not supported (expected one of {sorted(SUPPORTED_FORMATS)})")
            self.header = True
            return
        if kind == "checkpoint":
            return
        if kind != "event":
            raise ScenarioError(f"{where}: unknown line kind {kind!r} (header, event or checkpoint)")
        if not self.header:
            raise ScenarioError(f"{where}: an event before the export header (not a `steward audit export`)")
        etype = item.get("type")
        payload = item.get("payload")
        at = item.get("recorded_at")
        if not isinstance(etype, str) or not isinstance(payload, dict):
            raise ScenarioError(f"{where}: an event needs a type and a payload object")
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise ScenarioError(f"{where}: {etype} has no finite numeric recorded_at")
        self.events += 1
        self.last_at = max(self.last_at, float(at))
        self.event(f"{where} ({etype})", n, etype, payload, float(at))

    def event(self, where: str, n: int, etype: str, p: Mapping[str, Any], at: float) -> None:
        if etype == "AllocationsSet":
            parent = _field(where, p, "parent", str)
            for child, share in _field(where, p, "shares", dict).items():
                if isinstance(share, bool) or not isinstance(share, int | float):
                    raise ScenarioError(f"{where}: share of {child!r} is not a number ({share!r})")
                self.shares[str(child)] = (parent, float(share))
        elif etype == "NodeRegistered":
            node_id = _field(where, p, "node_id", str)
            self.nodes[node_id] = {
                "name": node_id,
                "gpus": _field(where, p, "gpus", int),
                "gpu_model": _field(where, p, "gpu_model", str),
                "path": [str(x) for x in _field(where, p, "path", list)],
            }
        elif etype == "NodeRetired":  # gone for good (ADR 0078): not in the replayed cluster
            self.nodes.pop(_field(where, p, "node_id", str), None)
        elif etype == "PolicySet":
            self.policy = dict(_field(where, p, "settings", dict))
        elif etype == "JobSubmitted":
            job_id = _field(where, p, "job_id", str)
            self.jobs[job_id] = _Job(
                line=n,
                project=_field(where, p, "project", str),
                gpus=_field(where, p, "gpus", int),
                klass=_field(where, p, "job_class", str),
                min_runtime_s=_finite(where, p, "min_runtime_s"),
                resumable=_field(where, p, "resumable", bool),
                priority=_field(where, p, "priority", int),
                submitted_at=_finite(where, p, "submitted_at"),
            )
        elif etype == "JobStarted":
            job = self.jobs.get(_field(where, p, "job_id", str))
            if job is not None:
                started = p.get("started_at")
                job.run_start = float(started) if isinstance(started, int | float) and started else at
                job.started = True
        elif etype in RUN_ENDS:
            job = self.jobs.get(_field(where, p, "job_id", str))
            if job is not None and job.run_start is not None:
                job.ran += max(0.0, at - job.run_start)
                job.run_start = None
        elif etype == "SessionRestored":
            self.restored.add(_field(where, p, "job_id", str))

    def tree(self) -> dict[str, Any]:
        kids: dict[str, list[str]] = {}
        for child, (parent, _share) in self.shares.items():
            kids.setdefault(parent, []).append(child)

        def build(parent: str, seen: frozenset[str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for child in kids.get(parent, []):
                if child in seen:
                    raise ScenarioError(f"{self.fname}: tree.{child}: the allocations form a cycle")
                sub = build(child, seen | {child})
                share = self.shares[child][1]
                out[child] = {"share": share, "children": sub} if sub else share
            return out

        orphans = sorted(p for p in kids if p != ROOT and p not in self.shares)
        if orphans:
            raise ScenarioError(f"{self.fname}: tree.{orphans[0]}: allocations are set under {orphans[0]!r}, "
                                "which is not in the tree")
        return build(ROOT, frozenset())

    def scenario_parts(self) -> tuple[dict[str, Any], dict[str, Any], list[TraceJob]]:
        if not self.header:
            raise ScenarioError(f"{self.fname}: no export header line (not a `steward audit export --ndjson` file)")
        if not self.nodes:
            raise ScenarioError(f"{self.fname}: no NodeRegistered event (the cluster is unknown)")
        policy: dict[str, Any] = {}
        knobs: dict[str, Any] = {}
        for key, value in self.policy.items():
            if key in POLICY_FROM_SETTINGS:
                name, unit = POLICY_FROM_SETTINGS[key]
                if value is not None:
                    policy[name] = float(value) / unit
            else:
                knobs[key] = value
        raw: dict[str, Any] = {
            "cluster": {"nodes": [self.nodes[k] for k in sorted(self.nodes)]},
            "tree": self.tree(),
            "policy": policy,
        }
        jobs = [j for j in self.jobs.items() if j[1].started and j[0] not in self.restored]
        t0 = min((j.submitted_at for _, j in jobs), default=0.0)
        out = []
        for job_id, j in jobs:
            ran = j.ran + (max(0.0, self.last_at - j.run_start) if j.run_start is not None else 0.0)
            out.append(TraceJob(
                job_id=job_id, submit_s=max(0.0, j.submitted_at - t0), duration_s=ran, gpus=j.gpus,
                tenant=j.project, job_class=j.klass if j.klass in ("debug", "batch", "interactive") else "batch",
                min_runtime_s=j.min_runtime_s, resumable=j.resumable, priority=j.priority, line=j.line,
            ))
        return raw, knobs, out


def _load_event_log(path: Path, overrides: Mapping[str, Any]) -> Scenario:
    fold = _Fold(path.name)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with handle:
        for n, text in enumerate(utf8_lines(path.name, handle), start=1):
            if not text.strip():
                continue
            try:
                item = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{path.name} line {n}: not JSON ({exc.msg})") from None
            except RecursionError:
                raise ScenarioError(f"{path.name} line {n}: JSON nested too deeply to read") from None
            fold.line(n, item)
    raw, knobs, jobs = fold.scenario_parts()
    raw["name"] = path.stem
    settings = {**knobs, **apply_overrides(raw, overrides)}
    return scenario_from_jobs(raw, path, jobs, settings)


LOADERS: dict[str, Loader] = {
    ".yaml": _load_yaml,
    ".yml": _load_yaml,
    ".ndjson": _load_event_log,
    ".jsonl": _load_event_log,
}


def load_history(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Scenario:
    p = Path(path)
    loader = LOADERS.get(p.suffix.lower())
    if loader is None:
        raise ScenarioError(
            f"{p.name}: unknown history format {p.suffix or '(no suffix)'!r}; "
            f"expected one of {', '.join(sorted(LOADERS))}")
    if not p.exists():
        raise ScenarioError(f"{p}: no such file")
    return loader(p, overrides or {})

