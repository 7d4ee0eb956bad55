"""`infra/postgres.sh` from a checkout in a folder only its owner can enter, as root's home is (ADR 0064): run as
root, the server runs as the `postgres` OS user, which cannot reach such a run folder, so `start` keeps the
cluster in /var/tmp/steward-<uid>/<hash of the run folder> and links `<run>/postgres` to it; `status`, `stop`
and a second `start` find it through the link, the run folder's logs and PID files stay where they were, and
`purge` removes it. (Before, `start` stopped with "the postgres OS user cannot reach .../postgres".)"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, SLOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600),
              pytest.mark.skipif(os.geteuid() != 0, reason="the postgres OS user is only separate when run as root")]

PORT = 55433 + SLOT * 20 + 9  # beside the slot's PostgreSQL port


def pg(run: Path, action: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEWARD_")} | {
        "STEWARD_RUN_DIR": str(run), "STEWARD_PG_PORT": str(PORT), "STEWARD_WAIT_TIMEOUT": "300"}
    proc = subprocess.run(["bash", str(REPO / "infra" / "postgres.sh"), action, *args], capture_output=True, text=True,
                          timeout=400, env=env)
    if check:
        assert proc.returncode == 0, f"infra/postgres.sh {action} exited {proc.returncode}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture()
def private_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)  # like /root: nobody else may enter
    run = home / "steward" / ".run"
    run.mkdir(parents=True)
    yield run
    pg(run, "stop", check=False)
    pg(run, "purge", check=False)


def test_a_checkout_only_its_owner_can_enter(private_run: Path) -> None:
    started = pg(private_run, "start")
    link = private_run / "postgres"
    assert link.is_symlink(), started.stderr
    target = Path(os.readlink(link))
    assert target.parent == Path(f"/var/tmp/steward-{os.getuid()}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o700 and target.stat().st_uid != 0  # the postgres user's
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o711
    assert (target / "data" / "PG_VERSION").is_file()
    assert "the cluster lives in" in started.stderr + started.stdout
    assert (private_run / "pids" / "postgres.pid").is_file()  # the run folder's PID file, as before
    assert "running (pid" in pg(private_run, "status").stdout
    # the roles and databases were made: the server answers SQL over its socket in the new folder
    assert "steward_test" in pg(private_run, "psql", "-At", "-c", "SELECT datname FROM pg_database").stdout
    # a second start (make up after make up) finds the running server through the link
    pg(private_run, "start")
    pg(private_run, "stop")
    assert pg(private_run, "status", check=False).returncode == 3
    pg(private_run, "start")  # and the data survives a stop
    assert pg(private_run, "status").returncode == 0
    pg(private_run, "stop")
    pg(private_run, "purge")
    assert not link.exists() and not target.exists()
