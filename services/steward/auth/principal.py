"""Who is asking: a subject with one role and the org-tree nodes that role applies to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """DESIGN.md "Who uses it". Operators act as admins."""

    admin = "admin"
    manager = "manager"  # their subtree: allocations and visibility
    researcher = "researcher"  # their projects: submit, cancel, sessions
    auditor = "auditor"  # read everything, no mutations


ROLES: tuple[str, ...] = tuple(r.value for r in Role)


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    role: Role
    # Org-tree nodes the role applies to (a manager's subtree roots, a researcher's projects or teams).
    # Empty for admin and auditor, who see everything.
    scopes: tuple[str, ...] = ()
    token_id: str | None = None
    via: str = "api-token"  # or "jwt", "oidc"
    name: str = ""  # the person's display name (single sign-on); the subject stands in when empty

    @property
    def display(self) -> str:
        return self.name or self.subject

    @property
    def sees_everything(self) -> bool:
        return self.role in (Role.admin, Role.auditor)

    @property
    def rate_key(self) -> str:
        return self.token_id or f"{self.via}:{self.subject}"
