"""The leases of roles with standbys in the store (ADR 0060): read, take, renew and give up a role's lease.

The rule of who takes, renews or steps down is `steward.domain.leadership` (pure); this module only reads the
lease with the store's clock and whether its holder's connection is open, and applies a change as a compare and
set on the epoch the candidate read. Taking a role that writes the log (`head_lock`) also takes the head lock,
so it waits for the old active's open batch (which checks its epoch under that lock) to end: once a takeover
commits, no batch of the old epoch can commit. What the log's writer derives beside the log (the outbox relay's
position, checkpoints, snapshots) is written in a `fenced_transaction`, under the side-write lock taken shared;
a takeover takes it exclusively too (ADR 0097), so no side write of the old epoch commits after it either. An old
active paused in the middle of a batch or a side write would hold its lock for ever: after `HEAD_LOCK_WAIT_S`
the new holder ends the transactions that hold them (their backends), which the lease's expiry entitles it to.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from sqlalchemy import Connection, Engine, bindparam, text
from sqlalchemy.exc import OperationalError

from steward.domain.leadership import LEASE_TTL_S, POLL_EVERY_S, RENEW_EVERY_S, Lease, Step, fenced, step
from steward.store.eventstore import POSITION_LOCK_KEY, SIDE_WRITE_LOCK_KEY

log = logging.getLogger("steward.store.leases")

HEAD_LOCK_WAIT_S = 1.0

class Fenced(RuntimeError):
    """The writer's fencing epoch is not its role's lease's (ADR 0060): a standby took over while this writer
    was paused or cut off. Nothing of the batch is committed; the writer steps down."""

    def __init__(self, role: str, epoch: int, lease_epoch: int | None) -> None:
        super().__init__(f"fenced: this {role} writes with epoch {epoch} but the lease has epoch {lease_epoch} "
                         "(a standby took over); refused by the store")
        self.role = role
        self.epoch = epoch
        self.lease_epoch = lease_epoch


# a writer's fence: the role whose lease it holds and the epoch it holds it with (ADR 0060)
Fence = tuple[str, int]


def fence_sql(fence: Fence) -> str:
    """The lease's epoch of the fence's role, read under the writer's lock (its own snapshot, after the lock)."""
    role = fence[0].replace("'", "''")
    return f"SELECT epoch FROM leader_leases WHERE role = '{role}'"


def check_fence(fence: Fence, lease_epoch: int | None) -> None:
    """Raise `Fenced` when the store's lease epoch refuses a write with `fence`."""
    if fenced(fence[1], lease_epoch):
        raise Fenced(fence[0], fence[1], lease_epoch)


@contextmanager
def fenced_transaction(engine: Engine, fence: Fence | None) -> Iterator[Connection]:
    """A transaction of a side write of the log's writer (ADR 0097): with a `fence`, on PostgreSQL it takes the
    side-write lock shared (side writes wait neither for each other nor for a batch) and checks the lease's epoch
    before the caller writes anything (`Fenced`); a takeover takes that lock exclusively. Without a fence (no
    standbys: benchmarks, tools) a plain transaction."""
    with engine.begin() as conn:
        if fence is not None:
            if engine.dialect.name == "postgresql":
                conn.execute(text(f"SELECT pg_advisory_xact_lock_shared({int(SIDE_WRITE_LOCK_KEY)})"))
            value = conn.execute(text(fence_sql(fence))).scalar()
            check_fence(fence, None if value is None else int(value))
        yield conn


_NOW_PG = "extract(epoch from clock_timestamp())::float8"


class LeaseStore:
    """One role's lease, on one connection this process keeps open while it runs: the holder's connection is
    what a standby watches (`holder_connected`), so a killed active is replaced without waiting for its lease
    to expire."""

    def __init__(self, engine: Engine, role: str) -> None:
        self.engine = engine
        self.role = role
        self.postgres = engine.dialect.name == "postgresql"
        self._conn: Connection | None = None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, work: str, params: dict[str, object]) -> tuple[Any, ...] | None:
        """One statement in a transaction of its own on the kept connection; its first row."""
        conn = self._connection()
        try:
            with conn.begin():
                return tuple(row) if (row := conn.execute(text(work), params).first()) is not None else None
        except Exception:
            conn.invalidate()
            self._conn = None
            raise

    def read(self) -> tuple[Lease | None, float]:
        """The lease (None: never taken) and the store's clock now."""
        if self.postgres:
            sql = (f"SELECT {_NOW_PG}, l.holder, l.epoch, l.expires_at, "
                   "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid) "
                   "FROM (SELECT 1) AS one LEFT JOIN leader_leases l ON l.role = :role")
            row = self._run(sql, {"role": self.role})
        else:
            found = self._run("SELECT holder, epoch, expires_at FROM leader_leases WHERE role = :role",
                              {"role": self.role})
            row = (time.time(), *(found or (None, None, None)), True)
        assert row is not None
        now, holder, epoch, expires_at, connected = row
        if holder is None:
            return None, float(now)
        return Lease(str(holder), int(epoch), float(expires_at), bool(connected)), float(now)

    def take(self, me: str, seen: Lease | None, ttl_s: float, head_lock: bool = False) -> int | None:
        """Become the holder with the next epoch if the lease is still `seen` (compare and set); the new epoch,
        or None when another candidate changed it first."""
        now = _NOW_PG if self.postgres else str(time.time())
        pid = "pg_backend_pid()" if self.postgres else "NULL"
        if seen is None:
            conflict = " ON CONFLICT (role) DO NOTHING"
            change = (f"INSERT INTO leader_leases (role, holder, epoch, expires_at, backend_pid, taken_at) "
                      f"VALUES (:role, :me, 1, {now} + :ttl, {pid}, {now}){conflict} RETURNING epoch")
        else:
            change = (f"UPDATE leader_leases SET holder = :me, epoch = epoch + 1, expires_at = {now} + :ttl, "
                      f"backend_pid = {pid}, taken_at = {now} WHERE role = :role AND epoch = :seen RETURNING epoch")
        params: dict[str, object] = {"role": self.role, "me": me, "ttl": ttl_s,
                                     "seen": seen.epoch if seen else 0}
        if not (self.postgres and head_lock):
            row = self._run(change, params)
            return int(row[0]) if row else None
        conn = self._connection()
        for attempt in range(2):
            try:
                with conn.begin():
                    conn.execute(text(f"SET LOCAL lock_timeout = '{int(HEAD_LOCK_WAIT_S * 1000)}ms'"))
                    conn.execute(text(f"SELECT pg_advisory_xact_lock({int(POSITION_LOCK_KEY)})"))
                    conn.execute(text(f"SELECT pg_advisory_xact_lock({int(SIDE_WRITE_LOCK_KEY)})"))
                    row = conn.execute(text(change), params).first()
                    return int(row[0]) if row else None
            except OperationalError as err:
                if attempt or "lock timeout" not in str(err):
                    conn.invalidate()
                    self._conn = None
                    raise
                ended = self._end_lock_holders()
                log.warning("%s takeover: the head or side-write lock was held by an open transaction of the old "
                            "active; ended backend(s) %s", self.role, ended or "none")
        return None

    def _end_lock_holders(self) -> list[int]:
        """End the backends holding the head lock or the side-write lock (a paused old active's open batch or side
        write)."""
        keys = f"{int(POSITION_LOCK_KEY)}, {int(SIDE_WRITE_LOCK_KEY)}"
        row = self._run(
            "SELECT coalesce(array_agg(DISTINCT pid), '{}') FROM (SELECT pid, pg_terminate_backend(pid) FROM pg_locks "
            f"WHERE locktype = 'advisory' AND classid = 0 AND objid IN ({keys}) AND granted "
            "AND pid <> pg_backend_pid()) AS ended", {})
        return list(row[0]) if row else []

    def renew(self, me: str, epoch: int, ttl_s: float) -> bool:
        """Extend the lease if `me` still holds it with `epoch`; False: it was taken (step down)."""
        now = _NOW_PG if self.postgres else str(time.time())
        pid = "pg_backend_pid()" if self.postgres else "NULL"
        row = self._run(f"UPDATE leader_leases SET expires_at = {now} + :ttl, backend_pid = {pid} "
                        "WHERE role = :role AND holder = :me AND epoch = :epoch RETURNING epoch",
                        {"role": self.role, "me": me, "epoch": epoch, "ttl": ttl_s})
        return row is not None

    def check(self, epoch: int) -> None:
        """`Fenced` unless the lease still has `epoch` (a writer that cannot carry its epoch into the store's
        transaction, the scheduler publishing to Kafka, asks this right before it writes)."""
        lease, _ = self.read()
        if fenced(epoch, lease.epoch if lease else None):
            raise Fenced(self.role, epoch, lease.epoch if lease else None)

    def give_up(self, me: str, epoch: int) -> None:
        """Let the lease expire now (a clean stop): a standby takes over at its next read."""
        now = _NOW_PG if self.postgres else str(time.time())
        self._run(f"UPDATE leader_leases SET expires_at = {now} WHERE role = :role AND holder = :me "
                  "AND epoch = :epoch RETURNING epoch", {"role": self.role, "me": me, "epoch": epoch})


def lease_epochs(conn: Connection, roles: Iterable[str]) -> dict[str, int | None]:
    """The epochs the leases of `roles` have now (None: never taken), read on `conn` (the ledger's read
    connection, for the commands of a batch that carry an epoch, ADR 0065); its transaction is ended."""
    wanted = sorted(set(roles))
    try:
        rows = conn.execute(text("SELECT role, epoch FROM leader_leases WHERE role IN :roles")
                            .bindparams(bindparam("roles", expanding=True)), {"roles": wanted}).all()
    finally:
        conn.rollback()
    found = {str(row[0]): int(row[1]) for row in rows}
    return {role: found.get(role) for role in wanted}


def candidate_name() -> str:
    """This process's name as a candidate: unique per process start (host, pid, random)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class LeaderMetrics:
    """`steward_leader{role}` (1 while this process is the role's active, 0 while a standby) and
    `steward_takeovers_total{role}` (times this process took the role from another holder)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.leader = Gauge("steward_leader", "1 while this process is its role's active, 0 while a standby.",
                            ["role"], registry=registry)
        self.epoch = Gauge("steward_leader_epoch", "The fencing epoch this process last held its role with.",
                           ["role"], registry=registry)
        self.takeovers = Counter("steward_takeovers", "Times this process took its role over from another holder.",
                                 ["role"], registry=registry)


_metrics: dict[int, LeaderMetrics] = {}


def leader_metrics(registry: CollectorRegistry = REGISTRY) -> LeaderMetrics:
    if id(registry) not in _metrics:
        _metrics[id(registry)] = LeaderMetrics(registry)
    return _metrics[id(registry)]


class Candidacy:
    """One process's candidacy for `role` (ADR 0060), in turns: `wait` stands by until it takes the lease (then a
    thread renews it, and `active_stop` is set when the lease was taken, could not be renewed for a whole TTL, or
    `stop` came), and `end` closes the turn (a clean stop lets the lease expire at once). A process warms up
    whatever it can before `wait` (connections, child processes), so that a takeover costs only what must follow
    the lease: the state as of now."""

    def __init__(self, engine: Engine, role: str, head_lock: bool = False, me: str | None = None,
                 ttl_s: float = LEASE_TTL_S, registry: CollectorRegistry = REGISTRY) -> None:
        self.role = role
        self.me = me or candidate_name()
        self.head_lock = head_lock
        self.ttl_s = ttl_s
        self.leases = LeaseStore(engine, role)
        self.metrics = leader_metrics(registry)
        self.metrics.leader.labels(role=role).set(0)
        self.metrics.takeovers.labels(role=role)
        self.epoch: int | None = None
        self.active_stop = threading.Event()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def wait(self, stop: threading.Event) -> int | None:
        """Stand by until this process holds the lease: its epoch (None when `stop` came first)."""
        taken = _wait_to_lead(self.leases, self.me, stop, self.ttl_s, self.head_lock)
        if taken is None:
            return None
        epoch, seen = taken
        if seen is not None and seen.holder != self.me:
            self.metrics.takeovers.labels(role=self.role).inc()
            log.warning("%s: took over from %s (epoch %d -> %d)", self.role, seen.holder, seen.epoch, epoch)
        else:
            log.info("%s: active with epoch %d", self.role, epoch)
        self.metrics.leader.labels(role=self.role).set(1)
        self.metrics.epoch.labels(role=self.role).set(epoch)
        self.epoch, self._stop = epoch, stop
        self.active_stop = threading.Event()
        self._renewer = threading.Thread(target=_renew, args=(self.leases, self.me, epoch, self.ttl_s, stop,
                                                              self.active_stop), name=f"{self.role}-lease",
                                         daemon=True)
        self._renewer.start()
        return epoch

    def end(self) -> None:
        """The active turn is over (or never began): stop renewing; give the lease up if the process stops."""
        self.active_stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        self.metrics.leader.labels(role=self.role).set(0)
        if self.epoch is not None:
            if self._stop.is_set():
                with contextlib.suppress(Exception):
                    self.leases.give_up(self.me, self.epoch)
            else:
                log.warning("%s: stepped down (epoch %d); standing by", self.role, self.epoch)
        self.epoch = None

    def close(self) -> None:
        self.leases.close()


Active = Callable[[threading.Event, int], None]  # the active part of a turn: (active_stop, epoch)


def lead(engine: Engine, role: str, stop: threading.Event, run_active: Active | None = None,
         head_lock: bool = False, me: str | None = None, ttl_s: float = LEASE_TTL_S,
         registry: CollectorRegistry = REGISTRY,
         warm_up: Callable[[threading.Event], AbstractContextManager[Active]] | None = None) -> None:
    """Run `role` as a candidate until `stop`: a standby until it takes the lease (`steward.domain.leadership`),
    then `run_active(active_stop, epoch)` while it holds it. A renewal that finds the lease taken, or a write the
    store refuses (`Fenced`), stops the active run and the process is a standby again. A clean stop lets the
    lease expire at once. Anything else `run_active` raises ends this (the supervisor restarts the process).

    A candidate that has something to start before it stands by (the ledger's fetch and writer processes and
    Kafka clients: a warm standby) gives `warm_up` instead of `run_active`: at each turn `warm_up(stop)` is
    entered before the wait for the lease and yields that turn's active part; it is exited when the turn ends
    (stepped down, stopped while standing by, or failed), so a process that steps down warms up again."""
    if warm_up is None:
        if run_active is None:
            raise TypeError("lead takes run_active or warm_up")
        only: Active = run_active
        warm_up = lambda _stop: contextlib.nullcontext(only)  # noqa: E731 - nothing to warm up
    elif run_active is not None:
        raise TypeError("lead takes run_active or warm_up, not both")
    turn = warm_up
    candidacy = Candidacy(engine, role, head_lock, me, ttl_s, registry)
    try:
        while not stop.is_set():
            with turn(stop) as active:
                epoch = candidacy.wait(stop)
                if epoch is None:
                    return
                try:
                    active(candidacy.active_stop, epoch)
                except Fenced as refused:
                    log.error("%s; stepping down to standby", refused)
                finally:
                    candidacy.end()
    finally:
        candidacy.close()


def _wait_to_lead(leases: LeaseStore, me: str, stop: threading.Event, ttl_s: float,
                  head_lock: bool) -> tuple[int, Lease | None] | None:
    """Read the lease every POLL_EVERY_S until this candidate takes it: (its epoch, the lease it replaced)."""
    waiting_on: str | None = None
    while not stop.is_set():
        try:
            lease, now = leases.read()
            if step(lease, me, None, now) is Step.TAKE:
                epoch = leases.take(me, lease, ttl_s, head_lock)
                if epoch is not None:
                    return epoch, lease
            elif lease is not None and lease.holder != waiting_on:
                waiting_on = lease.holder
                log.info("%s: standing by (active: %s, epoch %d)", leases.role, lease.holder, lease.epoch)
        except Exception as err:  # the store is away: keep asking
            log.warning("%s: lease not read (%s: %s)", leases.role, type(err).__name__,
                        str(err).splitlines()[0] if str(err) else "")
            stop.wait(1.0)
        stop.wait(POLL_EVERY_S)
    return None


def _renew(leases: LeaseStore, me: str, epoch: int, ttl_s: float, stop: threading.Event,
           active_stop: threading.Event) -> None:
    """The active's renewals, every RENEW_EVERY_S; sets `active_stop` when the lease was taken, when it could
    not be renewed for a whole TTL (on this process's clock: the store may already have let it go), or at `stop`."""
    renewed = time.monotonic()
    while not active_stop.is_set():
        if stop.wait(min(RENEW_EVERY_S, ttl_s / 3)) or active_stop.is_set():
            break
        try:
            if not leases.renew(me, epoch, ttl_s):
                lease, _ = leases.read()
                log.error("%s: the lease was taken (now %s, epoch %s); stepping down", leases.role,
                          lease.holder if lease else None, lease.epoch if lease else None)
                break
            renewed = time.monotonic()
        except Exception as err:
            log.warning("%s: lease not renewed (%s)", leases.role, type(err).__name__)
            if time.monotonic() - renewed > ttl_s:
                log.error("%s: lease not renewed for %.1f s; stepping down", leases.role, ttl_s)
                break
    active_stop.set()
