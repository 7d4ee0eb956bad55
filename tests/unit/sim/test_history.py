"""`--from-events` on the NDJSON of `steward audit export`: the export is produced by the real store
(SQLite, the embedded default) and the real exporter, then folded into a scenario and replayed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from steward.audit.export import write_ndjson
from steward.domain.events import Event
from steward.sim.errors import ScenarioError
from steward.sim.history import load_history
from steward.sim.run import replay
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.migrate import upgrade
from steward.store.recorder import EventRecorder

T0 = 1_700_000_000.0


def _record(store: EventStore, at: float, *events: Event) -> None:
    with store.engine.begin() as conn:
        EventRecorder(store).append(conn, [PendingAppend(list(events), {"actor": "test"})], now=at)


def submitted(job_id: str, project: str, gpus: int, at: float, klass: str = "batch", min_rt: float = 3600.0) -> Event:
    return Event(f"job-{job_id}", "JobSubmitted", {
        "command": ["train"], "gpus": gpus, "job_class": klass, "job_id": job_id, "min_runtime_s": min_rt,
        "priority": 0, "project": project, "resumable": True, "submitted_at": at,
    })


def started(job_id: str, at: float) -> Event:
    return Event(f"job-{job_id}", "JobStarted",
                 {"attempt": 1, "job_id": job_id, "pid": 1, "protected_until": at + 3600.0, "started_at": at})


def ended(job_id: str, kind: str = "JobCompleted") -> Event:
    return Event(f"job-{job_id}", kind, {"attempt": 1, "exit_code": 0, "job_id": job_id})


@pytest.fixture()
def export(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    _record(store, T0,
            Event("allocation-cluster", "AllocationsSet",
                  {"parent": "cluster", "shares": {"lab": 1.0}, "reason": "setup"}),
            Event("allocation-lab", "AllocationsSet",
                  {"parent": "lab", "shares": {"a": 0.6, "b": 0.4}, "reason": "setup"}),
            *(Event(f"node-n{i}", "NodeRegistered",
                    {"executor": f"e{i}", "gpu_model": "V100", "gpus": 8, "node_id": f"n{i}",
                     "path": ["block0", f"n{i}"]}) for i in range(2)),
            Event("policy", "PolicySet", {"changed": {"window_s": 172800.0},
                                          "settings": {"window_s": 172800.0, "preemption_grace_s": 60.0,
                                                       "reservations": False},
                                          "reason": "two-day window"}))
    _record(store, T0 + 10, submitted("j1", "a", 8, T0 + 10), submitted("j2", "b", 4, T0 + 12))
    _record(store, T0 + 20, started("j1", T0 + 20), started("j2", T0 + 21))
    _record(store, T0 + 30, submitted("j3", "a", 1, T0 + 30, klass="debug", min_rt=300.0))
    _record(store, T0 + 40, started("j3", T0 + 40))
    _record(store, T0 + 340, ended("j3"))
    _record(store, T0 + 3620, ended("j1"))
    _record(store, T0 + 5000, submitted("never", "b", 2, T0 + 5000))  # never ran: left out
    _record(store, T0 + 7221, ended("j2", "JobFailed"))
    out = tmp_path / "history.ndjson"
    with out.open("w") as fh:
        write_ndjson(store, fh)
    return out


def test_the_export_folds_into_the_scenario_it_recorded(export: Path) -> None:
    sc = load_history(export)
    assert [(n.name, n.gpus, n.gpu_model, n.path) for n in sc.nodes] == [
        ("n0", 8, "V100", ("block0", "n0")), ("n1", 8, "V100", ("block0", "n1"))]
    assert {a.name: round(a.entitlement, 6) for a in sc.allocations.values()} == {"lab": 1.0, "a": 0.6, "b": 0.4}
    assert sc.policy.window_days == 2.0 and sc.policy.preemption_grace_s == 60.0
    assert sc.settings_overrides == {"reservations": False}
    jobs = {j.job_id: j for j in sc.jobs}
    assert set(jobs) == {"j1", "j2", "j3"}
    assert (jobs["j1"].submit_s, jobs["j1"].duration_s, jobs["j1"].gpus, jobs["j1"].tenant) == (0.0, 3600.0, 8, "a")
    assert (jobs["j2"].submit_s, jobs["j2"].duration_s) == (2.0, 7200.0)
    assert (jobs["j3"].job_class, jobs["j3"].min_runtime_s, jobs["j3"].duration_s) == ("debug", 300.0, 300.0)


def test_a_what_if_on_the_export_changes_shares_and_settings(export: Path) -> None:
    sc = load_history(export, {"share.a": "0.3", "share.b": "0.7", "window_days": "7", "reservations": "true"})
    assert {a.name: round(a.share, 6) for a in sc.allocations.values()} == {"lab": 1.0, "a": 0.3, "b": 0.7}
    assert sc.policy.window_days == 7.0 and sc.settings_overrides["reservations"] is True
    result = replay(export, "steward", {"share.a": "0.3", "share.b": "0.7"})
    assert result.figures["jobs"] == 3 and result.figures["protection_violations"] == 0
    assert result.recorder.unfinished == 0


def _lines(export: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in export.read_text().splitlines()]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda ls: ls[1:], "before the export header"),
    (lambda ls: [{**ls[0], "format": "steward-audit-export/9"}, *ls[1:]], "export format"),
    (lambda ls: [ls[0], *[x for x in ls[1:] if x.get("type") != "NodeRegistered"]], "no NodeRegistered"),
    (lambda ls: [ls[0], {**ls[1], "payload": {"parent": "cluster"}}, *ls[2:]], "line 2 (AllocationsSet): missing"),
    (lambda ls: [ls[0], *[{**x, "payload": {**x["payload"], "shares": {"a": 0.9, "b": 0.4}}}
                          if x.get("payload", {}).get("parent") == "lab" else x for x in ls[1:]]], "sum to 1.3"),
    (lambda ls: [ls[0], *[{**x, "payload": {**x["payload"], "gpus": 99}} if x.get("type") == "JobSubmitted"
                          else x for x in ls[1:]]], "needs 99 GPUs"),
    # robustness sweep, session 25: these escaped as `internal error: InvalidJob`, or ran silently (a NaN submit
    # time made every submit 0; an infinite one left the job waiting for ever)
    *[(lambda ls, k=key, v=value: [ls[0], *[{**x, "payload": {**x["payload"], k: v}} if x.get("type") == "JobSubmitted"
                                            else x for x in ls[1:]]], message)
      for key, value, message in [
          ("gpus", 0, "gpus must be a whole number >= 1, got 0"), ("gpus", -2, "got -2"),
          ("min_runtime_s", -5, "min_runtime_s is negative (-5)"),
          ("min_runtime_s", float("nan"), "'min_runtime_s' is not a finite number"),
          ("submitted_at", float("nan"), "'submitted_at' is not a finite number"),
          ("submitted_at", float("inf"), "'submitted_at' is not a finite number")]],
    (lambda ls: [ls[0], {**ls[1], "recorded_at": float("nan")}, *ls[2:]], "no finite numeric recorded_at"),
])
def test_a_bad_export_is_refused_naming_the_line(export: Path, tmp_path: Path, edit: Any, message: str) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text("".join(json.dumps(x) + "\n" for x in edit(_lines(export))))
    with pytest.raises(ScenarioError) as err:
        load_history(bad)
    assert message in str(err.value)


def test_a_line_that_is_not_json_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"kind": "header", "format": "steward-audit-export/1"}\n{oops\n')
    with pytest.raises(ScenarioError, match=r"bad\.ndjson line 2: not JSON"):
        load_history(bad)
