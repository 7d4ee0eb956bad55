"""The snapshot format: bases and deltas, each a header and parts readable alone.

A *base* holds the whole state at its position: a header (allocations, nodes, GPU use, policy, the job
counts per state, the first job id of every row block, and the offset, length and SHA-256 of each part)
followed by row blocks of `SNAPSHOT_BLOCK` jobs sorted by id (every `Job` field, then the position of
the event that last changed the job), then the first `FIRST_ROWS` rows by (submitted_at, job_id) for
the API's page. A *delta* holds only the jobs changed since the snapshot before it (`previous`), as one
part aligned with the sorted ids in its header (`None`: the job is gone), plus the small tables and job
counts at its position. A delta names its base and its previous snapshot by
(position, digest), so a chain base -> delta -> ... -> delta is checked link by link; every snapshot's
digest is the SHA-256 of its length prefix and header, which holds each part's SHA-256 and the hash of
the event at its position (`head_hash`, compared with the log when the snapshot is read). Each part is
compressed alone (zlib, level 1) and the database keeps the blob uncompressed (migration 0004 sets the
column's storage to EXTERNAL), so reading one part with `substr` reads only that part's bytes: with
PostgreSQL's own compression of the whole blob, every `substr` decompressed the blob up to the part.

`SnapshotView` answers from a chain without building the state: job counts from the newest header,
single jobs from the newest delta that names them, else from the one base block that holds them.
"""

from __future__ import annotations

import hashlib
import marshal
import struct
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from steward.domain.state import AllocationNode, ClusterNode, Job
from steward.store.projections import Projector

SNAPSHOT_BLOCK = 1024  # jobs per base row block
FIRST_ROWS = 2048  # a base's first jobs by (submitted_at, job_id), for the API's page (`api_max_page` is 500)
JOB_FIELDS = tuple(f.name for f in fields(Job))
STATE = JOB_FIELDS.index("state")
SUBMITTED_AT = JOB_FIELDS.index("submitted_at")
# the small tables of every header: a snapshot written without one of them (the namespace mappings came with
# ADR 0056) has another format, so it is not read (the state is folded from the log instead)
SMALL_TABLES = ("allocations", "nodes", "used", "positions", "policy", "namespaces")
_FINGERPRINT = hashlib.sha256(
    repr((JOB_FIELDS, [f.name for f in fields(ClusterNode)], [f.name for f in fields(AllocationNode)],
          SMALL_TABLES)).encode()
).hexdigest()[:12]
BASE_FORMAT = "parts-2b:" + _FINGERPRINT  # the `format` column tells bases from deltas without reading them
DELTA_FORMAT = "parts-2d:" + _FINGERPRINT

Row = tuple[Any, ...]  # the Job's fields, then the position of the event that last changed it
Ref = tuple[int, str]  # (position, digest) of a stored snapshot
Fetch = Callable[[list[tuple[int, int]]], list[bytes]]  # (offset, length) spans of one blob -> bytes

_job_fields = attrgetter(*JOB_FIELDS)


def job_tuple(job: Job, position: int) -> Row:
    return (*_job_fields(job), position)


def header_length(prefix: bytes) -> int:
    """Bytes of the length prefix and the header (what the digest covers)."""
    if len(prefix) < 8:
        raise ValueError("snapshot: shorter than its length prefix")
    return 8 + int(struct.unpack(">Q", prefix[:8])[0])


def digest_of(blob: bytes) -> str:
    return hashlib.sha256(blob[:header_length(blob)]).hexdigest()


def _small_tables(proj: Projector) -> dict[str, Any]:
    return {
        "allocations": [(a.name, a.parent, a.share, a.debug_quota_gpus, a.display_name, a.pin)
                        for a in proj.allocations.values()],
        "nodes": [(x.node_id, x.gpus, x.gpu_model, x.path, x.executor, x.state, x.foreign_gpus,
                   x.cluster)
                  for x in proj.nodes.values()],
        "used": {n: tuple(sorted(g)) for n, g in proj.used.items()},
        "positions": [(t, k, p) for (t, k), p in proj.positions.items() if t != "j"],
        "policy": dict(proj.policy),
        "namespaces": [(e, n, p) for (e, n), p in proj.namespaces.items()],
    }


def _where(proj: Projector) -> dict[str, Any]:
    return {"position": proj.position, "recorded_at": proj.recorded_at, "head_hash": proj.head_hash}


def _pack(header: dict[str, Any], parts: list[bytes]) -> bytes:
    parts = [zlib.compress(p, 1) for p in parts]  # each part alone (PostgreSQL stores the blob uncompressed)
    offset, table = 0, []
    for part in parts:
        table.append((offset, len(part), hashlib.sha256(part).digest()))
        offset += len(part)
    head = marshal.dumps({**header, "parts": table})
    return struct.pack(">Q", len(head)) + head + b"".join(parts)


def encode_base(proj: Projector, counts: dict[str, int]) -> bytes:
    """The whole state: row blocks of the jobs sorted by id, their first ids and the counts in the header."""
    ids = sorted(proj.jobs)
    pos, jobs = proj.positions, proj.jobs
    rows = [(*_job_fields(jobs[k]), pos[("j", k)]) for k in ids]
    blocks = [rows[i:i + SNAPSHOT_BLOCK] for i in range(0, len(rows), SNAPSHOT_BLOCK)]
    first = sorted(rows, key=lambda r: (r[SUBMITTED_AT], r[0]))[:FIRST_ROWS]
    header = {"kind": "base", **_where(proj), **_small_tables(proj), "counts": dict(counts), "jobs": len(ids),
              "block": SNAPSHOT_BLOCK, "first_ids": [b[0][0] for b in blocks], "base": None, "previous": None}
    return _pack(header, [marshal.dumps(b) for b in blocks] + [marshal.dumps(first)])


def encode_delta(proj: Projector, counts: dict[str, int], changed: Iterable[str], base: Ref, previous: Ref) -> bytes:
    """The jobs in `changed` as they are in `proj` (None: gone) in part 0, the small tables in part 1, the
    job counts and the ids in the header (so that a chain's headers stay small)."""
    ids = sorted(set(changed))
    pos, jobs = proj.positions, proj.jobs
    rows = [(*_job_fields(jobs[k]), pos[("j", k)]) if k in jobs else None for k in ids]
    header = {"kind": "delta", **_where(proj), "counts": dict(counts), "jobs": sum(counts.values()),
              "ids": ids, "base": base, "previous": previous}
    return _pack(header, [marshal.dumps(rows), marshal.dumps(_small_tables(proj))])


class StoredSnapshot:
    """One stored snapshot: its header, and its parts read through `fetch` and checked by their digest."""

    def __init__(self, position: int, digest: str, head: bytes, fetch: Fetch) -> None:
        if hashlib.sha256(head).hexdigest() != digest:
            raise ValueError(f"snapshot {position}: the header does not match its digest")
        h: dict[str, Any] = marshal.loads(head[8:])
        if h["position"] != position:
            raise ValueError(f"snapshot {position}: the header says position {h['position']}")
        self.ref: Ref = (position, digest)
        self.header = h
        self.kind: str = h["kind"]
        self.position: int = position
        self.head_hash: str = h["head_hash"]
        self.base: Ref | None = (int(h["base"][0]), str(h["base"][1])) if h["base"] else None
        self.previous: Ref | None = (int(h["previous"][0]), str(h["previous"][1])) if h["previous"] else None
        self._table = [(len(head) + o, n, d) for o, n, d in h["parts"]]
        self._fetch = fetch
        self._cache: dict[int, Any] = {}

    def span(self, i: int) -> tuple[int, int]:
        return self._table[i][0], self._table[i][1]

    def accept(self, i: int, data: bytes) -> Any:
        """Check part `i`'s bytes against the header and decode them."""
        if len(data) != self._table[i][1] or hashlib.sha256(data).digest() != self._table[i][2]:
            raise ValueError(f"snapshot {self.position}: part {i} does not match its digest")
        value = marshal.loads(zlib.decompress(data))
        self._cache[i] = value
        return value

    def parts(self, indexes: Iterable[int]) -> list[Any]:
        wanted = list(indexes)
        missing = sorted({i for i in wanted if i not in self._cache})
        if missing:
            for i, data in zip(missing, self._fetch([self.span(i) for i in missing]), strict=True):
                self.accept(i, data)
        return [self._cache[i] for i in wanted]

    def has_part(self, i: int) -> bool:
        return i in self._cache


@dataclass
class SnapshotView:
    """A base and the deltas after it (oldest first), answering without building every job."""

    chain: list[StoredSnapshot]
    fetch_parts: Callable[[list[tuple[StoredSnapshot, int]]], None] | None = None  # reads parts of many at once

    def __post_init__(self) -> None:
        top = self.chain[-1]
        latest = top.header if top.kind == "base" else {**top.header, **top.parts([1])[0]}
        self.base = self.chain[0]
        self.deltas = self.chain[1:]
        self.position: int = latest["position"]
        self.recorded_at: float = latest["recorded_at"]
        self.head_hash: str = latest["head_hash"]
        self.allocations = {a[0]: AllocationNode(*a) for a in latest["allocations"]}
        self.nodes = {x[0]: ClusterNode(*x) for x in latest["nodes"]}
        self.used: dict[str, frozenset[int]] = {n: frozenset(g) for n, g in latest["used"].items()}
        self.policy: dict[str, Any] = latest["policy"]
        self.namespaces: dict[tuple[str, str], str] = {(e, n): p for e, n, p in latest["namespaces"]}
        self.positions: dict[tuple[str, str], int] = {(t, k): p for t, k, p in latest["positions"]}
        self.counts: dict[str, int] = dict(latest["counts"])
        self.first_ids: list[str] = self.base.header["first_ids"]
        self._delta_index = [{k: i for i, k in enumerate(d.header["ids"])} for d in self.deltas]
        self._found: dict[str, Row | None] = {}

    @property
    def block_count(self) -> int:
        return len(self.first_ids)

    def _read(self, wanted: list[tuple[StoredSnapshot, int]]) -> None:
        wanted = [(s, i) for s, i in wanted if not s.has_part(i)]
        if not wanted:
            return
        if self.fetch_parts is not None:
            self.fetch_parts(wanted)
            return
        by_snapshot: dict[int, list[int]] = {}
        for s, i in wanted:
            by_snapshot.setdefault(id(s), []).append(i)
        for s in self.chain:
            if id(s) in by_snapshot:
                s.parts(by_snapshot[id(s)])

    def lookup(self, job_ids: Iterable[str]) -> dict[str, Row | None]:
        """The rows of these jobs at the view's position (None: no such job), read in as few fetches as
        possible: the newest delta naming a job wins, else the base block holding it."""
        todo = [j for j in dict.fromkeys(job_ids) if j not in self._found]
        if todo:
            where: dict[str, tuple[StoredSnapshot, int, int]] = {}  # job -> (snapshot, part, index in part)
            for j in todo:
                for d in range(len(self.deltas) - 1, -1, -1):
                    k = self._delta_index[d].get(j)
                    if k is not None:
                        where[j] = (self.deltas[d], 0, k)
                        break
                else:
                    b = bisect_right(self.first_ids, j) - 1
                    if b >= 0:
                        where[j] = (self.base, b, -1)
            self._read(sorted({(s.position, i): (s, i) for s, i, _ in where.values()}.values(),
                              key=lambda x: (x[0].position, x[1])))
            for j in todo:
                if j not in where:
                    self._found[j] = None
                    continue
                s, i, k = where[j]
                (part,) = s.parts([i])
                if k >= 0:
                    self._found[j] = part[k]
                else:
                    n = bisect_left(part, (j,))  # (j,) sorts before every row of job j, after every smaller id
                    self._found[j] = part[n] if n < len(part) and part[n][0] == j else None
        return {j: self._found[j] for j in job_ids}

    def overlay(self) -> dict[str, Row | None]:
        """Every job any delta names, as the newest of them has it (reads every delta's part)."""
        self._read([(d, 0) for d in self.deltas])
        out: dict[str, Row | None] = {}
        for d in self.deltas:
            (rows,) = d.parts([0])
            out.update(zip(d.header["ids"], rows, strict=True))
        return out

    def rows(self) -> Iterator[Row]:
        """Every job's row at the view's position (reads every block and delta)."""
        overlay = self.overlay()
        self._read([(self.base, b) for b in range(self.block_count)])
        for block in self.base.parts(range(self.block_count)):
            for row in block:
                if row[0] not in overlay:
                    yield row
        for row in overlay.values():
            if row is not None:
                yield row

    def first_rows(self, n: int, exclude: set[str]) -> list[Row] | None:
        """Candidates for the first `n` jobs by (submitted_at, job_id) among those not in `exclude`: the
        base's first rows that no delta changed, and every row a delta holds (reads the base's first-rows
        part and the deltas, not the blocks). None when the base's first rows do not reach `n`."""
        overlay = self.overlay()
        (first,) = self.base.parts([self.block_count])
        base = [r for r in first if r[0] not in overlay and r[0] not in exclude]
        if len(base) < n and len(first) < self.base.header["jobs"]:
            return None
        return base + [r for k, r in overlay.items() if r is not None and k not in exclude]

    def projector(self) -> Projector:
        """The whole state as a `Projector` (builds every job)."""
        proj = Projector(allocations=dict(self.allocations), nodes=dict(self.nodes), used=dict(self.used),
                         policy=dict(self.policy), namespaces=dict(self.namespaces), positions=dict(self.positions),
                         position=self.position,
                         recorded_at=self.recorded_at, head_hash=self.head_hash)
        jobs, pos = proj.jobs, proj.positions
        for row in self.rows():
            jobs[row[0]] = Job(*row[:-1])
            pos[("j", row[0])] = row[-1]
        return proj
