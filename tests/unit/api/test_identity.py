"""Identity: API tokens (random, stored hashed, scoped, expiring, revocable), JWTs (hard-coded algorithms,
audience, issuer, expiry; HS256, and RS256 with a JWKS file or URL), access by role and subtree, rate limits."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select

from steward.auth.access import Access, Capability, subtree
from steward.auth.authenticate import Authenticator, bearer
from steward.auth.jwt import JwtConfig, JwtVerifier
from steward.auth.principal import Principal, Role
from steward.auth.ratelimit import RateLimiter
from steward.auth.tables import api_tokens
from steward.auth.tokens import InvalidTokenRequest, TokenError, TokenStore
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

SECRET = "s" * 40
PARENTS = {"research": "cluster", "team-a": "research", "a1": "team-a", "a2": "team-a", "team-b": "research",
           "b1": "team-b", "ops": "cluster"}


@pytest.fixture()
def store(tmp_path: Path) -> EventStore:
    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    return EventStore.from_url(url)


def test_tokens_are_random_stored_hashed_and_scoped(store: EventStore) -> None:
    tokens = TokenStore(store)
    token, info = tokens.create(role="researcher", scopes=["a1"], subject="alice", created_by="t")
    other, _ = tokens.create(role="researcher", scopes=["a1"], subject="alice", created_by="t")
    assert token != other and token.startswith(f"stw_{info.token_id}_") and len(token) > 50
    with store.engine.connect() as conn:
        row = conn.execute(select(api_tokens)).first()
    assert row is not None and token.split("_", 2)[2] not in json.dumps([str(v) for v in row])
    p = tokens.authenticate(token)
    assert (p.subject, p.role, p.scopes, p.token_id) == ("alice", Role.researcher, ("a1",), info.token_id)


def test_wrong_secret_revoked_and_expired_tokens_fail(store: EventStore) -> None:
    tokens = TokenStore(store)
    token, info = tokens.create(role="admin", scopes=[], subject="root", created_by="t")
    with pytest.raises(TokenError):
        tokens.authenticate(token[:-2] + "xx")
    with pytest.raises(TokenError):
        tokens.authenticate(f"stw_{'0' * 16}_{token.split('_', 2)[2]}")
    assert tokens.revoke(info.token_id, "t") and not tokens.revoke(info.token_id, "t")
    with pytest.raises(TokenError, match="revoked"):
        tokens.authenticate(token)
    short, _ = tokens.create(role="auditor", scopes=[], subject="a", created_by="t", ttl_s=10, now=time.time() - 20)
    with pytest.raises(TokenError, match="expired"):
        tokens.authenticate(short)


@pytest.mark.parametrize(("role", "scopes", "message"), [
    ("superuser", [], "unknown role"), ("manager", [], "needs --scope"), ("admin", ["a1"], "takes no scope")])
def test_token_requests_are_checked(store: EventStore, role: str, scopes: list[str], message: str) -> None:
    with pytest.raises(InvalidTokenRequest, match=message):
        TokenStore(store).create(role=role, scopes=scopes, subject="x", created_by="t")


def test_revocation_through_the_authenticator_is_immediate(store: EventStore) -> None:
    tokens = TokenStore(store)
    auth = Authenticator(tokens, None, cache_s=60)
    token, info = tokens.create(role="admin", scopes=[], subject="root", created_by="t")
    assert auth.authenticate(token).subject == "root"
    tokens.revoke(info.token_id, "t")
    assert auth.authenticate(token).subject == "root"  # cached
    auth.forget(info.token_id)
    with pytest.raises(TokenError):
        auth.authenticate(token)


def _claims(**over: object) -> dict[str, object]:
    now = int(time.time())
    return {"sub": "carol", "iss": "https://idp.example", "aud": "steward", "iat": now, "exp": now + 300,
            "steward_role": "manager", "steward_scopes": ["team-a"]} | over


def hs_verifier() -> JwtVerifier:
    return JwtVerifier(JwtConfig(audience="steward", issuer="https://idp.example", hs256_secret=SECRET))


def test_hs256_jwt_gives_a_principal() -> None:
    p = hs_verifier().verify(pyjwt.encode(_claims(), SECRET, algorithm="HS256"))
    assert (p.subject, p.role, p.scopes, p.via) == ("carol", Role.manager, ("team-a",), "jwt")


@pytest.mark.parametrize("bad", [
    _claims(aud="someone-else"), _claims(iss="https://evil.example"), _claims(exp=int(time.time()) - 3600),
    {k: v for k, v in _claims().items() if k != "exp"}, _claims(steward_role="root"),
    _claims(steward_scopes=[])])
def test_jwt_claims_are_enforced(bad: dict[str, object]) -> None:
    with pytest.raises(TokenError):
        hs_verifier().verify(pyjwt.encode(bad, SECRET, algorithm="HS256"))


def test_alg_none_and_unlisted_algorithms_are_refused() -> None:
    unsigned = pyjwt.encode(_claims(), None, algorithm="none")  # type: ignore[arg-type]  # alg none takes no key
    with pytest.raises(TokenError):
        hs_verifier().verify(unsigned)
    hs512 = pyjwt.encode(_claims(), SECRET + "x" * 30, algorithm="HS512")
    with pytest.raises(TokenError):
        hs_verifier().verify(hs512)


def test_short_hs256_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        JwtVerifier(JwtConfig(audience="steward", issuer="x", hs256_secret="short"))


def test_rs256_with_a_jwks_file_and_no_key_confusion(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(pyjwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk | {"kid": "k1", "use": "sig", "alg": "RS256"}]}))
    v = JwtVerifier(JwtConfig(audience="steward", issuer="https://idp.example", jwks_file=str(tmp_path / "jwks.json")))
    good = pyjwt.encode(_claims(), key, algorithm="RS256", headers={"kid": "k1"})
    assert v.verify(good).subject == "carol"
    # HS256 signed with the public key as the secret (the classic confusion) is refused: HS256 is off here
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    forged = _hs256_by_hand(_claims(), public_pem)
    with pytest.raises(TokenError):
        v.verify(forged)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenError):
        v.verify(pyjwt.encode(_claims(), other, algorithm="RS256", headers={"kid": "k1"}))


def _hs256_by_hand(claims: dict[str, object], key: bytes) -> str:
    import base64
    import hashlib
    import hmac

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def test_bearer_header_parsing() -> None:
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("Bearer ") is None and bearer(None) is None


def test_subtree_and_access_by_role() -> None:
    assert subtree(PARENTS, ["team-a"]) == {"team-a", "a1", "a2"}
    assert subtree(PARENTS, ["cluster"]) >= set(PARENTS)
    assert subtree(PARENTS, ["nowhere"]) == frozenset()
    manager = Access.of(Principal("m", Role.manager, ("team-a",)), PARENTS)
    assert manager.manages("team-a") and manager.manages("a1") and not manager.manages("research")
    assert manager.sees("a2") and not manager.sees("b1") and not manager.works_in("a1")
    researcher = Access.of(Principal("r", Role.researcher, ("a1",)), PARENTS)
    assert researcher.works_in("a1") and not researcher.works_in("a2") and not researcher.manages("a1")
    auditor = Access.of(Principal("x", Role.auditor), PARENTS)
    assert auditor.sees("b1") and auditor.can(Capability.read_audit)
    assert not any(auditor.can(c) for c in Capability if c is not Capability.read_audit)
    admin = Access.of(Principal("root", Role.admin), PARENTS)
    assert all(admin.can(c) for c in Capability) and admin.manages("cluster")


def test_rate_limiter_refills() -> None:
    now = [0.0]
    limiter = RateLimiter(rate_per_s=2, burst=3, clock=lambda: now[0])
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("k") == pytest.approx(0.5)
    assert limiter.take("other") == 0.0
    now[0] += 0.5
    assert limiter.take("k") == 0.0


def test_rs256_with_a_jwks_url_fetched_from_the_provider() -> None:
    """An OIDC provider's JWKS endpoint, served for real on a loopback port and fetched by the verifier."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(pyjwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    body = json.dumps({"keys": [jwk | {"kid": "k9", "use": "sig", "alg": "RS256"}]}).encode()
    fetched: list[str] = []

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/.well-known/jwks.json"
        v = JwtVerifier(JwtConfig(audience="steward", issuer="https://idp.example", jwks_url=url))
        assert v.verify(pyjwt.encode(_claims(), key, algorithm="RS256", headers={"kid": "k9"})).subject == "carol"
        assert fetched == ["/.well-known/jwks.json"]
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with pytest.raises(TokenError):
            v.verify(pyjwt.encode(_claims(), other, algorithm="RS256", headers={"kid": "k9"}))
        with pytest.raises(TokenError):  # a kid the provider does not publish
            v.verify(pyjwt.encode(_claims(), key, algorithm="RS256", headers={"kid": "nope"}))
    finally:
        httpd.shutdown()
