"""Commands: what someone (a person, the scheduler, an executor, a workflow) asks the ledger to do.

Every command is a frozen dataclass with a stable `TYPE`; `command_from_dict` is the one decoder used by
the ledger for messages read from Kafka, and it refuses unknown types and malformed fields by name.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_args, get_origin, get_type_hints

from steward.domain.errors import InvalidCommand

JOB_CLASSES = ("batch", "debug", "interactive")
ROOT = "cluster"


@dataclass(frozen=True, slots=True)
class SetAllocations:
    """A manager of `parent` sets the shares of its children (DESIGN: org tree and allocations)."""

    TYPE: ClassVar[str] = "SetAllocations"
    parent: str
    shares: dict[str, float]
    reason: str

    @property
    def aggregate(self) -> str:
        return f"allocation-{self.parent}"


@dataclass(frozen=True, slots=True)
class RegisterNode:
    TYPE: ClassVar[str] = "RegisterNode"
    node_id: str
    gpus: int
    gpu_model: str
    path: list[str]
    executor: str = "local"

    @property
    def aggregate(self) -> str:
        return f"node-{self.node_id}"


@dataclass(frozen=True, slots=True)
class SubmitJob:
    TYPE: ClassVar[str] = "SubmitJob"
    job_id: str
    project: str
    gpus: int
    min_runtime_s: float
    command: list[str]
    resumable: bool = False
    job_class: str = "batch"
    priority: int = 0

    @property
    def aggregate(self) -> str:
        return f"job-{self.job_id}"


@dataclass(frozen=True, slots=True)
class CancelJob:
    TYPE: ClassVar[str] = "CancelJob"
    job_id: str
    reason: str = ""

    @property
    def aggregate(self) -> str:
        return f"job-{self.job_id}"


@dataclass(frozen=True, slots=True)
class PlaceJob:
    """The scheduler's decision to run a queued job on GPUs, with the evidence that justified it."""

    TYPE: ClassVar[str] = "PlaceJob"
    job_id: str
    assignments: dict[str, list[int]]
    funded: bool
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def aggregate(self) -> str:
        return f"job-{self.job_id}"


@dataclass(frozen=True, slots=True)
class ReportJobStarted:
    TYPE: ClassVar[str] = "ReportJobStarted"
    job_id: str
    attempt: int
    pid: int

    @property
    def aggregate(self) -> str:
        return f"job-{self.job_id}"


@dataclass(frozen=True, slots=True)
class ReportJobExited:
    TYPE: ClassVar[str] = "ReportJobExited"
    job_id: str
    attempt: int
    exit_code: int

    @property
    def aggregate(self) -> str:
        return f"job-{self.job_id}"


Command = (
    SetAllocations | RegisterNode | SubmitJob | CancelJob | PlaceJob | ReportJobStarted | ReportJobExited
)
COMMAND_TYPES: dict[str, type[Any]] = {
    c.TYPE: c
    for c in (SetAllocations, RegisterNode, SubmitJob, CancelJob, PlaceJob, ReportJobStarted, ReportJobExited)
}


def _check(name: str, value: Any, hint: Any) -> Any:
    origin = get_origin(hint)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidCommand(f"field '{name}' must be a number, got {value!r}")
        return float(value)
    if hint in (int, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise InvalidCommand(f"field '{name}' must be {hint.__name__}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise InvalidCommand(f"field '{name}' must be a list, got {value!r}")
        (item,) = get_args(hint)
        return [_check(f"{name}[{i}]", v, item) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise InvalidCommand(f"field '{name}' must be an object, got {value!r}")
        key_t, val_t = get_args(hint)
        return {_check(f"{name} key", k, key_t): _check(f"{name}[{k}]", v, val_t) for k, v in value.items()}
    if hint is Any or origin is types.UnionType:
        return value
    return value


def command_from_dict(kind: str, payload: Mapping[str, Any]) -> Command:
    """Decode a command by its type name; unknown types, unknown or missing fields are named."""
    cls = COMMAND_TYPES.get(kind)
    if cls is None:
        raise InvalidCommand(f"unknown command type '{kind}'")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(payload) - set(fields))
    if unknown:
        raise InvalidCommand(f"{kind}: unknown field(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for fname, f in fields.items():
        if fname not in payload:
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            if not has_default:
                raise InvalidCommand(f"{kind}: missing field '{fname}'")
            continue
        values[fname] = _check(fname, payload[fname], hints[fname])
    cmd: Command = cls(**values)
    return cmd


def command_to_dict(command: Command) -> dict[str, Any]:
    return dataclasses.asdict(command)
