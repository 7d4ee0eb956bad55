"""The result cache shares an answer among callers with the same role and scopes when the answer read nothing
else of the caller, and keeps it per caller when it did (`ObservedPrincipal`, issue 22: 200 tokens each
computing the same dashboard)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from strawberry.extensions import SchemaExtension

from steward.api.settings import ApiSettings
from steward.auth.principal import Principal, Role
from steward.auth.tokens import TokenStore
from tests.unit.api.harness import serve


class Executions(SchemaExtension):
    """Counts the executions of the field `health` (an answer computed, not served from the cache)."""

    calls = 0

    def resolve(self, _next: Any, root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
        if info.field_name == "health":
            Executions.calls += 1
        return _next(root, info, *args, **kwargs)


def _api(tmp_path: Path) -> ApiSettings:
    return ApiSettings(run_dir=tmp_path, api_rate_per_s=10_000, api_rate_burst=10_000)


# (what the second caller is, the query, whether the two share one execution)
CASES = [
    ("same role and scopes", ("researcher", ["a1"]), "{ health jobCounts { state count } }", True),
    ("same role, other scopes", ("researcher", ["b1"]), "{ health jobCounts { state count } }", False),
    ("other role, same scopes", ("manager", ["a1"]), "{ health jobCounts { state count } }", False),
    ("the answer reads who asks", ("researcher", ["a1"]), "{ health me { subject } }", False),
    ("only the role is read", ("researcher", ["a1"]), "{ health me { role } }", False),  # `me` reads the subject
]


@pytest.mark.parametrize(("second", "query", "shared"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_answer_is_shared_only_by_callers_with_the_same_view_and_only_when_it_read_nothing_else(
        tmp_path: Path, second: tuple[str, list[str]], query: str, shared: bool) -> None:
    with serve(tmp_path, _api(tmp_path), extra_extensions=[Executions]) as s:
        role, scopes = second
        other, _info = TokenStore(s.store).create(role=role, scopes=scopes, subject="carol", created_by="test")
        q = f"{query} # {time.monotonic_ns()}"
        Executions.calls = 0
        first = s.gql(q, token=s.tokens["researcher"])
        again = s.gql(q, token=other)
        assert Executions.calls == (1 if shared else 2)
        if "subject" in query:
            assert (first["data"]["me"]["subject"], again["data"]["me"]["subject"]) == ("alice", "carol")


def test_concurrent_callers_of_one_view_never_get_each_others_identity(tmp_path: Path) -> None:
    """The first execution of a body that turns out to read who asks is not handed to the requests waiting
    for it (single flight): each gets its own subject."""
    with serve(tmp_path, _api(tmp_path)) as s:
        store = TokenStore(s.store)
        tokens = {f"r{i}": store.create(role="researcher", scopes=["a1"], subject=f"r{i}", created_by="test")[0]
                  for i in range(8)}
        q = f"{{ me {{ subject role }} jobCounts {{ state count }} }} # {time.monotonic_ns()}"
        for _round in range(2):  # the second round knows the body reads who asks
            with ThreadPoolExecutor(8) as pool:
                got = dict(pool.map(lambda kv: (kv[0], s.gql(q, token=kv[1])["data"]["me"]["subject"]),
                                    tokens.items()))
            assert got == {name: name for name in tokens}


def test_reading_anything_but_the_role_and_scopes_marks_the_answer_personal() -> None:
    from steward.api.context import ObservedPrincipal

    who = Principal("alice", Role.researcher, ("a1",), token_id="t1", via="api-token", name="Alice")
    for field, personal in (("role", False), ("scopes", False), ("sees_everything", False), ("subject", True),
                            ("token_id", True), ("via", True), ("name", True), ("display", True),
                            ("rate_key", True)):
        flag = {"ok": True, "personal": False}
        seen = ObservedPrincipal.watching(who, flag)
        assert getattr(seen, field) == getattr(who, field)
        assert flag["personal"] is personal, field


def test_verify_reads_the_log_every_time_never_an_answer_kept_for_its_head(tmp_path: Path) -> None:
    """A row altered in place does not move the head, so a `verify` answer kept for the head would vouch for what
    it did not read (and one kept from before an outage answered 200 while PostgreSQL was down: the integration
    test `test_api_store_outage.py` failed on a quiet machine, where the second ask came within the cache's bucket)."""
    from sqlalchemy import text

    q = "{ verify(fromPosition: 1) { checked ok firstBadPosition } }"
    with serve(tmp_path, _api(tmp_path)) as s:
        first = s.gql(q, token=s.tokens["admin"])["data"]["verify"]
        assert first["ok"] and first["checked"] >= 5
        row = s.store.read(after=1, limit=1)[0]
        altered = json.dumps(row.payload | {"altered": True}, sort_keys=True, separators=(",", ":"))
        with s.store.engine.connect() as conn:  # one payload altered in place, the head unchanged
            conn.execute(text("UPDATE events SET payload = :p WHERE position = 2"), {"p": altered})
            conn.commit()
        again = s.gql(q, token=s.tokens["admin"])["data"]["verify"]
        assert not again["ok"] and again["firstBadPosition"] == 2
