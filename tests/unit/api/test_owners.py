"""Who owns a job (steward.auth.owners): the person whose command recorded its first owning event, so "my
jobs" and Job.owner name the researcher who opened a session, not the worker that records its
`SessionOpened` afterwards (issue 24 "Acting from the UI": my sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.auth.owners import Owner, Owners
from steward.domain.events import Event
from steward.store.eventstore import EventStore, PendingAppend
from steward.store.migrate import upgrade
from steward.store.recorder import EventRecorder


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def record(store: EventStore, stream: str, type_: str, actor: str, name: str = "") -> None:
    meta = {"actor": actor} | ({"actor_name": name} if name else {})
    with store.engine.begin() as conn:
        EventRecorder(store).append(conn, [PendingAppend([Event(stream, type_, {})], meta)])


@pytest.mark.parametrize(("events", "job", "owner"), [
    # a batch job: its submitter
    ([("job-j1", "JobSubmitted", "rui", "Rui R")], "j1", Owner("rui", "Rui R")),
    # a session: opened by the researcher, its SessionOpened recorded later by the worker running it
    ([("job-s1", "JobSubmitted", "rui", "Rui R"), ("job-s1", "SessionOpened", "temporal-worker", "")], "s1",
     Owner("rui", "Rui R")),
    # ... and again when it re-opens after a requeue
    ([("job-s2", "JobSubmitted", "ada", ""), ("job-s2", "SessionOpened", "temporal-worker", ""),
      ("job-s2", "SessionOpened", "temporal-worker", "")], "s2", Owner("ada", "")),
    # an event of another kind names no owner
    ([("job-j3", "JobCancelled", "rui", "")], "j3", None),
])
def test_the_first_owning_event_names_the_owner(store: EventStore, events: list[tuple[str, str, str, str]],
                                                 job: str, owner: Owner | None) -> None:
    for stream, type_, actor, name in events:
        record(store, stream, type_, actor, name)
    owners = Owners(store)
    assert owners.of(job) == owner
    if owner is not None:
        assert owners.jobs_of(owner.subject) == {job}
    assert owners.jobs_of("temporal-worker") == frozenset()


def test_read_in_steps_it_still_keeps_the_first(store: EventStore) -> None:
    """The index reads only what was recorded since it last looked: the worker's event, read in a later
    step than the submission, does not take the session over."""
    owners = Owners(store)
    record(store, "job-s1", "JobSubmitted", "rui", "Rui R")
    assert owners.of("s1") == Owner("rui", "Rui R")
    record(store, "job-s1", "SessionOpened", "temporal-worker")
    assert owners.of("s1") == Owner("rui", "Rui R")
    assert owners.jobs_of("rui") == {"s1"}
    assert owners.jobs_of("temporal-worker") == frozenset()
