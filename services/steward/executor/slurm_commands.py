"""Slurm's command-line clients as the Slurm executor uses them (issue 23; docs/adr/0043): the one runner
through which every command goes (injectable, so the parsing is table-tested with outputs recorded from a real
slurmctld), and the parsers of what they print.

Only `scontrol -o` (one record per line, `Key=Value` pairs) is read: its form is the same from Slurm 20 to 24,
where the `--json` forms changed with every OpenAPI version (22.05's `scontrol` has none at all)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

# A key of `scontrol -o`: a word (with '/', ':' or '.' inside: `Socks/Node`, `AllocNode:Sid`) right after a
# space or the line's start, then '='. Values may hold spaces (`OS=Linux 6.1 #1 SMP`, `Reason=fan failure`).
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:.]*)=")
_RANGE = re.compile(r"^(\d+)-(\d+)$")

# Job states (squeue(1) "JOB STATE CODES") by what they mean for an attempt.
ACTIVE_STATES: Final = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                                  "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT",
                                  "STOPPED", "RESV_DEL_HOLD"})
# the states in which a job holds its nodes' resources (its GPUs count in the nodes' GresUsed)
HOLDING_STATES: Final = frozenset({"CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "SIGNALING", "STAGE_OUT",
                                   "STOPPED", "RESIZING"})
# ended without the job's own exit code: the node or Slurm lost it (Steward requeues it as lost)
LOST_STATES: Final = frozenset({"NODE_FAIL", "BOOT_FAIL", "DEADLINE", "REVOKED"})
# node state flags meaning "takes no work" (scontrol(1) "NODE STATE")
UNAVAILABLE_FLAGS: Final = frozenset({"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "INVAL", "FUTURE",
                                      "MAINTENANCE", "REBOOT_ISSUED", "REBOOT_REQUESTED", "POWERED_DOWN",
                                      "POWER_DOWN", "POWERING_DOWN"})
# UNKNOWN is not among them: every node reads UNKNOWN from a slurmctld restart until its slurmd registers again
# (seconds), and one that stays silent turns DOWN after SlurmdTimeout
STEWARD_REASON: Final = "steward:"  # drains Steward asked for carry this prefix in their Reason
REASON_MAX: Final = 200  # characters of an operator's drain reason kept in Slurm's Reason
_UNSAFE = re.compile(r"[^\x20-\x7e]|[=\"'`\\\[\]]")  # not printable ASCII, or read by scontrol or our parser

Runner = Callable[[Sequence[str], Mapping[str, str] | None], str]


def drain_reason(reason: str) -> str:
    """Slurm's Reason of a drain Steward asks for: its prefix, then the operator's reason (ADR 0085) as one
    string `scontrol -o show node` prints back whole: every character outside printable ASCII (a newline would
    end the record), `=` (would start a key: `x State=IDLE` would read as the node's state), quotes, backslash,
    backquote and brackets (Slurm appends ` [user@time]`) becomes a space, runs of spaces one, at most
    `REASON_MAX` characters; "drained by Steward" when nothing is left. The argv goes to `scontrol` without a
    shell, so nothing else is interpreted."""
    words = " ".join(_UNSAFE.sub(" ", reason).split())[:REASON_MAX].rstrip()
    return f"{STEWARD_REASON} {words or 'drained by Steward'}"


class SlurmError(Exception):
    """A Slurm command failed (one line: the command and what it printed)."""


def run_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The runner used outside tests: the command's standard output, or `SlurmError` naming it."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                              env=dict(env) if env is not None else None)
    except (OSError, subprocess.SubprocessError) as err:
        raise SlurmError(f"{' '.join(argv[:2])}: {err}") from None
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:300]
        raise SlurmError(f"{' '.join(argv[:2])} exited {proc.returncode}: {said}")
    return proc.stdout


def parse_record(line: str) -> dict[str, str]:
    """One `scontrol -o` line as its `Key=Value` pairs (values stripped; a later key repeats win)."""
    keys = list(_KEY.finditer(line))
    record: dict[str, str] = {}
    for here, after in zip(keys, [*keys[1:], None], strict=True):
        end = after.start() if after is not None else len(line)
        record[here.group(1)] = line[here.end():end].strip()
    return record


def parse_records(text: str) -> list[dict[str, str]]:
    return [parse_record(line) for line in text.splitlines() if "=" in line]


def expand_hostlist(expr: str) -> list[str]:
    """Slurm's host list (`slurm[0-3,7],gpu-a`) as names, in order; a bare name is itself."""
    names: list[str] = []
    for part in _split_top(expr):
        if "[" not in part:
            if part:
                names.append(part)
            continue
        head, _, rest = part.partition("[")
        inside, _, tail = rest.partition("]")
        for item in inside.split(","):
            bounds = _RANGE.match(item)
            if bounds is None:
                names.append(f"{head}{item}{tail}")
                continue
            low, high = bounds.group(1), bounds.group(2)
            width = len(low) if low.startswith("0") else 0
            names.extend(f"{head}{i:0{width}d}{tail}" for i in range(int(low), int(high) + 1))
    return names


def _split_top(expr: str) -> list[str]:
    """`a[1,2],b` → ['a[1,2]', 'b']: commas outside brackets separate."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(expr[start:i].strip())
            start = i + 1
    parts.append(expr[start:].strip())
    return parts


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: int
    name: str
    state: str  # JobState, e.g. RUNNING, COMPLETED, FAILED, CANCELLED, NODE_FAIL
    exit_code: int
    exit_signal: int
    nodes: tuple[str, ...]
    user: str
    start_time: float = 0.0  # epoch seconds; 0 when Slurm has none (a pending job's is only a forecast)
    end_time: float = 0.0
    gpus: int = 0  # GPUs it asked for on all its nodes (`TresPerNode=gres:gpu:N` x `NumNodes`)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def lost(self) -> bool:
        return self.state in LOST_STATES

    @property
    def holding(self) -> bool:
        """Slurm has given it its nodes (a pending or requeued job holds nothing yet)."""
        return self.state in HOLDING_STATES


def slurm_time(value: str) -> float:
    """A Slurm time (`2026-12-02T07:14:27`, in the client's local time zone) as epoch seconds; 0 for
    `Unknown`, `None`, `N/A` or anything else that is no time."""
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return 0.0


def gpus_per_node_of(tres_per_node: str) -> int:
    """The GPUs of a job's `TresPerNode` (`gres:gpu:2`, `gres:gpu:a100:2`, Slurm 23's `gres/gpu:2`)."""
    for item in _split_top(tres_per_node):
        fields = item.replace("gres/", "gres:").split(":")
        if len(fields) >= 3 and fields[0] == "gres" and fields[1] == "gpu" and fields[-1].isdigit():
            return int(fields[-1])
    return 0


def job_from_record(record: Mapping[str, str]) -> SlurmJob:
    code, _, sig = record.get("ExitCode", "0:0").partition(":")
    nodes = record.get("NodeList", "")
    state = record.get("JobState", "UNKNOWN")
    count = record.get("NumNodes", "1").split("-", 1)[0]
    return SlurmJob(int(record["JobId"]), record.get("JobName", ""), state, int(code or 0), int(sig or 0),
                    tuple(expand_hostlist(nodes)) if nodes and nodes != "(null)" else (),
                    record.get("UserId", "").split("(", 1)[0],
                    0.0 if state == "PENDING" else slurm_time(record.get("StartTime", "")),
                    slurm_time(record.get("EndTime", "")),
                    gpus_per_node_of(record.get("TresPerNode", "")) * (int(count) if count.isdigit() else 1))


def parse_jobs(text: str) -> list[SlurmJob]:
    return [job_from_record(r) for r in parse_records(text) if "JobId" in r]


@dataclass(frozen=True, slots=True)
class GpuGres:
    count: int
    model: str  # the GRES type (`gpu:a100:8` → "a100"), "" when untyped


def parse_gres(gres: str) -> GpuGres:
    """The GPUs of a node's `Gres=` (`gpu:8`, `gpu:a100:4(S:0-1)`, `gpu:a:2,gpu:b:2,nic:1`): their total, and
    their type when there is one (the first, when a node mixes types)."""
    total, model = 0, ""
    for item in _split_top(gres):
        fields = item.split("(", 1)[0].split(":")
        if fields[0] != "gpu" or len(fields) < 2:
            continue
        count = fields[-1]
        if not count.isdigit():
            continue
        total += int(count)
        if len(fields) >= 3 and not model:
            model = fields[1]
    return GpuGres(total, model)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    gpu_model: str
    flags: frozenset[str]  # State split on '+', with '*' (not responding) as NOT_RESPONDING
    reason: str
    gpus_used: int = 0  # allocated to any job, Steward's or not (`GresUsed`, printed by `scontrol -d`)

    @property
    def available(self) -> bool:
        return not (self.flags & UNAVAILABLE_FLAGS)

    @property
    def drained_by_steward(self) -> bool:
        return "DRAIN" in self.flags and self.reason.startswith(STEWARD_REASON)


def node_state_flags(state: str) -> frozenset[str]:
    flags = set()
    for part in state.split("+"):
        if part.endswith("*"):
            flags.add("NOT_RESPONDING")
            part = part[:-1]
        if part:
            flags.add(part.upper())
    return frozenset(flags)


def node_from_record(record: Mapping[str, str]) -> SlurmNode:
    gres = parse_gres(record.get("Gres", ""))
    reason = record.get("Reason", "")
    reason = reason.rsplit(" [", 1)[0] if reason.endswith("]") else reason  # "why [user@time]"
    return SlurmNode(record["NodeName"], gres.count, gres.model, node_state_flags(record.get("State", "")),
                     "" if reason == "(null)" else reason, parse_gres(record.get("GresUsed", "")).count)


def parse_nodes(text: str) -> list[SlurmNode]:
    return [node_from_record(r) for r in parse_records(text) if "NodeName" in r]



@dataclass(frozen=True, slots=True)
class CompletedJob:
    """One job of Slurm's job-completion log (`JobCompType=jobcomp/filetxt`, one `Key=Value` line per ended
    job): Slurm's own record of when a job ran, which Steward's books are compared with. Its `Tres` names
    GPUs only when slurm.conf counts `gres/gpu` among its TRES, which Slurm allows only with slurmdbd: the GPUs a
    job held come from the controller's record of it (`SlurmJob.gpus`)."""

    job_id: int
    name: str
    user: str
    state: str
    start_time: float
    end_time: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end_time - self.start_time)


def parse_jobcomp(text: str) -> list[CompletedJob]:
    return [CompletedJob(int(r["JobId"]), r.get("Name", ""), r.get("UserId", "").split("(", 1)[0],
                         r.get("JobState", ""), slurm_time(r.get("StartTime", "")), slurm_time(r.get("EndTime", "")))
            for r in parse_records(text) if "JobId" in r]
