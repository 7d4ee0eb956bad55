"""Every migration's revision id fits `alembic_version.version_num`, a VARCHAR(32) on PostgreSQL: a longer id
migrates SQLite and then fails `steward up` on PostgreSQL at its last step (0011 did, caught by the e2e tier)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

VERSIONS = Path(__file__).resolve().parents[3] / "migrations" / "versions"


def revisions() -> list[tuple[str, str, str | None]]:
    out = []
    for path in sorted(VERSIONS.glob("*.py")):
        values: dict[str, str | None] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value,
                                                                                                     ast.Constant):
                values[node.targets[0].id] = node.value.value
        out.append((path.name, str(values["revision"]), values.get("down_revision")))
    return out


@pytest.mark.parametrize(("name", "revision", "down"), revisions(), ids=[r[0] for r in revisions()])
def test_a_revision_id_fits_postgresql_s_version_column(name: str, revision: str, down: str | None) -> None:
    assert len(revision) <= 32, f"{name}: revision id {revision!r} is {len(revision)} characters; the limit is 32"


def test_the_migrations_are_one_line() -> None:
    """One head: each revision is the down_revision of at most one other."""
    downs = [d for _, _, d in revisions() if d]
    assert len(downs) == len(set(downs)), f"two migrations follow the same one: {sorted(downs)}"
    assert {r for _, r, _ in revisions()} - set(downs), "no head"
