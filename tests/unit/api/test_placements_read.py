"""The Kubernetes executor's read of its own placements (ADR 0088) against a real API server (uvicorn, loopback,
the ledger in process): `auditEvents` of its jobs' streams after a cursor, with the read-only (auditor) token it
holds for ADR 0054's reads; a placement is read once, its end on the next read, another executor's jobs never."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from steward.api.settings import ApiSettings
from steward.domain.commands import CancelJob, PlaceJob, RegisterNode, SetAllocations, SubmitJob
from steward.executor.kubernetes_binds import Book, Current, FeedUnreachable, Placement, PlacementFeed, follow
from steward.executor.kubernetes_steward import StewardApi
from tests.unit.api.harness import Server, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = Path(tmp_path_factory.mktemp("placements-api"))
    api = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, api_denial_burst=100_000)
    with serve(tmp, api) as s:
        yield s


def feed(server: Server, tmp_path: Path, role: str = "auditor", executor: str = "kx") -> PlacementFeed:
    token = tmp_path / "token"
    token.write_text(server.tokens[role])
    return PlacementFeed(StewardApi(server.url, str(token), executor), first=2)  # small pages: the read pages on


def test_the_executor_reads_its_placements_and_their_ends_once_each(server: Server, tmp_path: Path) -> None:
    server.record([SetAllocations("cluster", {"a1": 0.5}, "test"),
                   RegisterNode("kx-n1", 8, "A100", ["kx", "kx-n1"], "kx", "kx-cluster"),
                   RegisterNode("ky-n1", 8, "A100", ["ky", "ky-n1"], "ky", "ky-cluster")], actor="setup")
    jobs = [SubmitJob("kx.team.a", "a1", 2, 0.0, ["train"]), SubmitJob("kx.team.b", "a1", 1, 0.0, ["train"]),
            SubmitJob("kx.team.c", "a1", 1, 0.0, ["train"]), SubmitJob("ky.team.a", "a1", 1, 0.0, ["train"])]
    server.record(jobs, actor="setup")
    reader = feed(server, tmp_path)
    events, cursor = reader.read(None)
    book = Book()
    assert follow(book, events) == []  # submitted, nothing placed yet
    server.record([PlaceJob("kx.team.a", {"kx-n1": [0, 1]}, False, {}),
                   PlaceJob("kx.team.b", {"kx-n1": [2]}, False, {}), PlaceJob("kx.team.c", {"kx-n1": [3]}, False, {}),
                   PlaceJob("ky.team.a", {"ky-n1": [0]}, False, {})], actor="scheduler")
    events, cursor = reader.read(cursor)
    assert follow(book, events) == [Placement("kx.team.a", 1, "kx", {"kx-n1": [0, 1]}),
                                    Placement("kx.team.b", 1, "kx", {"kx-n1": [2]}),
                                    Placement("kx.team.c", 1, "kx", {"kx-n1": [3]})]  # ky's job not among them
    assert reader.read(cursor) == ([], cursor)  # each read once
    server.record([CancelJob("kx.team.b", "the user deleted the pod")], actor="setup")
    events, cursor = reader.read(cursor)
    assert follow(book, events) == []
    assert book.current["kx.team.b"] == Current(1, False) and book.current["kx.team.a"] == Current(1, True)
    reader.api.close()


def test_a_token_that_may_not_read_the_log_is_a_failed_read(server: Server, tmp_path: Path) -> None:
    reader = feed(server, tmp_path, role="researcher")
    with pytest.raises(FeedUnreachable) as refused:
        reader.read(None)
    assert "auditEvents" in str(refused.value), refused.value
    reader.api.close()


def test_the_feed_and_the_standing_read_through_one_connection(server: Server, tmp_path: Path) -> None:
    """One holder of the executor's connection to the API (its URL, token file, executor id, HTTP client): the feed
    reads through the `StewardApi` the standing reads through, and a token rotated in the file reaches both."""
    reader = feed(server, tmp_path, role="researcher")
    api = reader.api
    with pytest.raises(FeedUnreachable):
        reader.read(None)
    (tmp_path / "token").write_text(server.tokens["auditor"])  # the Secret rotated: read again at the next call
    events, cursor = reader.read(None)
    assert cursor is not None and all(e["streamId"].startswith("job-kx.") for e in events)
    assert api.read().clusters is not None  # the standing's read, on the same client
    assert reader.api.client is api.client
    api.close()
