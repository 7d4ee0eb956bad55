"""The jobs projection carries the current attempt's contract times as its events recorded them (issues 20
and 24): `protected_until` from `JobStarted`, `session_cap_at` and `session_warnings_at` from
`SessionOpened`, none while a job waits for an attempt. The web client showed every session "7 h 59 min
left" because it estimated the cap itself (start + 8 h) where the API had no field; these rows are what the
API's `Job.protectedUntil`, `sessionCapAt` and `sessionWarningsAt` read, so no client computes them again.

Each case is a history of commands decided by the domain; after each step the job's row must hold exactly
the fields the recorded events say (read from the events, not recomputed)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.domain.commands import (
    CancelJob,
    OpenSession,
    PlaceJob,
    ReachSessionCap,
    RegisterNode,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    RequestPreemption,
    RestoreSession,
    RevokeProtection,
    SetAllocations,
    SubmitJob,
)
from steward.domain.decide import decide
from steward.domain.events import Event
from steward.store.projections import Projector, job_row

SETUP = [SetAllocations("cluster", {"a": 1.0}, "t"), RegisterNode("n0", 4, "H100", ["z", "n0"])]
CAP, WARNINGS = 50_000.0, [46_400.0, 49_100.0, 49_700.0]


def _recorded(events: list[Event], kind: str, job_id: str) -> dict[str, Any]:
    return next(e.payload for e in reversed(events) if e.type == kind and e.payload.get("job_id") == job_id)


# What the row must say after a step: a field's expected value, or a callable reading it from the events
# recorded so far (the truth the projection must copy, not compute).
def started(job_id: str) -> Any:
    return lambda evs: _recorded(evs, "JobStarted", job_id)["protected_until"]


def opened_cap(job_id: str) -> Any:
    return lambda evs: _recorded(evs, "SessionOpened", job_id)["cap_at"]


def opened_warnings(job_id: str) -> Any:
    return lambda evs: list(_recorded(evs, "SessionOpened", job_id)["warnings_at"])


NONE = {"protected_until": None, "session_cap_at": None, "session_warnings_at": None}
BATCH, SESSION = SubmitJob("j", "a", 1, 600.0, ["run"], True, "batch"), SubmitJob("s", "a", 1, 0.0, ["nb"], True,
                                                                                  "interactive")

# (name, [(command, job whose row is checked, expected fields after it)])
CASES: list[tuple[str, list[tuple[Any, str, dict[str, Any]]]]] = [
    ("funded batch start", [
        (BATCH, "j", NONE),
        (PlaceJob("j", {"n0": [0]}, True), "j", NONE),
        (ReportJobStarted("j", 1, 7), "j",
         {"protected_until": started("j"), "session_cap_at": None, "session_warnings_at": None}),
        (ReportJobExited("j", 1, 0), "j", {"protected_until": started("j"), "session_cap_at": None}),
    ]),
    ("unfunded batch start: protection ends at the start", [
        (BATCH, "j", NONE),
        (PlaceJob("j", {"n0": [0]}, False), "j", NONE),
        (ReportJobStarted("j", 1, 7), "j", {"protected_until": started("j")}),
    ]),
    ("preempt and requeue clear the attempt, a new attempt records its own", [
        (BATCH, "j", NONE),
        (PlaceJob("j", {"n0": [0]}, True), "j", NONE),
        (ReportJobStarted("j", 1, 7), "j", {"protected_until": started("j")}),
        (RequestPreemption("j", "operator", 1), "j", {"protected_until": started("j")}),
        (ReportJobPreempted("j", 1, "operator", 0, checkpoint_path="/c"), "j", NONE),
        (PlaceJob("j", {"n0": [1]}, True), "j", NONE),
        (ReportJobStarted("j", 2, 8), "j", {"protected_until": started("j")}),
    ]),
    ("a lost job is requeued without its times", [
        (BATCH, "j", NONE),
        (PlaceJob("j", {"n0": [0]}, True), "j", NONE),
        (ReportJobStarted("j", 1, 7), "j", {"protected_until": started("j")}),
        (ReportJobLost("j", 1, "node gone"), "j", NONE),
    ]),
    ("session open records its cap and warnings", [
        (SESSION, "s", NONE),
        (PlaceJob("s", {"n0": [0]}, True), "s", NONE),
        (ReportJobStarted("s", 1, 7), "s",
         {"protected_until": started("s"), "session_cap_at": None, "session_warnings_at": None}),
        (OpenSession("s", 1, CAP, WARNINGS), "s",
         {"protected_until": started("s"), "session_cap_at": opened_cap("s"),
          "session_warnings_at": opened_warnings("s")}),
    ]),
    ("revoked protection ends at the revocation, the cap stays", [
        (SESSION, "s", NONE),
        (PlaceJob("s", {"n0": [0]}, True), "s", NONE),
        (ReportJobStarted("s", 1, 7), "s", {"protected_until": started("s")}),
        (OpenSession("s", 1, CAP, WARNINGS), "s", {"session_cap_at": opened_cap("s")}),
        (RevokeProtection("s", 1, "idle"),
         "s", {"protected_until": lambda evs: _recorded(evs, "ProtectionRevoked", "s")["revoked_at"],
               "session_cap_at": opened_cap("s"), "session_warnings_at": opened_warnings("s")}),
    ]),
    ("restore: the stopped session keeps its last times, the new one has none until it opens", [
        (SESSION, "s", NONE),
        (PlaceJob("s", {"n0": [0]}, True), "s", NONE),
        (ReportJobStarted("s", 1, 7), "s", {"protected_until": started("s")}),
        (OpenSession("s", 1, CAP, WARNINGS), "s", {"session_cap_at": opened_cap("s")}),
        (ReachSessionCap("s", 1, "stop"), "s", {"session_cap_at": opened_cap("s")}),
        (RequestPreemption("s", "operator", 1, requeue=False), "s", {"session_cap_at": opened_cap("s")}),
        (ReportJobPreempted("s", 1, "operator", 0, checkpoint_path="/c"), "s",
         {"session_cap_at": opened_cap("s"), "session_warnings_at": opened_warnings("s")}),
        (RestoreSession("s", "s2"), "s2", NONE),
        (PlaceJob("s2", {"n0": [0]}, True), "s2", NONE),
        (ReportJobStarted("s2", 1, 9), "s2", {"protected_until": started("s2")}),
        (OpenSession("s2", 1, 90_000.0, [89_000.0]), "s2",
         {"session_cap_at": 90_000.0, "session_warnings_at": [89_000.0]}),
    ]),
    ("a cancelled session keeps the times of its last attempt", [
        (SESSION, "s", NONE),
        (PlaceJob("s", {"n0": [0]}, True), "s", NONE),
        (ReportJobStarted("s", 1, 7), "s", {"protected_until": started("s")}),
        (OpenSession("s", 1, CAP, WARNINGS), "s", {"session_cap_at": opened_cap("s")}),
        (CancelJob("s", "done"), "s", {"session_cap_at": opened_cap("s"), "session_warnings_at": WARNINGS}),
    ]),
]


@pytest.mark.parametrize(("name", "steps"), CASES, ids=[c[0] for c in CASES])
def test_the_jobs_projection_carries_the_recorded_contract_times(
        name: str, steps: list[tuple[Any, str, dict[str, Any]]]) -> None:
    proj, recorded, now = Projector(), [], 0.0
    for command in SETUP:
        for ev in decide(proj.view(), command, now):
            proj.apply(ev, now, proj.position + 1)
    for command, job_id, expected in steps:
        now += 1_000.0  # past a 600 s protection
        events = decide(proj.view(), command, now)
        assert events and all(e.type != "CommandRejected" for e in events), command
        for ev in events:
            proj.apply(ev, now, proj.position + 1)
            recorded.append(ev)
        row = job_row(proj.jobs[job_id], proj.positions[("j", job_id)])
        for column, want in expected.items():
            value = want(recorded) if callable(want) else want
            assert row[column] == value, f"{name}: {type(command).__name__} -> {column}"
        # the same row as the whole-log fold (the rebuild) and the live read model write it
        assert proj.rows()["proj_jobs"][sorted(proj.jobs).index(job_id)] == row


def test_warnings_recorded_as_integers_read_back_as_floats() -> None:
    """Canonical JSON writes 1400.0 as 1400: a stored SessionOpened decodes with ints; the row holds floats."""
    proj, now = Projector(), 0.0
    for command in [*SETUP, SESSION, PlaceJob("s", {"n0": [0]}, True), ReportJobStarted("s", 1, 7)]:
        for ev in decide(proj.view(), command, now):
            proj.apply(ev, now, proj.position + 1)
    opened = Event("job-s", "SessionOpened", {"job_id": "s", "attempt": 1, "cap_at": 5000, "warnings_at": [1400]})
    proj.apply(opened, now, proj.position + 1)
    row = job_row(proj.jobs["s"], proj.positions[("j", "s")])
    assert row["session_cap_at"] == 5000 and row["session_warnings_at"] == [1400.0]
    assert all(isinstance(w, float) for w in row["session_warnings_at"])
