"""`steward.store.leases.lead`, the one candidacy loop of the roles with standbys (ADR 0060): each turn warms up
first (`warm_up`: the ledger's fetch and writer processes), then waits for the lease, runs the active part with
its epoch, steps down on `Fenced` and warms up again, and leaves the warm-up at every end of a turn. On the
embedded store (the lease by expiry alone)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from steward.store import schema
from steward.store.eventstore import EventStore
from steward.store.leases import Active, Fenced, LeaseStore, fenced_transaction, lead
from steward.store.migrate import upgrade


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def run(store: EventStore, stop: threading.Event, **kwargs: object) -> threading.Thread:
    thread = threading.Thread(target=lead, args=(store.engine, "ledger", stop),
                              kwargs={"registry": CollectorRegistry(), **kwargs}, daemon=True)
    thread.start()
    return thread


def test_each_turn_warms_up_before_the_lease_and_cools_down_after_it(store: EventStore) -> None:
    """Turn 1: warm, active with epoch 1, refused by the store (`Fenced`): steps down, cooled. Turn 2: warm again,
    active with a new epoch, then stopped: cooled, and the lease given up (expired at once)."""
    stop = threading.Event()
    steps: list[str] = []
    epochs: list[int] = []

    @contextmanager
    def warm_up(_stop: threading.Event) -> Iterator[Active]:
        steps.append("warm")

        def active(active_stop: threading.Event, epoch: int) -> None:
            steps.append(f"active {epoch}")
            epochs.append(epoch)
            if len(epochs) == 1:
                raise Fenced("ledger", epoch, epoch + 1)
            stop.set()

        try:
            yield active
        finally:
            steps.append("cool")

    run(store, stop, warm_up=warm_up).join(10)
    assert steps == ["warm", "active 1", "cool", "warm", f"active {epochs[1]}", "cool"]
    assert epochs[1] > 1  # a standby again after the refusal: the next turn took a new epoch
    lease, now = LeaseStore(store.engine, "ledger").read()
    assert lease is not None and lease.expires_at <= now  # a clean stop lets the lease expire at once


def test_a_candidate_stopped_while_standing_by_leaves_its_warm_up(store: EventStore) -> None:
    holder = LeaseStore(store.engine, "ledger")
    assert holder.take("other", None, 60.0) == 1  # a live active elsewhere: this candidate stands by
    stop = threading.Event()
    steps: list[str] = []

    @contextmanager
    def warm_up(_stop: threading.Event) -> Iterator[Active]:
        steps.append("warm")
        try:
            yield lambda active_stop, epoch: steps.append("active")
        finally:
            steps.append("cool")

    thread = run(store, stop, warm_up=warm_up)
    thread.join(1.0)
    assert steps == ["warm"]
    stop.set()
    thread.join(10)
    assert steps == ["warm", "cool"] and not thread.is_alive()


def test_without_a_warm_up_the_active_part_runs_as_before(store: EventStore) -> None:
    stop = threading.Event()
    seen: list[int] = []

    def active(active_stop: threading.Event, epoch: int) -> None:
        seen.append(epoch)
        stop.set()

    run(store, stop, run_active=active).join(10)
    assert seen == [1]


@pytest.mark.parametrize("kwargs", [{}, {"run_active": lambda s, e: None, "warm_up": lambda s: None}])
def test_lead_takes_one_active_part(store: EventStore, kwargs: dict[str, object]) -> None:
    with pytest.raises(TypeError, match="run_active or warm_up"):
        lead(store.engine, "ledger", threading.Event(), registry=CollectorRegistry(), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("fence", "refused"), [
    (None, False),              # no standbys (benchmarks, tools): a plain transaction
    (("ledger", 2), False),     # the lease's epoch: written
    (("ledger", 1), True),      # an old active's side write, after a standby took over: refused
    (("scheduler", 1), True),   # a role whose lease was never taken
])
def test_a_side_write_is_fenced_like_a_batch(store: EventStore, fence: tuple[str, int] | None,
                                             refused: bool) -> None:
    """ADR 0097: the outbox relay's position, checkpoints and snapshots are written in `fenced_transaction`, which
    checks the lease's epoch before the caller writes; a refused side write leaves nothing behind."""
    leases = LeaseStore(store.engine, "ledger")
    assert leases.take("a", None, 3.0) == 1
    seen, _ = leases.read()
    assert leases.take("b", seen, 3.0) == 2
    leases.close()
    table = schema.relay_positions

    def save() -> None:
        with fenced_transaction(store.engine, fence) as conn:
            conn.execute(table.insert().values(relay="events-topic", position=7))

    if refused:
        with pytest.raises(Fenced):
            save()
    else:
        save()
    with store.engine.connect() as conn:
        saved = conn.execute(select(table.c.position)).scalars().all()
    assert saved == ([] if refused else [7])
