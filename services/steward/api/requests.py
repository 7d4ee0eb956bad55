"""What the guard checks in a GraphQL request body before GraphQL sees it (docs/api.md "Limits"): the
content type, JSON nesting no deeper than a stated limit (counted without recursion, before any recursive
parse: a 30 KB body nested 5,000 deep would exhaust the parser's stack), valid JSON, one operation per
request (no batching) and the request's shape. Each refusal is a `Refusal`: the HTTP status and a
GraphQL-shaped error (message and code) naming the problem. Websocket messages get the same depth check
(`decode_message`): one nested too deep closes the socket with code 4400 and the reason."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: linear, no backtracking
_BRACKET: Final = re.compile(rb"[\[\]{}]")
_OPEN: Final = frozenset(b"[{")
JSON_TYPE: Final = "application/json"


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    message: str
    code: str


def json_depth(body: bytes, limit: int) -> int:
    """The nesting depth of the JSON text `body` (arrays and objects; brackets inside strings do not count),
    counted iteratively; the count stops at `limit + 1`, enough to refuse. A body with at most `limit`
    opening brackets in all cannot nest deeper: 0 without counting."""
    if body.count(b"[") + body.count(b"{") <= limit:  # the common case: too few brackets to nest too deep
        return 0
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', body)):
        if match.group()[0] in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        else:
            depth -= 1
    return deepest


class MessageTooDeep(json.JSONDecodeError):
    """A websocket message nested past the limit. A JSONDecodeError, so the transport refuses it as it
    refuses bad JSON (close 4400); `msg` is the reason it closes with."""


def decode_message(text: str | bytes, max_depth: int) -> object:
    """A websocket message (graphql-transport-ws) decoded with the body's depth check first: its payload may
    nest as deep as an HTTP request body (`max_depth`; the message's envelope adds one level)."""
    data = text.encode() if isinstance(text, str) else text
    limit = max_depth + 1
    reason = f"the message's payload nests deeper than {max_depth} levels"
    if json_depth(data, limit) > limit:
        raise MessageTooDeep(reason, "", 0)
    try:
        return json.loads(data)
    except RecursionError:  # a limit set past the interpreter's stack
        raise MessageTooDeep(reason, "", 0) from None


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body(body: bytes, content_type: str | None, max_depth: int) -> Refusal | None:
    """None when `body` is one GraphQL request as JSON; otherwise why not (see the module)."""
    if media_type(content_type) != JSON_TYPE:
        shown = media_type(content_type) or "none"
        return Refusal(415, f"send the request as {JSON_TYPE} (content type {shown!r} is not served)",
                       "UNSUPPORTED_MEDIA_TYPE")
    if json_depth(body, max_depth) > max_depth:
        return Refusal(400, f"the request body nests deeper than {max_depth} levels", "BAD_REQUEST")
    try:
        request: Any = json.loads(body)
    except (ValueError, RecursionError) as err:
        return Refusal(400, f"the request body is not valid JSON ({err})"[:300], "BAD_REQUEST")
    if isinstance(request, list):
        return Refusal(400, "batching is not supported: send one operation per request", "BAD_REQUEST")
    if not isinstance(request, dict):
        return Refusal(400, "the request body must be a JSON object with a 'query'", "BAD_REQUEST")
    if not isinstance(request.get("query"), str):
        return Refusal(400, "the request needs a 'query' string", "BAD_REQUEST")
    if request.get("variables") is not None and not isinstance(request["variables"], dict):
        return Refusal(400, "'variables' must be a JSON object", "BAD_REQUEST")
    if request.get("operationName") is not None and not isinstance(request["operationName"], str):
        return Refusal(400, "'operationName' must be a string", "BAD_REQUEST")
    return None
