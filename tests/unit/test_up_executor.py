"""`steward up --executor`: an unknown executor, or a Slurm configuration that does not exist, is refused in
one line (exit 2) before anything starts (issues 23 and 26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steward.cli.output import CliError
from steward.cli.stack import bring_up, kubernetes_values, slurm_values
from steward.config import Settings


def test_an_unknown_executor_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(CliError) as refused:
        bring_up(Settings(run_dir=tmp_path), executor="nomad")
    assert refused.value.code == 2 and "unknown executor 'nomad': choose one of local, slurm, kubernetes" in str(
        refused.value)
    assert not (tmp_path / "pids").exists() and not (tmp_path / "stack.env").exists()


def test_a_named_slurm_configuration_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEWARD_SLURM_CONF", str(tmp_path / "nowhere.conf"))
    with pytest.raises(CliError, match=r"nowhere\.conf does not exist"):
        slurm_values(Settings(run_dir=tmp_path))
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=lab\n")
    monkeypatch.setenv("STEWARD_SLURM_CONF", str(conf))
    assert slurm_values(Settings(run_dir=tmp_path)) == {
        "STEWARD_EXECUTOR_KIND": "slurm", "SLURM_CONF": str(conf), "STEWARD_SLURM_CONF": str(conf)}


def test_a_named_kubeconfig_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEWARD_K8S_KUBECONFIG", str(tmp_path / "nowhere.yaml"))
    with pytest.raises(CliError, match=r"kubeconfig .*nowhere\.yaml does not exist"):
        kubernetes_values(Settings(run_dir=tmp_path))
    conf = tmp_path / "kubeconfig"
    conf.write_text("apiVersion: v1\n")
    monkeypatch.setenv("STEWARD_K8S_KUBECONFIG", str(conf))
    settings = Settings(run_dir=tmp_path)
    assert kubernetes_values(settings) == {
        "STEWARD_EXECUTOR_KIND": "kubernetes", "STEWARD_K8S_KUBECONFIG": str(conf),
        # the executor reads the recorded namespace mappings and the queue with a read-only token (ADR 0054)
        "STEWARD_K8S_API_URL": settings.resolved_api_url,
        "STEWARD_K8S_API_TOKEN_FILE": str(tmp_path / "secrets" / "k8s-executor-token")}
