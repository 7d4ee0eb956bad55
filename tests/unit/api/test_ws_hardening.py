"""Issue 21, over the websocket: a graphql-transport-ws message is depth-checked like an HTTP body
(`STEWARD_API_MAX_JSON_DEPTH`, counted before the recursive parse), so a message nested 5,000 deep closes
the socket with code 4400 and the reason instead of raising RecursionError in the server; a message whose
payload nests exactly as deep as a body may is served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection, connect

from steward.api.requests import MessageTooDeep, decode_message, json_depth
from steward.api.settings import ApiSettings
from tests.unit.api.harness import Server, serve

LIMIT = ApiSettings().api_max_json_depth


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    api = ApiSettings(run_dir=tmp_path_factory.mktemp("run"), api_rate_per_s=10_000, api_rate_burst=10_000)
    with serve(Path(tmp_path_factory.mktemp("ws-hardening")), api) as s:
        yield s


def acknowledged(server: Server) -> ClientConnection:
    ws = connect(server.ws_url, subprotocols=["graphql-transport-ws"], open_timeout=5,  # type: ignore[list-item]
                 close_timeout=2)
    ws.send(json.dumps({"type": "connection_init",
                        "payload": {"Authorization": f"Bearer {server.tokens['admin']}"}}))
    assert json.loads(ws.recv(timeout=5))["type"] == "connection_ack"
    return ws


def subscribe(variables_json: str) -> str:
    return ('{"id": "1", "type": "subscribe", "payload": {"query": "{ health }", '
            f'"variables": {{"x": {variables_json}}}}}}}')


def nested(depth: int) -> str:
    """A JSON value of exactly `depth` levels (arrays)."""
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("value", [nested(5000), '{"a": ' * 5000 + "1" + "}" * 5000],
                         ids=["arrays", "objects"])
def test_a_message_nested_5000_deep_closes_the_socket_with_the_reason(server: Server, value: str) -> None:
    message = subscribe(value)
    assert 9_000 < len(message) < 64 * 1024  # under the message size limit: the depth is what is refused
    with acknowledged(server) as ws:
        ws.send(message)
        with pytest.raises(Exception):  # noqa: B017 - closed with 4400, whatever the client raises
            ws.recv(timeout=5)
        assert ws.protocol.close_code == 4400
        assert ws.protocol.close_reason == f"the message's payload nests deeper than {LIMIT} levels"
    with acknowledged(server) as ws:  # the server goes on serving
        ws.send(json.dumps({"id": "2", "type": "subscribe", "payload": {"query": "{ health }"}}))
        assert json.loads(ws.recv(timeout=5)) == {"id": "2", "type": "next", "payload": {"data": {"health": "ok"}}}


def test_a_payload_as_deep_as_a_body_may_nest_is_served(server: Server) -> None:
    # the payload {"query", "variables": {"x": value}}: 2 levels + the value's
    payload = json.loads(subscribe(nested(LIMIT - 2)))["payload"]
    assert json_depth(json.dumps(payload).encode(), LIMIT - 1) == LIMIT  # the count stops at limit + 1
    with acknowledged(server) as ws:
        ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        assert json.loads(ws.recv(timeout=5))["type"] == "next"


def test_bad_json_still_closes_with_the_transport_reason(server: Server) -> None:
    with acknowledged(server) as ws:
        ws.send("{not json")
        with pytest.raises(Exception):  # noqa: B017
            ws.recv(timeout=5)
        assert (ws.protocol.close_code, ws.protocol.close_reason) == (4400, "WebSocket message must be valid JSON")


@given(depth=st.integers(min_value=1, max_value=3 * LIMIT), brackets_in_strings=st.integers(0, 200))
def test_decode_message_refuses_exactly_past_the_limit(depth: int, brackets_in_strings: int) -> None:
    """The envelope {"payload": ...} adds one level; brackets inside strings never count."""
    text = '{"type": "subscribe", "s": "' + "[{" * brackets_in_strings + '", "payload": ' + nested(depth) + "}"
    if depth <= LIMIT:
        assert decode_message(text, LIMIT) == json.loads(text)
    else:
        with pytest.raises(MessageTooDeep) as err:
            decode_message(text.encode(), LIMIT)
        assert err.value.msg == f"the message's payload nests deeper than {LIMIT} levels"


def test_a_limit_past_the_interpreters_stack_is_still_refused_not_raised() -> None:
    with pytest.raises(MessageTooDeep):
        decode_message(nested(200_000), 1_000_000)
