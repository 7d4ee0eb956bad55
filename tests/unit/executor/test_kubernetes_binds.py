"""The rules of the Kubernetes executor's own binds (ADR 0088): which placements it reads from the log it binds
itself, the attempt fence, and which binds the log has ended before a start claimed them. Pure: events in, answers
out (the binds against a real API server are in tests/integration/test_kubernetes_executor.py)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.executor.attempts import AttemptRecord
from steward.executor.kubernetes_binds import Book, Current, Placement, bindable, claimed, fence, follow, orphans


def placed(job: str, attempt: int, nodes: dict[str, list[int]] | None = None, executor: str = "k8s",
           job_class: str = "batch") -> dict[str, Any]:
    return {"streamId": f"job-{job}", "type": "JobPlaced",
            "payload": {"job_id": job, "attempt": attempt, "executor": executor, "job_class": job_class,
                        "assignments": nodes or {"n1": [0]}, "evidence": {"rank": 1}}}


def ended(job: str, kind: str, attempt: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"job_id": job} | ({"attempt": attempt} if attempt is not None else {})
    return {"streamId": f"job-{job}", "type": kind, "payload": payload}


P1 = Placement("k8s.t.a", 1, "k8s", {"n1": [0]})
P2 = Placement("k8s.t.a", 2, "k8s", {"n1": [0]})

# (case, events, the placements the read gives, each job's current attempt after it)
FOLLOW: list[tuple[str, list[dict[str, Any]], list[Placement], dict[str, Current]]] = [
    ("a placement", [placed("k8s.t.a", 1)], [P1], {"k8s.t.a": Current(1, True)}),
    ("started stays live", [placed("k8s.t.a", 1), ended("k8s.t.a", "JobStarted", 1)], [P1],
     {"k8s.t.a": Current(1, True)}),
    ("cancelled in the same read", [placed("k8s.t.a", 1), ended("k8s.t.a", "JobCancelled", 1)], [],
     {"k8s.t.a": Current(1, False)}),
    ("lost, then placed again", [placed("k8s.t.a", 1), ended("k8s.t.a", "JobLost", 1), placed("k8s.t.a", 2)],
     [P2], {"k8s.t.a": Current(2, True)}),
    ("an end of an older attempt leaves the new one live",
     [placed("k8s.t.a", 2), ended("k8s.t.a", "JobRequeued", 1)], [P2], {"k8s.t.a": Current(2, True)}),
    ("an end without an attempt ends the current one", [placed("k8s.t.a", 1), ended("k8s.t.a", "JobFailed")],
     [], {"k8s.t.a": Current(1, False)}),
    ("a stale older placement read after a newer one", [placed("k8s.t.a", 2), placed("k8s.t.a", 1)], [P2],
     {"k8s.t.a": Current(2, True)}),
    ("an ended placement read again stays ended",
     [placed("k8s.t.a", 1), ended("k8s.t.a", "JobCancelled", 1), placed("k8s.t.a", 1)], [],
     {"k8s.t.a": Current(1, False)}),
    ("the same placement read twice", [placed("k8s.t.a", 1), placed("k8s.t.a", 1)], [P1, P1],
     {"k8s.t.a": Current(1, True)}),
    ("an end of a job placed before this process read (a restart)", [ended("k8s.t.b", "JobCancelled", 1)], [],
     {"k8s.t.b": Current(1, False)}),
    ("an end naming no attempt of a job never seen", [ended("k8s.t.b", "JobCompleted")], [], {}),
    ("a malformed placement is skipped", [{"streamId": "job-k8s.t.c", "type": "JobPlaced", "payload": {}}], [], {}),
    ("not a job's stream", [{"streamId": "node-n1", "type": "JobPlaced", "payload": {"attempt": 1}}], [], {}),
    ("a gang's class and nodes", [placed("k8s.t.g", 1, {"n1": [0, 1], "n2": [0]}, job_class="interactive")],
     [Placement("k8s.t.g", 1, "k8s", {"n1": [0, 1], "n2": [0]}, "interactive")], {"k8s.t.g": Current(1, True)}),
]


@pytest.mark.parametrize(("case", "events", "new", "current"), FOLLOW, ids=[c[0] for c in FOLLOW])
def test_follow(case: str, events: list[dict[str, Any]], new: list[Placement], current: dict[str, Current]) -> None:
    book = Book()
    assert follow(book, events) == new
    assert book.current == current
    assert set(book.placed) == {(j, c.attempt) for j, c in current.items() if c.live}


def test_follow_reads_on_from_where_it_was() -> None:
    book = Book()
    assert follow(book, [placed("k8s.t.a", 1)]) == [P1]
    assert follow(book, [ended("k8s.t.a", "JobPreempted", 1)]) == []
    assert book.current["k8s.t.a"] == Current(1, False) and not book.placed
    assert follow(book, [placed("k8s.t.a", 2)]) == [P2]


# (case, attempt, attempts recorded, why not)
FENCE: list[tuple[str, int, list[int], str | None]] = [
    ("nothing recorded", 1, [], None),
    ("the same attempt", 2, [2], None),
    ("older ones", 3, [1, 2], None),
    ("a newer one", 1, [2], "attempt 2 is newer"),
    ("the newest named", 1, [3, 2], "attempt 3 is newer"),
]


@pytest.mark.parametrize(("case", "attempt", "recorded", "why"), FENCE, ids=[c[0] for c in FENCE])
def test_fence(case: str, attempt: int, recorded: list[int], why: str | None) -> None:
    assert fence(attempt, recorded) == why


LIVE = Current(1, True)
# (case, placement, nodes registered, current, recorded, submitted, why not)
BINDABLE: list[tuple[str, Placement, set[str], Current | None, list[int], bool, str | None]] = [
    ("its own placement", P1, {"n1", "n2"}, LIVE, [], True, None),
    ("another executor's job id", Placement("other.t.a", 1, "k8s", {"n1": [0]}), {"n1"}, LIVE, [], True,
     "not a job this executor submitted"),
    ("no manifest: not submitted here", P1, {"n1"}, LIVE, [], False, "not a job this executor submitted"),
    ("placed on another executor", Placement("k8s.t.a", 1, "slurm", {"n1": [0]}), {"n1"}, LIVE, [], True,
     "placed on executor 'slurm'"),
    ("a node it did not register", Placement("k8s.t.a", 1, "k8s", {"n1": [0], "x9": [0]}), {"n1"}, LIVE, [],
     True, "placed on nodes this executor did not register: x9"),
    ("no nodes at all", Placement("k8s.t.a", 1, "k8s", {}), {"n1"}, LIVE, [], True,
     "placed on nodes this executor did not register: none"),
    ("ended since", P1, {"n1"}, Current(1, False), [], True, "no longer the job's live attempt"),
    ("a newer attempt placed since", P1, {"n1"}, Current(2, True), [], True, "no longer the job's live attempt"),
    ("not read", P1, {"n1"}, None, [], True, "no longer the job's live attempt"),
    ("bound by its start already", P1, {"n1"}, LIVE, [1], True, "bound already"),
    ("a newer attempt recorded here", P1, {"n1"}, LIVE, [2], True, "attempt 2 is newer"),
    ("a later attempt after older ones", P2, {"n1"}, Current(2, True), [1], True, None),
]


@pytest.mark.parametrize(("case", "p", "nodes", "current", "recorded", "submitted", "why"), BINDABLE,
                         ids=[c[0] for c in BINDABLE])
def test_bindable(case: str, p: Placement, nodes: set[str], current: Current | None, recorded: list[int],
                  submitted: bool, why: str | None) -> None:
    assert bindable(p, "k8s", nodes, current, recorded, submitted) == why


# (case, unclaimed binds, the log's current attempts, the ones to delete)
ORPHANS: list[tuple[str, list[tuple[str, int]], dict[str, Current], list[tuple[str, int]]]] = [
    ("still placed", [("a", 1)], {"a": Current(1, True)}, []),
    ("cancelled before its start", [("a", 1)], {"a": Current(1, False)}, [("a", 1)]),
    ("a newer attempt placed", [("a", 1)], {"a": Current(2, True)}, [("a", 1)]),
    ("not read yet (a restart)", [("a", 1)], {}, []),
    ("some of several", [("a", 1), ("b", 3)], {"a": Current(1, True), "b": Current(3, False)}, [("b", 3)]),
]


@pytest.mark.parametrize(("case", "unclaimed", "current", "gone"), ORPHANS, ids=[c[0] for c in ORPHANS])
def test_orphans(case: str, unclaimed: list[tuple[str, int]], current: dict[str, Current],
                 gone: list[tuple[str, int]]) -> None:
    assert orphans(unclaimed, current) == gone


@pytest.mark.parametrize(("extra", "expected"), [
    ({"pods": ["t/a"], "grace_s": 120.0}, True),  # bound by a start
    ({"pods": ["t/a"], "fast": True}, False),  # bound from its placement, no start yet
    ({"pods": ["t/a"], "fast": True, "claimed": True}, True),
])
def test_claimed(extra: dict[str, Any], expected: bool) -> None:
    assert claimed(AttemptRecord("k8s.t.a", 1, [], {"n1": [0]}, "", "batch", extra=extra)) is expected
