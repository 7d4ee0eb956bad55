"""Recorded history for the what-if (`--from-events FILE`): turn a record into a `Scenario`.

Formats are chosen by the file's suffix through `LOADERS`, so the event-log export of the store
issue (`steward audit export`, NDJSON) plugs in as one more entry:

- `.yaml` / `.yml`: the recorded trace format, a scenario YAML naming its trace CSV (what the
  simulator and benchmarks use today).
- `.ndjson` / `.jsonl`: an exported event log; refused with a clear message until the export format
  exists (the loader will fold `AllocationsSet`, `NodeRegistered`, `JobSubmitted` and the
  start/stop events into the same `Scenario`: tree, nodes, and jobs with their measured run time).

Overrides (`--set`) are applied the same way for every format: before validation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from steward.sim.errors import ScenarioError
from steward.sim.scenario import Scenario, load_scenario

Loader = Callable[[Path, Mapping[str, Any]], Scenario]


def _load_yaml(path: Path, overrides: Mapping[str, Any]) -> Scenario:
    return load_scenario(path, overrides)


def _load_event_log(path: Path, overrides: Mapping[str, Any]) -> Scenario:
    raise ScenarioError(
        f"{path.name}: replaying an exported event log needs the store's export format "
        "(steward audit export); until then pass the recorded trace: a scenario YAML with its trace CSV")


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
