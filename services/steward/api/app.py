"""The API process: Strawberry's GraphQL app on Starlette, served by uvicorn on loopback.

In front of GraphQL, a guard refuses before any resolver runs: bodies over the size limit (413), missing
or invalid bearer tokens (401; 429 once a client address fails too often), requests over the token's rate
(429), and bodies that are not one JSON request nested within the limit (400, 415; `steward.api.requests`),
each answered as GraphQL-shaped JSON. Inside, the schema's
extensions refuse documents that are too deep, too long or have too many aliases, and mask internal
errors. Websockets speak graphql-transport-ws only, check the Origin of the handshake, authenticate in
`connection_init` (or the handshake's Authorization header) and cap subscriptions per connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.extensions import SchemaExtension
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler
from strawberry.types.graphql import OperationType

from steward.api import metrics as metrics_api
from steward.api.commands import CommandGateway, Gateway
from steward.api.context import POSITION_HEADER, Context, ObservedPrincipal, Services, UserError
from steward.api.ratelimits import SharedRateLimiter
from steward.api.readmodel import ReadModel
from steward.api.requests import MessageTooDeep, check_body, decode_message
from steward.api.schema import build_schema
from steward.api.settings import ApiSettings, get_api_settings
from steward.api.tail import HeadWatch
from steward.api.tokenmirror import MirroredTokens, checked_in_memory
from steward.auth.authenticate import Authenticator, bearer
from steward.auth.denials import Denial, DenialAuditor
from steward.auth.jwt import JwtVerifier
from steward.auth.mapping import GroupMappings
from steward.auth.oidc import OidcVerifier, SignInRefused
from steward.auth.owners import Owners
from steward.auth.principal import Principal
from steward.auth.ratelimit import RateLimiter
from steward.auth.tokens import TokenError
from steward.bus.kafka import BackgroundPublisher
from steward.config import Settings
from steward.domain.commands import RecordAccessDenial
from steward.logs import CorrelationMiddleware
from steward.store.eventstore import EventStore
from steward.store.hashing import canonical_text
from steward.store.unavailable import CODE as STORE_UNAVAILABLE
from steward.store.unavailable import RETRY_AFTER_S, unavailable, unavailable_message

log = logging.getLogger("steward.api")
GRAPHQL_PATH = "/graphql"
WEB_DIST = Path(__file__).resolve().parents[3] / "web" / "dist"


def _error(status: int, message: str, code: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"data": None, "errors": [{"message": message, "extensions": {"code": code}}]},
                        status_code=status, headers=headers)


def _refuse(status: int, message: str, code: str, client: str,
            headers: dict[str, str] | None = None) -> JSONResponse:
    """A refusal of the guard: GraphQL-shaped JSON, and one line at info (a client's mistake, not a fault)."""
    log.info("request refused with %d %s: %s", status, code, message,
             extra={"status": status, "code": code, "client": client})
    return _error(status, message, code, headers)


Limiter = RateLimiter | SharedRateLimiter


async def take(limiter: Limiter, key: str) -> float:
    """A request's charge: 0.0 when allowed, else the seconds to wait (a thread only when the shared
    bucket must be asked)."""
    if isinstance(limiter, SharedRateLimiter):
        return await limiter.take_async(key)
    return limiter.take(key)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


class ResultCache:
    """Answers to queries, per (who, request body, store head, time bucket): the projections only change
    when the head moves, and the figures age in buckets. "Who" is the caller's view (role and scopes) for a
    body whose answer read nothing else of the caller (`ObservedPrincipal`), so every caller with that view
    shares it, and the caller (the principal) for a body whose answer did (`me`, a caller's own jobs). A
    request whose execution recorded a denial, ran a mutation or read data outside the log is never stored.
    When only the bucket moved, the first request recomputes and the others get the previous bucket's answer
    meanwhile (at most two buckets old, never from before the head moved)."""

    def __init__(self, size: int, bucket_s: float) -> None:
        self.size = size
        self.bucket_s = bucket_s
        # (view, body) of the queries whose answer read who asks: those are cached per principal
        self._personal: dict[tuple[Any, bytes], None] = {}
        self._entries: dict[tuple[Any, ...], tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
        self._version: tuple[int, int] = (-1, -1)
        self._stale: dict[tuple[Any, ...], tuple[int, list[tuple[bytes, bytes]], bytes]] = {}
        # answers being computed, by (principal, body, head): concurrent identical requests wait for the first
        # (single flight), also when the time bucket ticks meanwhile (its answer is then one bucket old, as a
        # stale one would be; a flake of the single-flight test: 2 executions when 16 requests straddled a
        # tick); the future's result is None when that answer may not be shared (a denial, a non-query, an error)
        self.inflight: dict[tuple[Any, ...], asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes] | None]] = {}

    def version(self, head: int) -> tuple[int, int]:
        v = (head, int(time.time() // self.bucket_s))
        if v != self._version:
            # only the time bucket moved: the last bucket's answers stay servable while one request per
            # key recomputes (stale while revalidate; never across a change of the log)
            self._stale = {k[:2]: a for k, a in self._entries.items()} if v[0] == self._version[0] else {}
            self._entries = {}
            self._version = v
        return v

    @staticmethod
    def _view(principal: Principal) -> tuple[Any, ...]:
        """What of a caller an answer that read nothing else of them depends on: their role and scopes."""
        return (principal.role, principal.scopes)

    def who(self, principal: Principal, body: bytes) -> Any:
        """What an answer to `body` is kept under for `principal`: its view, unless that body was found to
        read who asks."""
        view = self._view(principal)
        return principal if (view, body) in self._personal else view

    def found_personal(self, principal: Principal, body: bytes) -> None:
        if len(self._personal) >= self.size:
            self._personal.pop(next(iter(self._personal)))
        self._personal[(self._view(principal), body)] = None

    def stale(self, key: tuple[Any, ...]) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """The previous time bucket's answer at the same head, if there is one."""
        return self._stale.get(key[:2])

    def get(self, key: tuple[Any, ...]) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        return self._entries.get(key)

    def put(self, key: tuple[Any, ...], value: tuple[int, list[tuple[bytes, bytes]], bytes]) -> None:
        if key[-1] != self._version:
            return
        if len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = value


class StoreOutage:
    """Any request that fails because the store cannot be reached (authentication, the guard's head read, a
    route) is answered 503 with `Retry-After`, the code `store_unavailable` and a message naming the store,
    not HTTP 500 with a traceback (ADR 0064). Other errors pass on untouched."""

    def __init__(self, app: ASGIApp, store_url: str) -> None:
        self.app = app
        self.store_url = store_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as err:
            reason = unavailable(err)
            if reason is None or started:
                raise
            log.warning("request to %s failed: the store is unavailable (%s)", scope.get("path"), reason,
                        extra={"status": 503, "code": STORE_UNAVAILABLE, "client": _client(scope)})
            await _error(503, unavailable_message(self.store_url, reason), STORE_UNAVAILABLE,
                         {"Retry-After": str(RETRY_AFTER_S)})(scope, receive, send)


class Guard:
    """Size limit, authentication and rate limit for HTTP GraphQL requests, before any resolver; then the
    result cache."""

    def __init__(self, app: ASGIApp, services: Services, limiter: Limiter, ide: bool) -> None:
        self.app = app
        self.services = services
        self.limiter = limiter
        self.max_body = services.settings.api_max_body_bytes
        self.max_json_depth = services.settings.api_max_json_depth
        self.ide = ide
        s = services.settings
        self.cache = ResultCache(s.api_result_cache_size, services.read.figures_ttl_s) if s.api_result_cache \
            else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != GRAPHQL_PATH:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            if self.ide and scope["method"] == "GET":
                await self.app(scope, receive, send)
                return
            await _error(405, "GraphQL is served over POST", "METHOD_NOT_ALLOWED", {"Allow": "POST"})(
                scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await _refuse(413, f"request body over {self.max_body} bytes", "PAYLOAD_TOO_LARGE", _client(scope))(
                scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            if len(body) > self.max_body:
                await _refuse(413, f"request body over {self.max_body} bytes", "PAYLOAD_TOO_LARGE",
                              _client(scope))(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        client = _client(scope)
        principal, wait, why = await self._authenticate(headers.get("authorization"), client)
        if principal is None and wait > 0:  # failed authentication is limited per client address
            await _refuse(429, f"rate limit of failed authentication: retry in {wait:.1f} s", "RATE_LIMITED",
                          client, {"Retry-After": str(max(1, round(wait)))})(scope, receive, send)
            return
        if principal is None:
            await _refuse(401, f"not authenticated: {why}" if why else
                          "not authenticated: send 'Authorization: Bearer <token>' with a valid token "
                          "(steward token create)", "UNAUTHENTICATED", client,
                          {"WWW-Authenticate": 'Bearer realm="steward"'})(scope, receive, send)
            return
        wait = await take(self.limiter, principal.rate_key)
        if wait > 0:
            await _refuse(429, f"rate limit: retry in {wait:.1f} s", "RATE_LIMITED", client,
                          {"Retry-After": str(max(1, round(wait)))})(scope, receive, send)
            return
        refusal = check_body(bytes(body), headers.get("content-type"), self.max_json_depth)
        if refusal is not None:
            await _refuse(refusal.status, refusal.message, refusal.code, client)(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["principal"] = principal
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        read = self.services.read
        after = headers.get(POSITION_HEADER.lower(), "")
        if after.isdigit() and int(after) > read.live.position:
            await read.reached(int(after))  # read-your-writes across replicas (docs/api.md "Replicas")
        cache = self.cache
        if cache is None:
            await self.app(scope, replay, send)
            return
        head = read.fresh_head()
        if head is None:
            head = await asyncio.to_thread(read.head)
        who = cache.who(principal, bytes(body))
        key = (who, bytes(body), cache.version(head))
        flight_key = (who, bytes(body), head)  # in flight: shared across a tick of the bucket
        hit = cache.get(key)
        if hit is None and (leader := cache.inflight.get(flight_key)) is not None:
            # the same answer is being computed for the same principal and head: serve the previous time
            # bucket's answer at this head if there is one, else wait for it instead of computing it again
            # (under load, executions outlast the cache's time bucket and a stampede of identical misses
            # would keep the cache from ever filling)
            hit = cache.stale(key) or await asyncio.shield(leader)
        if hit is not None:
            status, cached_headers, content = hit
            await send({"type": "http.response.start", "status": status, "headers": cached_headers})
            await send({"type": "http.response.body", "body": content})
            return
        flight: asyncio.Future[tuple[int, list[tuple[bytes, bytes]], bytes] | None] = \
            asyncio.get_running_loop().create_future()
        cache.inflight.setdefault(flight_key, flight)
        flag = state["cache"] = {"ok": True, "personal": False}
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and not flight.done():
                    answer = (200, list(start.get("headers", [])), b"".join(chunks)) \
                        if flag["ok"] and start.get("status") == 200 else None
                    if answer is not None and flag["personal"] and who is not principal:
                        # read who asks: never to be served to the others of its view (nor to those waiting)
                        cache.found_personal(principal, bytes(body))
                        cache.put((principal, *key[1:]), answer)
                        answer = None
                    elif answer is not None:
                        cache.put(key, answer)
                    flight.set_result(answer)
            await send(message)

        try:
            await self.app(scope, replay, capture)
        finally:
            if not flight.done():
                flight.set_result(None)
            if cache.inflight.get(flight_key) is flight:
                del cache.inflight[flight_key]

    async def _authenticate(self, header: str | None, client: str) -> tuple[Principal | None, float, str]:
        """The principal, or None with the seconds this client address must wait (0: answer 401) and, for a
        refused sign-in token, why (steward.auth.oidc: nothing secret)."""
        token = bearer(header)
        try:
            if token is None:
                raise TokenError("no bearer token")
            return await authenticate(self.services.auth, token), 0.0, ""
        except TokenError as err:
            # unauthenticated attempts are limited per client address (docs/api.md "Limits"), then recorded
            wait = await take(self.limiter, f"addr:{client}")
            if wait == 0:
                await self.services.denials.record(None, Denial("authenticate", "*", str(err)), client)
            return None, wait, str(err) if isinstance(err, SignInRefused) else ""


async def authenticate(auth: Authenticator, token: str) -> Principal:
    hit = auth._cache.get(token)
    if hit is not None and auth.clock() - hit[0] < auth.cache_s:
        return hit[1]
    principal = checked_in_memory(auth.tokens, token)
    if principal is not None:
        return principal
    return await asyncio.to_thread(auth.authenticate, token)


class RateLimitWebsocketOperations(SchemaExtension):
    """HTTP requests are charged by the guard; operations sent over a websocket are charged here. Only a
    query's answer may be cached."""

    limiter: Limiter | None = None

    def on_execute(self) -> Iterator[None]:
        ctx = self.execution_context.context
        if isinstance(ctx, Context) and self.execution_context.operation_type is not OperationType.QUERY:
            ctx.no_cache()
        if self.limiter is not None and isinstance(ctx, Context) and isinstance(ctx.request, WebSocket) \
                and ctx.principal is not None:
            wait = self.limiter.take(ctx.principal.rate_key)
            if wait > 0:
                raise UserError(f"rate limit: retry in {wait:.1f} s", "RATE_LIMITED")
        yield


class TransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    """graphql-transport-ws, closing on a message nested too deep (`decode_message`) with that reason
    rather than the transport's generic "must be valid JSON"."""

    async def handle_invalid_message(self, error_message: str) -> None:
        refused = sys.exc_info()[1]  # called while the transport handles NonJsonMessageReceived
        cause = refused.__cause__ if refused is not None else None
        if isinstance(cause, MessageTooDeep):
            error_message = cause.msg
        log.info("websocket from %s closed: %s", self.context.client if isinstance(self.context, Context) else "?",
                 error_message)
        await super().handle_invalid_message(error_message)


class StewardGraphQL(GraphQL[Context, None]):
    graphql_transport_ws_handler_class = TransportWS

    def __init__(self, services: Services, limiter: Limiter,
                 extra_extensions: Sequence[SchemaExtension | type[SchemaExtension]] = ()) -> None:
        s = services.settings
        ws_ext = type("RateLimitWs", (RateLimitWebsocketOperations,), {"limiter": limiter})
        schema = build_schema(max_depth=s.api_max_depth, max_tokens=s.api_max_tokens, max_aliases=s.api_max_aliases,
                              introspection=s.introspection, extra=[ws_ext, *extra_extensions])
        super().__init__(
            schema,
            graphql_ide="graphiql" if s.api_mode == "development" else None,
            allow_queries_via_get=False,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            connection_init_wait_timeout=timedelta(seconds=10),
            max_subscriptions_per_connection=s.api_max_subscriptions_per_connection,
            allowed_origins=s.allowed_origins,
        )
        self.services = services
        self.limiter = limiter

    def decode_json(self, data: str | bytes) -> object:
        """Websocket messages (and bodies, which the guard has checked already) with the body's depth check
        before the recursive parse (issue 21)."""
        return decode_message(data, self.services.settings.api_max_json_depth)

    async def get_context(self, request: Any, response: Any = None) -> Context:
        principal, cache = None, None
        if isinstance(request, Request):
            state = request.scope.get("state", {})
            principal, cache = state.get("principal"), state.get("cache")
            if principal is not None and cache is not None:
                principal = ObservedPrincipal.watching(principal, cache)
        return Context(self.services, request, response, principal, _client(request.scope), cache=cache)

    async def on_ws_connect(self, context: Context) -> None:
        params = context.connection_params or {}
        raw = params.get("Authorization") or params.get("authorization")
        token = bearer(raw) if isinstance(raw, str) else None
        if token is None and isinstance(params.get("token"), str):
            token = params["token"]
        if token is None:
            token = bearer(context.request.headers.get("authorization"))
        try:
            if token is None:
                raise TokenError("no bearer token")
            context.principal = await authenticate(self.services.auth, token)
        except TokenError as err:
            if await take(self.limiter, f"addr:{context.client}") == 0:
                await self.services.denials.record(None, Denial("authenticate", "websocket", str(err)),
                                                   context.client)
            raise ConnectionRejectionError() from None
        if await take(self.limiter, context.principal.rate_key) > 0:
            raise ConnectionRejectionError()


@dataclass
class Built:
    app: Starlette
    services: Services


def build_app(settings: Settings, api: ApiSettings, *, store: EventStore | None = None,
              gateway: Gateway | None = None,
              extra_extensions: Sequence[SchemaExtension | type[SchemaExtension]] = ()) -> Built:
    store = store or api_store(settings.resolved_store_url, api)
    if gateway is None:
        # the producer starts in the background: the API serves reads while Kafka is away (ADR 0078)
        gateway = CommandGateway(BackgroundPublisher(settings), store, settings.mutation_timeout_s)
    jwt_config, oidc_config = api.jwt_config(), api.oidc_config()
    tokens = MirroredTokens(store, api.api_auth_cache_s)
    read = ReadModel(store, head_ttl_s=3 * api.api_feed_poll_s, keep_ended=api.api_ended_jobs_kept,
                     figures_every_s=api.api_figures_every_s)
    mappings = GroupMappings(store, api.api_auth_cache_s)
    services = Services(
        settings=api, store=store, gateway=gateway, read=read, tokens=tokens,
        auth=Authenticator(tokens, JwtVerifier(jwt_config) if jwt_config.enabled else None, api.api_auth_cache_s,
                           oidc=OidcVerifier(oidc_config, mappings.rules) if oidc_config.enabled else None),
        denials=_denial_auditor(gateway, api), heads=HeadWatch(read, api.api_feed_poll_s),
        mappings=mappings, owners=Owners(store),
    )
    limiter: Limiter = SharedRateLimiter(store, api.api_rate_per_s, api.api_rate_burst, api.api_rate_lease) \
        if api.api_rate_shared else RateLimiter(api.api_rate_per_s, api.api_rate_burst)
    graphql = StewardGraphQL(services, limiter, [*extra_extensions, metrics_api.RequestMetrics])

    store_url = store.engine.url.render_as_string(hide_password=True)

    async def healthz(_: Request) -> JSONResponse:
        """Ready when the store answers and the read model has caught up with the log at least once since
        the process started (a replica still folding its tail is not sent requests: 503). A store that cannot
        be reached: 503 naming it (ADR 0064). `commands` says whether mutations can be sent now (issue 22); it does
        not make the replica unready: it serves reads while Kafka is away and answers mutations 503 (ADR 0078)."""
        try:
            head = await asyncio.to_thread(store.head)
        except Exception as err:
            reason = unavailable(err)
            if reason is None:
                raise
            return JSONResponse({"ok": False, "store": "unavailable", "code": STORE_UNAVAILABLE,
                                 "error": unavailable_message(store_url, reason), "pid": os.getpid()},
                                status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})
        caught_up = read.caught_up()
        return JSONResponse({"ok": caught_up, "head": head, "read_model": read.live.position, "pid": os.getpid(),
                             "commands": gateway.intake()}, status_code=200 if caught_up else 503)

    async def signin_config(_: Request) -> JSONResponse:
        """Which OpenID provider and client the web UI signs in with (public: no secret; ADR 0049)."""
        return JSONResponse({"issuer": api.oidc_issuer, "clientId": api.oidc_web_client})

    flusher: list[asyncio.Task[None]] = []

    async def flush_denials() -> None:
        while True:
            await asyncio.sleep(max(1.0, api.api_denial_window_s / 2))
            await services.denials.flush()

    async def startup() -> None:
        # the loop's default executor runs every asyncio.to_thread of the requests (see api_threads)
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=api.api_threads, thread_name_prefix="steward-api"))
        flusher.append(asyncio.create_task(flush_denials()))
        services.heads.start()  # the read model's feeder

    async def shutdown() -> None:
        for task in flusher:
            task.cancel()
        await services.denials.flush(everything=True)
        await services.heads.close()
        gateway.close()

    app = Starlette(routes=[
        Route("/healthz", healthz),
        Route("/signin.json", signin_config),
        Route("/metrics", metrics_api.endpoint(services.read)),
        Route(GRAPHQL_PATH, graphql, methods=["GET", "POST"]),
        WebSocketRoute(GRAPHQL_PATH, graphql),
    ], on_startup=[startup], on_shutdown=[shutdown])
    if WEB_DIST.is_dir():  # the web UI (`make web`), mounted after /graphql and /healthz
        app.mount("/", StaticFiles(directory=WEB_DIST, html=True), name="web")
    app.add_middleware(Guard, services=services, limiter=limiter, ide=api.api_mode == "development")
    app.add_middleware(StoreOutage, store_url=store_url)  # outside the guard: its authentication reads the store
    app.add_middleware(CorrelationMiddleware)  # outermost: the guard's own log lines carry the id too
    return Built(app, services)


def api_store(url: str, api: ApiSettings) -> EventStore:
    """The API's store: on PostgreSQL, a connection pool as large as the API's threads may use at once."""
    if url.startswith("sqlite"):
        return EventStore.from_url(url)
    return EventStore(create_engine(url, pool_pre_ping=True, pool_size=api.api_db_pool,
                                    max_overflow=api.api_db_overflow, json_serializer=canonical_text))


def _denial_auditor(gateway: Gateway, api: ApiSettings) -> DenialAuditor:
    async def publish(command: RecordAccessDenial) -> None:
        await gateway.publish(command, actor=command.subject, role=command.role)

    return DenialAuditor(publish, burst=api.api_denial_burst, window_s=api.api_denial_window_s)


def create_app(settings: Settings, api: ApiSettings | None = None) -> Starlette:
    return build_app(settings, api or get_api_settings()).app


