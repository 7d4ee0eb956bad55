"""Builders for small scenarios: a YAML and its trace CSV written to a temporary folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

HEADER = ("job_id", "submit_s", "duration_s", "gpus", "tenant", "class", "min_runtime_s", "resumable")


def job(
    job_id: str,
    submit: float = 0,
    duration: float = 3600,
    gpus: int = 1,
    tenant: str = "a",
    klass: str = "batch",
    min_runtime: float | None = None,
    resumable: int = 1,
) -> tuple[Any, ...]:
    """One trace row; `min_runtime` defaults to the duration (a fully protected funded job)."""
    return (job_id, submit, duration, gpus, tenant, klass, duration if min_runtime is None else min_runtime,
            resumable)


def write_scenario(
    folder: Path,
    jobs: Sequence[Sequence[Any]],
    *,
    tree: Mapping[str, Any] | None = None,
    nodes: int = 1,
    gpus_per_node: int = 4,
    policy: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    header: Sequence[str] = HEADER,
    extra: Mapping[str, Any] | None = None,
    name: str = "small",
) -> Path:
    trace = folder / f"{name}.csv"
    lines = [",".join(header)] + [",".join(str(c) for c in row) for row in jobs]
    trace.write_text("\n".join(lines) + "\n")
    doc: dict[str, Any] = {
        "name": name,
        "trace": trace.name,
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node, "gpu_model": "V100",
                    "topology": {"levels": ["block", "node"], "nodes_per_block": max(1, nodes)}},
        "policy": {"window_days": 7, "max_min_runtime_s": 28800, "session_cap_s": 28800,
                   "checkpoint_interval_s": 1800, "restart_overhead_s": 60, "preemption_grace_s": 120,
                   **(policy or {})},
        "tree": dict(tree) if tree is not None else {"a": 0.5, "b": 0.5},
        "metrics": {"large_job_gpus": 4, "owed_period_days": 30, **(metrics or {})},
        **(extra or {}),
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
