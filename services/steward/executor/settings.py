"""An executor's knobs, from the environment (prefix STEWARD_EXECUTOR_; its id and GPU count are the
main settings' STEWARD_EXECUTOR_ID and STEWARD_EXECUTOR_GPUS)."""

from __future__ import annotations

import signal

from pydantic_settings import BaseSettings, SettingsConfigDict

from steward.domain.clusters import cluster_problem
from steward.domain.ids import shown
from steward.domain.liveness import HEARTBEAT_REPORT_S


class ClusterSettingError(ValueError):
    """STEWARD_EXECUTOR_CLUSTER does not name a cluster (one line naming the value and why)."""


class ExecutorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STEWARD_EXECUTOR_", extra="ignore")

    # what runs the jobs: "local" (this machine's processes, steward.executor.local), "slurm" (a Slurm
    # cluster, steward.executor.slurm; `steward up --executor slurm`) or "kubernetes" (a Kubernetes cluster's
    # GPU pods, steward.executor.kubernetes; `steward up --executor kubernetes`)
    kind: str = "local"
    checkpoint_signal: str = "SIGTERM"
    checkpoint_root: str = ""  # empty: <run folder>/checkpoints, shared by the executors of one machine
    # "user": each job runs as its project's OS user (needs root); "none": as the executor's user
    isolation: str = "user"
    work_root: str = ""  # the jobs' working folders; empty: <run folder>/executor/<id>/work
    tick_s: float = 5.0  # heartbeat and sampling period (shortened to a third of a short heartbeat timeout)
    idle_cpu_percent: float = 5.0
    idle_gpu_percent: float = 5.0
    idle_min_s: float = 60.0  # idle this long before it is reported idle
    # a heartbeat through Kafka at least this often (and on every change): the liveness a JobRun reads before
    # declaring a start or a poll that waits in this executor's queue lost (ADR 0069); keep it well under
    # the contract's lost_after_s
    heartbeat_report_s: float = HEARTBEAT_REPORT_S
    orphan_grace_s: float = 10.0  # checkpoint signal to SIGKILL for an orphan or a fenced attempt
    # the nodes this executor runs jobs on: names or shell patterns, comma-separated (`gpu-01,rack7-*`);
    # empty: every node placed with it. A placement on any other node is refused (steward.executor.fencing)
    nodes: str = ""
    # the cluster whose nodes a Slurm or Kubernetes executor registers (ADR 0085; `steward up --cluster NAME`):
    # a cluster's name (steward.domain.clusters); empty: each node keeps the cluster the ledger records for it
    # (the default cluster for a node never registered). A node agent's nodes are named by `steward cluster apply`
    cluster: str = ""

    def checked_cluster(self) -> str:
        """The configured cluster ("" when none), refused at start when it is not a cluster's name."""
        if self.cluster and (problem := cluster_problem(self.cluster)) is not None:
            raise ClusterSettingError(f"STEWARD_EXECUTOR_CLUSTER: the cluster name {shown(self.cluster)} {problem}")
        return self.cluster

    def signal_number(self, name: str = "") -> int:
        value = name or self.checkpoint_signal
        sig = getattr(signal, value if value.startswith("SIG") else f"SIG{value}", None)
        if not isinstance(sig, signal.Signals):
            raise ValueError(f"unknown signal {value!r}")
        return int(sig)
