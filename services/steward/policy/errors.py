"""Typed policy errors: one base, `PolicyError`; every subclass names the offending node or job.

`code` is stable (it ends up in rejection events and GraphQL errors); `message` is for people.
"""

from __future__ import annotations


class PolicyError(Exception):
    """Base of every rule violation the policy core reports."""

    code = "policy_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- the org tree (DESIGN.md "Org tree and allocations") -------------------------------------------


class TreeError(PolicyError):
    """The allocation tree does not validate; `node` is the offending tree node."""

    code = "invalid_tree"

    def __init__(self, node: str, message: str) -> None:
        super().__init__(message)
        self.node = node


class DuplicateNode(TreeError):
    code = "duplicate_node"


class UnknownParent(TreeError):
    code = "unknown_parent"

    def __init__(self, node: str, parent: str) -> None:
        super().__init__(node, f"node {node!r} names unknown parent {parent!r}")
        self.parent = parent


class ShareOutOfRange(TreeError):
    code = "share_out_of_range"

    def __init__(self, node: str, share: float) -> None:
        super().__init__(node, f"node {node!r} has share {share!r}, outside [0, 1]")
        self.share = share


class ChildrenOverAllocated(TreeError):
    code = "children_over_allocated"

    def __init__(self, node: str, total: float) -> None:
        super().__init__(node, f"children of {node!r} have shares summing to {total:.6g} > 1")
        self.total = total


class CycleInTree(TreeError):
    code = "cycle_in_tree"

    def __init__(self, node: str) -> None:
        super().__init__(node, f"node {node!r} is its own ancestor")


class TreeTooDeep(TreeError):
    code = "tree_too_deep"

    def __init__(self, node: str, depth: int, limit: int) -> None:
        super().__init__(node, f"node {node!r} is at depth {depth}, deeper than {limit}")
        self.depth = depth


class UnknownAllocation(TreeError):
    code = "unknown_allocation"

    def __init__(self, node: str) -> None:
        super().__init__(node, f"no allocation named {node!r}")


class InvalidDebugQuota(TreeError):
    code = "invalid_debug_quota"

    def __init__(self, node: str, value: object) -> None:
        super().__init__(node, f"allocation {node!r}: debug quota must be a whole number of GPUs >= 0, got {value!r}")
        self.value = value


# --- cluster nodes, jobs (a setting: steward.domain.policy_settings.InvalidSettings) ------------------------


class InvalidNode(PolicyError):
    """A cluster node is malformed (GPU count, state, duplicate id)."""

    code = "invalid_node"

    def __init__(self, node: str, message: str) -> None:
        super().__init__(f"node {node!r}: {message}")
        self.node = node


class InvalidJob(PolicyError):
    """A job is malformed (GPU count, class, min_runtime, placement)."""

    code = "invalid_job"

    def __init__(self, job: str, message: str) -> None:
        super().__init__(f"job {job!r}: {message}")
        self.job = job


class UsageError(PolicyError):
    """Usage accounting was fed out of order (time going backwards) or a malformed interval."""

    code = "invalid_usage"

    def __init__(self, project: str, message: str) -> None:
        super().__init__(f"usage of {project!r}: {message}")
        self.project = project


class TopologyError(PolicyError):
    """A topology description (Slurm topology.conf, Kubernetes labels, hostlist) does not parse."""

    code = "invalid_topology"

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
