"""The exported SDL is the schema the API serves: CI fails when schema/graphql/schema.graphql is stale."""

from __future__ import annotations

from steward.api.export import SDL_PATH
from steward.api.schema import build_schema, sdl


def test_exported_schema_is_current() -> None:
    assert SDL_PATH.exists(), "run `python -m steward.api.export`"
    assert SDL_PATH.read_text() == sdl(), f"{SDL_PATH} is stale: run `python -m steward.api.export` and commit it"


def test_the_served_schema_has_the_same_sdl_as_the_exported_one() -> None:
    served = build_schema(max_depth=3, max_tokens=10, max_aliases=1, introspection=False)
    assert served.as_str() + "\n" == sdl()


def test_subscriptions_mutations_and_payload_unions_are_in_the_contract() -> None:
    text = sdl()
    for name in ("type Subscription", "jobProgress(", "occupancy:", "events(",
                 "union SubmitJobResult = JobAccepted | Rejected | InvalidInput | NotAuthorised",
                 "setAllocations(", "cancelJob(", "openSession(", "restoreSession(", "setPolicy(",
                 "registerNode(", "drainNode(", "whyPending(", "whyPreempted(", "auditEvents(", "stateAt(",
                 "verify(", "type JobConnection", "type PageInfo"):
        assert name in text, name
