"""What wakes the scheduler before its interval: events that may change a decision, not its own outcomes
or reports that only refine later choices."""

from __future__ import annotations

import json

import pytest

from steward.config import REPO_ROOT
from steward.scheduler.wake import QUIET_EVENTS, any_wakes, event_type_of, wakes_scheduler

EVENT_TYPES = sorted(p.name for p in (REPO_ROOT / "schema" / "events").iterdir() if p.is_dir())


@pytest.mark.parametrize(("event_type", "wakes"), [
    ("JobSubmitted", True),       # new demand
    ("JobRequeued", True),        # demand again (preempted, lost)
    ("JobCompleted", True),       # GPUs freed
    ("JobFailed", True),
    ("JobCancelled", True),
    ("JobLost", True),
    ("JobPreempted", True),
    ("NodeRegistered", True),     # capacity
    ("NodeResumed", True),
    ("NodeDrainRequested", True),
    ("AllocationsSet", True),     # shares change the order
    ("PolicySet", True),
    ("ProtectionRevoked", True),  # an idle session becomes preemptible
    ("SessionCapReached", True),
    ("JobPlaced", False),         # the scheduler's own outcomes: it cycles again at once after deciding
    ("JobPreemptionRequested", False),
    ("JobDeferred", False),
    ("JobStarted", False),        # reports that change no decision now
    ("ExecutorHeartbeat", False),
    ("CheckpointSaved", False),
    ("CommandRejected", False),
    ("SomethingNew", True),       # an unknown type wakes it: the safe side
])
def test_which_events_wake_the_scheduler(event_type: str, wakes: bool) -> None:
    assert wakes_scheduler(event_type) is wakes


def test_every_quiet_event_is_a_real_event_type() -> None:
    """A misspelt entry would silently make that event wake the scheduler (harmless) and the intended one
    keep waking it; the list must name recorded event types."""
    assert set(QUIET_EVENTS) <= set(EVENT_TYPES), sorted(set(QUIET_EVENTS) - set(EVENT_TYPES))


def raw(event_type: str) -> bytes:
    return json.dumps({"type": event_type, "payload": {}, "position": 1}).encode()


@pytest.mark.parametrize(("values", "wakes"), [
    ([], False),
    ([raw("JobStarted"), raw("ExecutorHeartbeat")], False),
    ([raw("JobStarted"), raw("JobSubmitted")], True),
    ([b"not json"], True),        # unreadable: wake (a cycle is harmless), never drop
    ([None], True),
    ([b"[1, 2]"], True),
])
def test_a_batch_wakes_when_any_event_in_it_does(values: list[bytes | None], wakes: bool) -> None:
    assert any_wakes(values) is wakes


def test_event_type_of_reads_the_type_or_nothing() -> None:
    assert event_type_of(raw("JobSubmitted")) == "JobSubmitted"
    assert event_type_of(b"{") == ""
    assert event_type_of(b'"text"') == ""
