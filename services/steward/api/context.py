"""Per-request context: the services, who is asking, and what they may see; errors users may read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields
from typing import Any

from graphql import GraphQLError

from steward.api.commands import Gateway
from steward.api.readmodel import ReadModel, ReadView
from steward.api.settings import ApiSettings
from steward.api.tail import HeadWatch
from steward.auth.access import Access, Capability
from steward.auth.authenticate import Authenticator
from steward.auth.denials import Denial, DenialAuditor
from steward.auth.mapping import GroupMappings
from steward.auth.owners import Owners
from steward.auth.principal import Principal
from steward.auth.tokens import TokenStore
from steward.store.eventstore import EventStore

POSITION_HEADER = "X-Steward-Position"

# what an answer may depend on and still be shared by every caller who has the same (the result cache's view)
VIEW_FIELDS = frozenset({"role", "scopes", "sees_everything"})


class ObservedPrincipal(Principal):
    """The caller as resolvers see it during a cacheable request: reading anything of it but its role and
    scopes (its subject, token, name, how it signed in) marks the answer as the caller's own (`personal` in the
    guard's flag), which the result cache then keeps for this caller only. An answer that read nothing else is
    the same for every caller with the same role and scopes, and is shared by them (issue 22: 200 tokens no
    longer each compute the same dashboard). Safe by default: a new resolver reading the subject is personal."""

    __slots__ = ("_flag",)

    @classmethod
    def watching(cls, who: Principal, flag: dict[str, bool]) -> ObservedPrincipal:
        seen = cls(**{f.name: getattr(who, f.name) for f in fields(Principal)})  # every field, whatever is added
        object.__setattr__(seen, "_flag", flag)
        return seen

    def __getattribute__(self, name: str) -> Any:
        if name not in VIEW_FIELDS and not name.startswith("__") and name != "_flag":
            object.__getattribute__(self, "_flag")["personal"] = True
        return object.__getattribute__(self, name)


class UserError(GraphQLError):
    """An error the user may read (passed through the error mask), with a stable `code`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, extensions={"code": code})


class Forbidden(UserError):
    def __init__(self, operation: str) -> None:
        super().__init__(f"not authorised: your role may not use '{operation}'", "FORBIDDEN")


class Unauthenticated(UserError):
    def __init__(self) -> None:
        super().__init__("not authenticated: send 'Authorization: Bearer <token>'", "UNAUTHENTICATED")


class BadInput(UserError):
    def __init__(self, message: str) -> None:
        super().__init__(message, "BAD_USER_INPUT")


@dataclass(slots=True)
class Services:
    settings: ApiSettings
    store: EventStore
    gateway: Gateway
    read: ReadModel
    tokens: TokenStore
    auth: Authenticator
    denials: DenialAuditor
    heads: HeadWatch
    mappings: GroupMappings | None = None  # the group mapping in force (single sign-on)
    owners: Owners | None = None  # who submitted each job


@dataclass(slots=True)
class Context:
    services: Services
    request: Any
    response: Any
    principal: Principal | None = None
    client: str = ""
    connection_params: dict[str, Any] | None = None
    # the guard's result-cache flags for this request: "ok" (may be served again), "personal" (read who asks)
    cache: dict[str, bool] | None = None
    refusal: str | None = None  # "rejected" or "unauthorised" when a mutation answered a refusal (fields.py)
    _view: ReadView | None = field(default=None, repr=False)

    async def view(self) -> ReadView:
        snap = self._view
        if snap is None:
            read = self.services.read
            snap = read.cached_view()
            if snap is None:
                snap = await asyncio.to_thread(read.view)
            if snap.head < read.known_head():
                self.no_cache()  # the previous read view while a newer one loads: not to be served again
            self._view = snap
        return snap

    def position(self, position: int) -> None:
        """Tell the client the position its mutation was recorded at (header `X-Steward-Position`): sent
        back with a later request, no replica answers it from an older position (docs/api.md "Replicas")."""
        headers = getattr(self.response, "headers", None)
        if headers is not None:
            headers[POSITION_HEADER] = str(max(position, int(headers.get(POSITION_HEADER, 0))))

    def who(self, operation: str) -> Principal:
        if self.principal is None:
            raise Unauthenticated()
        return self.principal

    async def access(self, operation: str = "query") -> Access:
        principal = self.who(operation)
        snap = await self.view()
        return Access.of(principal, snap.parents)

    def no_cache(self) -> None:
        """This answer must not be served again from the result cache (a denial, a side effect, or data
        that changes without the log moving)."""
        if self.cache is not None:
            self.cache["ok"] = False

    async def deny(self, operation: str, target: str, reason: str) -> None:
        """Record a denial (the caller then answers as if the object did not exist, or NotAuthorised)."""
        self.no_cache()
        await self.services.denials.record(self.principal, Denial(operation, target, reason), self.client)

    async def require(self, capability: Capability, operation: str) -> Access:
        access = await self.access(operation)
        if not access.can(capability):
            await self.deny(operation, "*", f"role {access.role.value} lacks {capability.value}")
            raise Forbidden(operation)
        return access
