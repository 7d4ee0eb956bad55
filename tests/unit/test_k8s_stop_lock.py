"""`infra/k8s.sh stop` with nothing running does not wait for the k8s lock: an install holds it for the length
of a Go build (about 20 minutes on a fresh machine), and `steward down` / `make down` run beside `make tools`
waited `STEWARD_LOCK_TIMEOUT` (300 s) for it before saying nothing was running."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_stop_with_nothing_running_does_not_wait_for_an_install_s_lock(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "locks").mkdir(parents=True)
    with (run / "locks" / "k8s.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as `k8s.sh install` holds it while it builds
        # a stop that waits for the lock waits the whole STEWARD_LOCK_TIMEOUT, far past `timeout`: TimeoutExpired
        env = {**os.environ, "STEWARD_RUN_DIR": str(run), "STEWARD_LOCK_TIMEOUT": "900"}
        done = subprocess.run(["bash", str(REPO / "infra" / "k8s.sh"), "stop"], capture_output=True, text=True,
                              timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "kube-apiserver is not running" in done.stdout + done.stderr
