"""The run folder's stack file names the store's users: readable by the stack's own user only, even when
an older version wrote it world-readable (jobs run as other users; docs/security.md "Jobs")."""

from __future__ import annotations

import stat
from pathlib import Path

from steward.infra.processes import Paths, write_stack_env


def test_the_stack_file_is_the_stacks_own(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "run")
    paths.run.mkdir()
    paths.stack_env.write_text("OLD=1\n")
    paths.stack_env.chmod(0o644)
    write_stack_env(paths, {"STEWARD_STORE_URL": "postgresql://steward:pw@127.0.0.1/steward"})
    assert stat.S_IMODE(paths.stack_env.stat().st_mode) == 0o600
    assert paths.stack_env.read_text() == "STEWARD_STORE_URL=postgresql://steward:pw@127.0.0.1/steward\n"
