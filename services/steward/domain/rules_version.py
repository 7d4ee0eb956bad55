"""The version of the ledger's rules a decision was made under, and the named rule changes it gates (ADR 0038).

The ledger records `rules` (an int, `CURRENT`) in the metadata of every decision it records; `steward audit
replay` decides each recorded command again under the rules of that version, so a log written before a
rule changed replays as it was decided, and a rule change never makes an honest old log look tampered
with. Like Temporal's `workflow.patched()`: each change of a rule is named here with the version it came
in, and the code of the rule asks `patched(name, rules)` instead of always applying the newest rule.

A decision that records no version was recorded before the ledger recorded it (under version
`LAST_UNRECORDED` at the newest). Its version is not known, only bounded: `candidates(None)` are the
versions from `LAST_UNRECORDED` down to `FIRST`, and the replay takes the newest under which the decision
reproduces, and lists the decisions it reproduced only under earlier rules; a decision that records its
version is replayed under that version alone.

Adding a rule change: a new `RuleChange` with `CURRENT + 1` as its version, `CURRENT` raised, the old
behaviour kept behind `patched(name, rules)`, and a stored log written before the change in
tests/replay/logs that replays as identical (ADR 0038).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class RuleChange:
    name: str
    version: int  # the first rules version the changed rule is in force in
    adr: str
    what: str


CHANGES: Final[tuple[RuleChange, ...]] = (
    RuleChange("id_pattern", 2, "0033",
               "the ids a command introduces (job, session, node, executor, org node) follow the id pattern; a "
               "command naming another is refused by the ledger's decoder"),
    RuleChange("placeable", 2, "0033",
               "a job asking more GPUs than all registered nodes hold is refused at submit"),
    RuleChange("lane_hold_retired", 3, "0028",
               "the policy setting lane_hold_s is retired into claim_hold_s: a SetPolicy naming it is refused, "
               "and a recorded one no longer counts among the settings in force"),
    RuleChange("registration_keeps_state", 4, "0082",
               "registering a node again keeps its operator's state (draining, retiring): the NodeRegistered "
               "records it as `state`; before, every registration made the node ready"),
    RuleChange("node_gpus_bounded", 4, "0082",
               "a node has at most MAX_NODE_GPUS GPUs (1,024): a RegisterNode naming more is refused"),
    RuleChange("restore_keeps_request", 4, "0086",
               "a restored session accepts the GPU models and clusters the session it restores accepted (before: "
               "any)"),
    RuleChange("one_executor_a_cluster", 5, "0091",
               "a cluster's nodes are served by one executor: a RegisterNode putting a node into a cluster whose "
               "nodes another executor serves is refused (a gang never spans clusters, so it never spans "
               "executors); a node of the cluster registered again in it (its executor changed or not) is not"),
    RuleChange("registration_keeps_foreign", 5, "0091",
               "registering a node again keeps the foreign load its executor's last heartbeat reported (the "
               "NodeRegistered records it as `foreign_gpus`); before, a registration reset it to 0 until the "
               "executor's next heartbeat"),
    RuleChange("restore_checks_request", 5, "0091",
               "a restored session's request is checked as a submission's is, against today's nodes and pins: "
               "a model or cluster no node has any more, a cluster outside the project's pin, or more GPUs than "
               "the nodes it admits hold, is refused"),
    RuleChange("model_weights_positive", 6, "0098",
               "a SetPolicy's gpu_model_weights are each a finite number > 0, the rule SetGpuModelWeights applies "
               "(domain.clusters.weight_problem); before, a weight of 0 (a model's hours free to every budget) or "
               "NaN was accepted"),
)
"""Every named change of a ledger rule, oldest first."""

FIRST: Final = 1
"""The rules before any change named here (the release before ADR 0033)."""

CURRENT: Final = max(c.version for c in CHANGES)
"""The rules this code applies to new decisions: recorded with each one."""

LAST_UNRECORDED: Final = 3
"""The newest rules a decision was recorded under without its version (the ledger records it from version 3
on): a decision without one was made under a version from `FIRST` to this."""

_BY_NAME: Final[Mapping[str, RuleChange]] = MappingProxyType({c.name: c for c in CHANGES})

RETIRED_SETTING_CHANGES: Final[Mapping[str, str]] = MappingProxyType({"lane_hold_s": "lane_hold_retired"})
"""Policy settings retired by a change named here (a setting not listed was retired before `FIRST`)."""


def patched(name: str, rules: int) -> bool:
    """Whether the rule change `name` is in force under rules version `rules` (`workflow.patched()`)."""
    change = _BY_NAME.get(name)
    if change is None:
        raise KeyError(f"no rule change named {name!r}")
    return rules >= change.version


def setting_retired(setting: str, rules: int) -> bool:
    """Whether a retired policy setting was already retired under rules version `rules`."""
    change = RETIRED_SETTING_CHANGES.get(setting)
    return change is None or patched(change, rules)


def old_setting_problem(setting: str, value: Any) -> str | None:
    """Why `value` was not valid for a setting before it was retired (its check of then), or None."""
    if setting == "lane_hold_s":
        ok = value is None or (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0)
        return None if ok else "must be >= 0 (or null: no hold)"
    return None


def recorded_version(metadata: Mapping[str, Any]) -> int | None:
    """The rules version a recorded decision names (None: recorded before versions were). Raises ValueError
    for a version that is not one this code knows (a log from a newer release, or a damaged field)."""
    value = metadata.get("rules")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not FIRST <= value <= CURRENT:
        raise ValueError(f"rules version {value!r} is not one this release knows ({FIRST} to {CURRENT}): "
                         "replay it with the release that recorded it or a newer one")
    return int(value)


def candidates(recorded: int | None) -> list[int]:
    """The versions to replay a decision under: its own, or, when it records none, every version from the
    newest down (the first that reproduces it is the one it was made under)."""
    return [recorded] if recorded is not None else list(range(LAST_UNRECORDED, FIRST - 1, -1))
