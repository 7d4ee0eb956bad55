"""Typed domain errors: a rejected command becomes a `CommandRejected` event with `code` and `message`."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every rule violation the domain reports. `code` is stable, `message` is for people."""

    code = "rejected"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidCommand(DomainError):
    code = "invalid_input"


class UnknownProject(DomainError):
    code = "unknown_project"


class NamespaceNotMapped(DomainError):
    """ADR 0056: a Kubernetes cluster's pods charge only the project an admin mapped their namespace to."""

    code = "namespace_not_mapped"


class UnknownJob(DomainError):
    code = "unknown_job"


class UnknownNode(DomainError):
    code = "unknown_node"


class InvalidAllocation(DomainError):
    code = "invalid_allocation"


class InvalidTransition(DomainError):
    code = "invalid_transition"


class CapacityConflict(DomainError):
    code = "capacity_conflict"


class ProtectedJob(DomainError):
    """DESIGN.md "Funded occupancy": nothing preempts a job inside its protection."""

    code = "protected"
