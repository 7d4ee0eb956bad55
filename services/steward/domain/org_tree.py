"""The org tree's shape rules (DESIGN.md "Org tree", "Debug quota and the time-to-first-GPU SLO").

The one home of these rules: the ledger's decisions (`steward.domain.decide`), the policy's validated tree
(`steward.policy.tree`) and the scenario file's parser (`steward.sim.scenario`, which `steward tree apply` reads
too) all ask these predicates, and each words its refusal for its own reader (a rejected command, a tree error, a
place in a file)."""

from __future__ import annotations

MAX_TREE_DEPTH = 8
"""DESIGN.md "Org tree": a tree of any depth up to 8 (a top-level allocation is at depth 1)."""

SHARE_SUM_SLACK = 1e-9
"""Tolerance on "the children's shares sum to at most 1": shares are decimal fractions held in floats, so three
children of 0.1, 0.2 and 0.7 sum to 1.0000000000000002."""


def share_in_unit_interval(share: float) -> bool:
    """DESIGN.md "Org tree": a share is a fraction of the parent's allocation, in [0, 1] (NaN is not)."""
    return 0.0 <= share <= 1.0


def children_shares_fit(total: float) -> bool:
    """DESIGN.md "Org tree": the children's shares of one node sum to at most 1 (within `SHARE_SUM_SLACK`)."""
    return total <= 1.0 + SHARE_SUM_SLACK


def debug_quota_problem(gpus: object) -> str | None:
    """DESIGN.md "Debug quota and the time-to-first-GPU SLO": a quota is a whole number of GPUs, at least 0.
    None when `gpus` is one; else what is wrong with it, to follow the quota's name."""
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        return "must be a whole number of GPUs"
    if gpus < 0:
        return "must be >= 0 GPUs"
    return None
