"""Snapshot chains (a base, then deltas of the changed jobs) on a real SQLite store: written
incrementally they equal those written in one go, and a chain that is broken or not tied to the log is
never used (time travel still equals the reference fold)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from steward.audit.snapshots import Snapshotter, open_view, save_snapshot, state_at_position, take_snapshots
from steward.domain.commands import MapNamespace
from steward.ledger.ledger import Ledger
from steward.store import snapshotparts
from steward.store.eventstore import EventStore
from steward.store.leases import Fenced, LeaseStore
from steward.store.migrate import upgrade
from steward.store.projections import Projector
from steward.store.snapshotparts import encode_delta
from tests.unit.store.builders import history_messages, msg, setup_commands
from tests.unit.store.contract import fold_upto, run_history


def fresh(tmp_path: Path, name: str) -> EventStore:
    url = f"sqlite:///{tmp_path / name}"
    upgrade(url)
    return EventStore.from_url(url)


def stored(store: EventStore) -> list[tuple[int, str, str]]:
    with store.engine.connect() as conn:
        result = conn.execute(text("SELECT position, format, digest FROM snapshots ORDER BY position"))
        rows = [(int(p), str(f), str(d)) for p, f, d in result.tuples()]
        conn.rollback()
    return rows


def test_a_writer_called_after_every_batch_saves_what_one_call_saves(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshotparts, "SNAPSHOT_BLOCK", 4)
    once, often = fresh(tmp_path, "once.db"), fresh(tmp_path, "often.db")
    run_history(once, jobs=20, batch=5)
    clock = [1_000.0]
    ledger = Ledger(often, clock=lambda: clock[0])
    messages = list(history_messages(20))
    for i in range(0, len(messages), 5):
        ledger.process(messages[i:i + 5], {("steward.commands", 0): i + 5})
        clock[0] += 1.0
        take_snapshots(often, every=7, base_every=35)
    take_snapshots(once, every=7, base_every=35)
    assert [(p, f) for p, f, _ in stored(once)] == [(p, f) for p, f, _ in stored(often)]
    for position, _, _ in stored(once):  # the same state (the message ids, so the hashes, differ)
        a, b = open_view(once, position), open_view(often, position)
        assert a is not None and b is not None and (a.position, b.position) == (position, position)
        assert sorted(a.rows()) == sorted(b.rows()) and a.counts == b.counts and a.nodes == b.nodes
        assert len(a.chain) == len(b.chain)
    kinds = [f[:9] for _, f, _ in stored(once)]
    assert kinds[0] == "parts-2b:" and "parts-2d:" in kinds and kinds.count("parts-2b:") >= 2


def check_every_position(store: EventStore) -> None:
    for rec in [None, *store.read()]:
        position = rec.position if rec else 0
        st = state_at_position(store, position)
        assert st.position == position
        assert st.state() == fold_upto(store, position), position


def test_a_chain_with_a_missing_delta_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshotparts, "SNAPSHOT_BLOCK", 4)
    store = fresh(tmp_path, "s.db")
    run_history(store, jobs=20, batch=5)
    take_snapshots(store, every=6, base_every=60)
    deltas = [p for p, f, _ in stored(store) if f.startswith("parts-2d:")]
    assert len(deltas) >= 4
    gone = deltas[1]
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM snapshots WHERE position = :p"), {"p": gone})
    after = [p for p in deltas if p > gone]
    view = open_view(store, after[0])
    assert view is not None and view.position < gone  # the base (or earlier), not the broken chain
    check_every_position(store)


def test_a_snapshot_not_tied_to_the_log_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delta whose digest is right but whose head hash is not the log's at its position (a snapshot of
    another history) is skipped."""
    monkeypatch.setattr(snapshotparts, "SNAPSHOT_BLOCK", 4)
    store = fresh(tmp_path, "s.db")
    run_history(store, jobs=20, batch=5)
    writer = Snapshotter(store, every=10, base_every=1_000)
    writer.run(upto=40)
    assert writer.last is not None and writer.base is not None
    proj = writer.proj
    assert isinstance(proj, Projector)
    forged = Projector(**{**{f: getattr(proj, f) for f in ("allocations", "nodes", "jobs", "used", "policy",
                                                           "positions")}, "position": 50,
                          "recorded_at": proj.recorded_at, "head_hash": "f" * 64})
    save_snapshot(store, 50, proj.recorded_at, "f" * 64,
                  encode_delta(forged, dict(writer.counts), [], writer.base, writer.last), False)
    view = open_view(store, 55)
    assert view is not None and view.position == 40
    check_every_position(store)


def test_snapshots_keep_the_namespace_mappings_the_ledger_decides_with(tmp_path: Path) -> None:
    """ADR 0056: the ledger's state folds the namespace mappings (its rule for a cluster's submissions reads
    them), so a base and a delta carry them, and a ledger started from a snapshot has them."""
    store = fresh(tmp_path, "namespaces.db")
    ledger = Ledger(store, clock=lambda: 1_000.0)
    ledger.process([msg(c) for c in setup_commands()] + [
        msg(MapNamespace("k8s", "team", "r1", "the team")), msg(MapNamespace("k8s", "gone", "r2", "for now"))], {})
    take_snapshots(store, every=1, base_every=100)
    ledger.process([msg(MapNamespace("k8s", "gone", "", "moved out")), msg(MapNamespace("sim", "x", "p1", "x"))], {})
    take_snapshots(store, every=1, base_every=100)
    want = {("k8s", "team"): "r1", ("sim", "x"): "p1"}
    view = open_view(store)
    assert view is not None and view.position == ledger.head and view.chain[-1].kind == "delta"
    assert view.projector().namespaces == want == ledger.state.namespaces
    assert Ledger(store).state.namespaces == want


def test_a_writer_whose_save_was_refused_saves_that_snapshot_at_its_next_run(tmp_path: Path) -> None:
    """A save refused by the fence (ADR 0097) or failed left the writer's folded state past what was stored, and
    its next run found nothing new to fold: the snapshot due there was never saved. A failed run now reads the
    stored state again."""
    store = fresh(tmp_path, "refused.db")
    run_history(store, jobs=5, batch=5)
    leases = LeaseStore(store.engine, "ledger")
    assert leases.take("a", None, 3.0) == 1
    seen, _ = leases.read()
    assert leases.take("b", seen, 3.0) == 2
    leases.close()
    every = max(1, store.head() // 2)
    with pytest.raises(Fenced):
        take_snapshots(store, every=every, fence=("ledger", 1))
    assert stored(store) == []
    assert take_snapshots(store, every=every, fence=("ledger", 2)) == store.head() // every
    assert [p for p, _, _ in stored(store)] == [every * k for k in range(1, store.head() // every + 1)]
