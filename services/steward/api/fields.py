"""Typed wrappers of Strawberry's field decorators (their overloads with keyword arguments are untyped,
which would make every resolver untyped for mypy)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import strawberry

F = TypeVar("F", bound=Callable[..., Any])

# a mutation's answer that refuses (errors as data, steward.api.payloads), by type name, and the outcome
# label of the request metric it gives (steward.api.metrics.outcome_of)
REFUSALS = {"Rejected": "rejected", "InvalidInput": "rejected", "NotAuthorised": "unauthorised"}


def _marking(resolver: F) -> F:
    """`resolver`, noting on the request's context when its answer is a refusal (the data of a union
    answer does not say so unless the client asked for `__typename`)."""

    @functools.wraps(resolver)
    async def marked(*args: Any, **kwargs: Any) -> Any:
        result = await resolver(*args, **kwargs)
        refusal = REFUSALS.get(type(result).__name__)
        if refusal is not None:
            info = kwargs.get("info") or next((a for a in args if hasattr(a, "context")), None)
            context: Any = getattr(info, "context", None)
            if context is not None and hasattr(context, "refusal"):
                context.refusal = refusal
        return result

    return cast(F, marked)


def field(description: str) -> Callable[[F], F]:
    return cast(Callable[[F], F], strawberry.field(description=description))


def mutation(description: str) -> Callable[[F], F]:
    """A mutation whose refusals (Rejected, InvalidInput, NotAuthorised) are counted as such."""

    def decorate(resolver: F) -> F:
        return cast(F, strawberry.mutation(description=description)(_marking(resolver)))

    return decorate


def subscription(description: str) -> Callable[[F], F]:
    return cast(Callable[[F], F], strawberry.subscription(description=description))
