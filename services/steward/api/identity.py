"""GraphQL for people (issue 24, ADR 0049): the group mapping in force (`groupMapping`), setting it
(`setGroupMapping`, admins, through the ledger like every admin command), and the rule for the API tokens a
person mints for their automation: owned by them, and no wider than they are."""

from __future__ import annotations

import asyncio
from typing import Annotated

import strawberry

from steward.api.context import Context
from steward.api.payloads import InvalidInput, NotAuthorised, Rejected
from steward.api.scalars import BigInt
from steward.auth.access import Access
from steward.auth.mapping import NONE_SET
from steward.auth.principal import Role


@strawberry.type(description="Members of `group` act as `role` over `scopes` (org-tree nodes).")
class GroupRuleOut:
    group: str
    role: str
    scopes: list[str]


@strawberry.input(description="One rule of the group mapping: members of `group` act as `role` over `scopes` "
                              "(managers and researchers need scopes; admins and auditors take none).")
class GroupRuleInput:
    group: str
    role: str
    scopes: list[str] = strawberry.field(default_factory=list)


@strawberry.type(description="The group mapping in force: who set it, when and why (position 0: none set yet, "
                             "so nobody signed in through the provider has a role).")
class GroupMapping:
    rules: list[GroupRuleOut]
    position: BigInt
    recorded_at: float | None
    set_by: str
    set_by_name: str
    reason: str
    issuer: str = strawberry.field(description="The OpenID provider Steward trusts (empty: single sign-on is off).")


@strawberry.type
class GroupMappingChanged:
    position: BigInt
    rules: int


SetGroupMappingResult = Annotated[GroupMappingChanged | Rejected | InvalidInput | NotAuthorised,
                                  strawberry.union("SetGroupMappingResult")]


async def group_mapping(ctx: Context) -> GroupMapping:
    found = NONE_SET
    if ctx.services.mappings is not None:
        ctx.services.mappings.forget()  # answer what is recorded now
        found = await asyncio.to_thread(ctx.services.mappings.current)
    return GroupMapping(rules=[GroupRuleOut(group=r.group, role=r.role, scopes=list(r.scopes)) for r in found.rules],
                        position=found.position, recorded_at=found.recorded_at, set_by=found.actor,
                        set_by_name=found.actor_name or found.actor, reason=found.reason,
                        issuer=ctx.services.settings.oidc_issuer)


def token_wider_than_owner(owner: Access, role: str, scopes: list[str]) -> str | None:
    """Why a token of `role` over `scopes` would let its owner do more than they may (None: it does not).
    Admins mint any token; anyone else only tokens of their own role, over nodes inside their own subtrees."""
    if owner.role is Role.admin:
        return None
    if role != owner.role.value:
        return f"your role is {owner.role.value}: a token you own may not be {role}"
    outside = sorted(s for s in scopes if not owner.sees(s))
    if outside:
        return f"outside your scopes: {', '.join(outside)}"
    return None
