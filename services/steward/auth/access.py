"""What a principal may see and do, decided from its role and the org tree (pure; no IO).

- admin: everything.
- auditor: reads everything, including the audit stream; no mutations.
- manager: reads its subtrees; sets the shares of children of any node in them; asks for the preemption
  of jobs in them (the ledger still refuses inside a job's protection: a manager cannot break the contract).
- researcher: reads and works (submit, cancel, sessions) in the projects of its subtrees; other tenants'
  work only as counts and queue positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from steward.auth.principal import Principal, Role

ROOT = "cluster"


class Capability(StrEnum):
    read_audit = "read_audit"  # audit stream, denials, state as of, verification
    set_allocations = "set_allocations"
    work = "work"  # submit, cancel, open/restore sessions
    operate = "operate"  # nodes, policy
    preempt = "preempt"  # ask for a running job's preemption (admin anywhere, manager in its subtrees)
    manage_tokens = "manage_tokens"  # anyone's tokens; everyone may mint tokens they own, no wider than they are
    manage_identities = "manage_identities"  # the group mapping (which role and scopes a provider's group gives)


ROLE_CAPABILITIES: dict[Role, frozenset[Capability]] = {
    Role.admin: frozenset(Capability),
    Role.auditor: frozenset({Capability.read_audit}),
    Role.manager: frozenset({Capability.set_allocations, Capability.preempt}),
    Role.researcher: frozenset({Capability.work}),
}


def subtree(parents: Mapping[str, str], roots: Iterable[str]) -> frozenset[str]:
    """Every node under (and including) `roots`; the root of the tree covers everything."""
    roots = set(roots)
    if ROOT in roots:
        return frozenset(parents) | {ROOT}
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out: set[str] = set()
    stack = [r for r in roots if r in parents]
    while stack:
        node = stack.pop()
        if node in out:
            continue
        out.add(node)
        stack.extend(children.get(node, ()))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Access:
    principal: Principal
    parents: Mapping[str, str]  # allocation -> parent, the org tree as recorded
    nodes: frozenset[str] | None  # the principal's subtree; None = everything

    @staticmethod
    def of(principal: Principal, parents: Mapping[str, str]) -> Access:
        nodes = None if principal.sees_everything else subtree(parents, principal.scopes)
        return Access(principal, parents, nodes)

    @property
    def role(self) -> Role:
        return self.principal.role

    def can(self, capability: Capability) -> bool:
        return capability in ROLE_CAPABILITIES[self.role]

    def sees(self, node: str) -> bool:
        """A node of the org tree (an allocation or project) and everything recorded against it."""
        return self.nodes is None or node in self.nodes

    def manages(self, parent: str) -> bool:
        """May set the shares of `parent`'s children (admin anywhere, manager inside its subtrees)."""
        return self.can(Capability.set_allocations) and (self.nodes is None or parent in self.nodes)

    def preempts_in(self, project: str) -> bool:
        """May ask for the preemption of `project`'s jobs (admin anywhere, manager inside its subtrees)."""
        return self.can(Capability.preempt) and (self.nodes is None or project in self.nodes)

    def works_in(self, project: str) -> bool:
        """May submit, cancel and run sessions in `project`."""
        return self.can(Capability.work) and (self.nodes is None or project in self.nodes)

    def visible_projects(self) -> frozenset[str] | None:
        return self.nodes
