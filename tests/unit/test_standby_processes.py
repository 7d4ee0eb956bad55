"""The standbys `steward up --standbys` starts (ADR 0060): each runs as its role (its Kafka principal), is
supervised like the others once it has a PID file and a spec, and serves its metrics on a port of its own
beside the stack's."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.config import Settings
from steward.infra.processes import COMPONENT_OF, OWN_PROCESSES, STANDBYS, Paths
from steward.infra.supervisor import supervised
from steward.metrics import stack_ports, standby_ports, supervisor_port


@pytest.mark.parametrize(("name", "role"), [("ledger-2", "ledger"), ("scheduler-2", "scheduler")])
def test_a_standby_is_its_role(name: str, role: str) -> None:
    assert STANDBYS[name] == role and COMPONENT_OF[name] == COMPONENT_OF[role] and role in OWN_PROCESSES


def test_standbys_are_supervised_once_started(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.pids.mkdir(parents=True)
    for name in ("ledger", "ledger-2"):
        paths.pid_file(name).write_text("1")
        paths.spec_file(name).write_text("{}")
    assert supervised(paths) == ["ledger", "ledger-2"]


@pytest.mark.parametrize("env", [{"STEWARD_METRICS_PORT": "9464"}, {"STEWARD_METRICS_PORT": "20000"}])
def test_standby_metrics_ports_are_their_own(env: dict[str, str]) -> None:
    settings = Settings()
    taken = [*stack_ports(settings, env).values(), supervisor_port(settings, env)]
    ports = standby_ports(settings, env)
    assert set(ports) == set(STANDBYS) and not set(ports.values()) & set(taken)
    assert standby_ports(settings, {"STEWARD_METRICS_PORT": "off"}) == {}
