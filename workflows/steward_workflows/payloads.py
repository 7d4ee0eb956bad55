"""The frozen dataclasses that go in and out of every workflow and activity (one in, one out).

New fields always get defaults, so histories recorded before them still decode (tests/replay/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WORKFLOW_TASK_QUEUE = "steward-workflows"


def executor_task_queue(executor: str) -> str:
    return f"executor-{executor}"


def job_run_workflow_id(job_id: str, attempt: int) -> str:
    return f"job-{job_id}-attempt-{attempt}"


def session_workflow_id(job_id: str, attempt: int) -> str:
    return f"session-{job_id}-attempt-{attempt}"


# -- policy knobs frozen into a run when it starts (so a policy change never alters a running history) --


@dataclass(frozen=True)
class ContractTimings:
    """Durations (seconds) of the contract for one run. 0 turns a timeout off (time-skipping tests)."""

    grace_s: float = 120.0
    heartbeat_timeout_s: float = 30.0
    lost_after_s: float = 60.0
    session_warnings_s: list[float] = field(default_factory=lambda: [1800.0, 300.0])
    session_at_cap: str = "stop"
    idle_limit_s: float = 1800.0
    idle_grace_s: float = 600.0
    max_history: int = 2_000
    # watching a process: each `watch_job` poll answers at its exit or after `watch_window_s` (heartbeating
    # meanwhile); the next poll follows after `watch_gap_s` (0 in production; > 0 lets tests skip time,
    # since the test server never skips while an activity is outstanding)
    watch_window_s: float = 300.0
    watch_gap_s: float = 0.0


# -- JobRun -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunCarry:
    """What a JobRun carries over continue-as-new: the attempt already runs, keep its promises."""

    started_at: float
    pid: int
    protection_over: bool = False
    revoked: bool = False
    session_started: bool = False
    cap_handled: bool = False


@dataclass(frozen=True)
class JobRunInput:
    job_id: str
    attempt: int
    executor: str
    command: list[str]
    assignments: dict[str, list[int]]
    correlation_id: str = ""
    env: dict[str, str] = field(default_factory=dict)
    job_class: str = "batch"
    project: str = ""  # the job's project: the OS user its executor runs it as (steward.executor.isolation)
    resumable: bool = False
    funded: bool = True
    protection_s: float = 0.0
    session_cap_s: float = 0.0
    resume_from: str = ""
    restored_from: str = ""
    timings: ContractTimings = field(default_factory=ContractTimings)
    carry: RunCarry | None = None


@dataclass(frozen=True)
class ProcessStarted:
    job_id: str
    attempt: int
    pid: int
    started_at: float
    checkpoint_dir: str = ""
    resumed_from: str = ""


@dataclass(frozen=True)
class WatchJob:
    """Answer when the attempt ends, or after `window_s` at the latest (status "running")."""

    job_id: str
    attempt: int
    job_class: str = "batch"
    window_s: float = 300.0


@dataclass(frozen=True)
class ProcessOutcome:
    job_id: str
    attempt: int
    exit_code: int
    status: str = "exited"  # "running" (window over) | "exited" | "vanished" (gone without an exit code)
    # | "refused" (the node would not run it: Kubernetes' admission, ADR 0083)
    ended_at: float = 0.0
    checkpoint_path: str = ""
    checkpoint_at: float | None = None
    killed: bool = False
    reason: str = ""  # why an attempt that did not exit ended: the attempt's loss reason (the job is requeued)


@dataclass(frozen=True)
class SignalJob:
    """A checkpoint request (the executor's checkpoint signal, SIGTERM by default) or, with `kill`, SIGKILL."""

    job_id: str
    attempt: int
    kill: bool = False
    signal: str = ""
    # why (the preemption's or the cancel's reason, and whom it stopped for): the executor may tell the job's users
    # (Kubernetes: the `StewardPreempted` event). Empty in runs begun before it was carried (their histories replay)
    reason: str = ""
    for_job_id: str = ""


@dataclass(frozen=True)
class SignalResult:
    job_id: str
    attempt: int
    delivered: bool
    signal: str = ""


@dataclass(frozen=True)
class PreemptionRequest:
    """The update a recorded `JobPreemptionRequested` becomes. `grace_s` < 0: the run's default."""

    reason: str
    request_id: str = ""
    grace_s: float = -1.0
    requeue: bool = True
    for_job_id: str = ""


@dataclass(frozen=True)
class PreemptionAccepted:
    job_id: str
    attempt: int
    reason: str
    grace_s: float


@dataclass(frozen=True)
class CapReached:
    """From the Session workflow to its JobRun: the cap is here; stop (checkpoint) or become preemptible."""

    action: str


@dataclass(frozen=True)
class Revocation:
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CancelRun:
    reason: str = ""


@dataclass(frozen=True)
class RunStatus:
    job_id: str
    attempt: int
    phase: str  # starting | running | stopping | ended
    started_at: float | None
    protected_until: float | None
    protected: bool
    stop_reason: str = ""
    polls: int = 0
    # while starting: why the start still waits ("starting: queued behind 12 start(s) at executor 'k8s' ...",
    # ADR 0069); "" before the first look and once started
    waiting: str = ""


@dataclass(frozen=True)
class JobRunResult:
    job_id: str
    attempt: int
    outcome: str  # "exited" | "lost" | "preempted" | "session_cap" | "cancelled"
    exit_code: int | None


@dataclass(frozen=True)
class LostReport:
    job_id: str
    attempt: int
    reason: str
    correlation_id: str = ""


# -- Session ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionCarry:
    warnings_sent: int = 0
    idle_since: float | None = None
    idle_warned_at: float | None = None
    revoked: bool = False


@dataclass(frozen=True)
class SessionInput:
    job_id: str
    attempt: int
    parent_workflow_id: str
    started_at: float
    cap_s: float
    timings: ContractTimings = field(default_factory=ContractTimings)
    restored_from: str = ""
    correlation_id: str = ""
    carry: SessionCarry | None = None


@dataclass(frozen=True)
class UtilisationSignal:
    idle: bool
    since: float


@dataclass(frozen=True)
class SessionResult:
    job_id: str
    attempt: int
    outcome: str  # "cap" | "ended"
    warnings: int = 0
    revoked: bool = False


# -- commands out of workflows ------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandMessage:
    """A domain command a workflow publishes to Kafka (decoded and checked by the activity).
    `message_id` is derived from the workflow's state, so a retried or replayed publish is recorded once."""

    type: str
    payload: dict[str, Any]
    message_id: str
    correlation_id: str = ""
    actor: str = "temporal-worker"


# -- node drain and budget periods ----------------------------------------------------------------


@dataclass(frozen=True)
class DrainInput:
    node_id: str
    executor: str
    reason: str = ""
    poll_s: float = 5.0
    grace_s: float = 120.0
    lost_after_s: float = 60.0
    stop_jobs: bool = False  # the scheduler's policy cycle issues drain stops; True: this workflow does


@dataclass(frozen=True)
class NodeRef:
    node_id: str
    reason: str = ""  # a drain's: the operator's reason recorded with `DrainNode` (Kubernetes: the cordon's annotation)


@dataclass(frozen=True)
class ExecutorRef:
    """Whose liveness a waiting start asks about (ADR 0069); `job_id` is left out of the queue it counts."""

    executor: str
    job_id: str = ""


@dataclass(frozen=True)
class ExecutorLiveness:
    """When the ledger recorded the executor's last heartbeat (None: never), its placements not yet started
    (besides the asking job's), and when that was read."""

    executor: str
    heard_at: float | None
    queued: int = 0
    # when the log was read: silence is judged at the time of the observation, not when a busy worker gets
    # round to the run's next task (0: unknown, the run's own time)
    read_at: float = 0.0


@dataclass(frozen=True)
class JobOnNode:
    job_id: str
    attempt: int
    state: str
    protected_until: float | None
    preempting: bool
    resumable: bool = False


@dataclass(frozen=True)
class NodeOccupancy:
    node_id: str
    state: str
    jobs: list[JobOnNode] = field(default_factory=list)
    executor: str = ""  # the node's executor (empty: unknown node, or an answer from before it was carried)


@dataclass(frozen=True)
class ResumeInput:
    node_id: str
    lost_after_s: float = 60.0


@dataclass(frozen=True)
class DrainResult:
    node_id: str
    outcome: str  # "drained" | "resumed" | "unknown"
    requested: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PeriodCloseInput:
    period_s: float = 86_400.0
    at: float = 0.0  # 0: now (the workflow's clock); else close the period that ended before `at`


@dataclass(frozen=True)
class PeriodWindow:
    start: float
    end: float


@dataclass(frozen=True)
class PeriodFigures:
    start: float
    end: float
    capacity_gpu_s: float
    allocations: dict[str, dict[str, float]]
    events_read: int = 0


@dataclass(frozen=True)
class PeriodCloseResult:
    period_id: str
    start: float
    end: float
    allocations: int
