"""The API process: Strawberry's GraphQL app on Starlette, served by uvicorn on loopback."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from strawberry.asgi import GraphQL

from steward.api.commands import CommandGateway
from steward.api.schema import schema
from steward.bus.kafka import CommandPublisher
from steward.config import Settings
from steward.store.eventstore import EventStore


class StewardGraphQL(GraphQL[dict[str, Any], None]):
    def __init__(self, store: EventStore, gateway: CommandGateway) -> None:
        super().__init__(schema)
        self.store = store
        self.gateway = gateway

    async def get_context(self, request: Any, response: Any = None) -> dict[str, Any]:
        return {"store": self.store, "gateway": self.gateway, "request": request,
                "actor": "anonymous", "role": "admin"}


def create_app(settings: Settings) -> Starlette:
    store = EventStore.from_url(settings.resolved_store_url)
    publisher = CommandPublisher(settings)
    gateway = CommandGateway(publisher, store, settings.mutation_timeout_s)

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "head": store.head()})

    graphql = StewardGraphQL(store, gateway)
    app = Starlette(routes=[
        Route("/healthz", healthz),
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
    ], on_shutdown=[publisher.close])
    return app
