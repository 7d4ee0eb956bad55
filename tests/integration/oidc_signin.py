"""Signing in at the real OpenID provider (infra/oidc.sh) the way a browser does, over its own endpoints:
the authorization request with PKCE, the provider's login form, the redirect with the code, and the code
exchanged at the token endpoint; and the user's half of the device flow (`steward login`)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx

REDIRECT = "http://127.0.0.1/callback"


def _login_through(c: httpx.Client, issuer: str, r: httpx.Response, login: str, password: str,
                   stop: str) -> httpx.Response:
    """Follow the provider's redirects, filling its login form once, until a redirect to `stop` (or a page
    that is not the login form)."""
    filled = False
    for _ in range(12):
        if r.status_code in (302, 303):
            location = urljoin(str(r.url), r.headers["location"])
            if location.startswith(stop):
                return r
            r = c.get(location)
            continue
        action = re.search(r'action="(/interaction/[^"]+/login)"', r.text)
        if action and not filled:
            filled = True
            r = c.post(urljoin(issuer, action.group(1)), data={"login": login, "password": password})
            continue
        return r
    raise AssertionError("the provider kept redirecting")


def sign_in(issuer: str, login: str, password: str, client_id: str = "steward-cli") -> dict[str, Any]:
    """The token response (id_token, access_token, ...) for a person signing in with the code flow + PKCE."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(12)
    with httpx.Client(follow_redirects=False, timeout=10) as c:
        r = c.get(f"{issuer}/auth", params={
            "client_id": client_id, "response_type": "code", "scope": "openid profile email groups",
            "redirect_uri": REDIRECT, "code_challenge": challenge, "code_challenge_method": "S256",
            "state": state, "nonce": secrets.token_urlsafe(12)})
        r = _login_through(c, issuer, r, login, password, REDIRECT)
        if r.status_code not in (302, 303):
            raise AssertionError(f"no redirect back with a code: {r.status_code} {r.text[:300]}")
        query = parse_qs(urlparse(r.headers["location"]).query)
        assert query.get("state") == [state], query
        if "code" not in query:
            raise AssertionError(f"the provider refused: {query}")
        token = c.post(f"{issuer}/token", data={
            "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": REDIRECT,
            "client_id": client_id, "code_verifier": verifier})
        token.raise_for_status()
        answer: dict[str, Any] = token.json()
        return answer


def approve_device(verification_uri_complete: str, issuer: str, login: str, password: str) -> str:
    """The person's half of the device flow: open the link the CLI printed, confirm the code, sign in.
    Returns the provider's final page."""
    with httpx.Client(follow_redirects=False, timeout=10) as c:
        page = c.get(verification_uri_complete)
        form = re.search(r'<form[^>]*action="([^"]+)"', page.text)
        assert form, page.text[:500]
        fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', page.text))
        fields["confirm"] = "yes"
        r = c.post(urljoin(issuer, form.group(1)), data=fields)
        r = _login_through(c, issuer, r, login, password, "\0")
        return r.text
