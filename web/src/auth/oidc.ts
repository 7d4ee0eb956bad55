// Single sign-on in the browser: the authorization code flow with PKCE (RFC 7636) against the lab's OpenID
// provider, as a public client (no secret in the page). The API says which provider and client
// (`/signin.json`); the ID token the provider returns is the bearer token the API verifies (ADR 0049).
// What the round trip needs (the PKCE verifier, state, nonce) waits in this tab's sessionStorage.

export interface SignInConfig {
  issuer: string;
  clientId: string;
}

interface Pending {
  verifier: string;
  state: string;
  nonce: string;
  redirectUri: string;
  tokenEndpoint: string;
}

const PENDING = "steward.oidc.pending";
const SCOPE = "openid profile email groups";

function b64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function randomString(bytes = 32): string {
  return b64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** The S256 code challenge of a verifier. */
export async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return b64url(new Uint8Array(digest));
}

/** Where the provider sends the browser back: this page, without query or hash. */
export function redirectUri(loc: Location = window.location): string {
  return `${loc.origin}${loc.pathname}`;
}

/** The provider and client the API is configured with; null when single sign-on is off. */
export async function signInConfig(): Promise<SignInConfig | null> {
  try {
    const res = await fetch(new URL("/signin.json", window.location.href).toString());
    if (!res.ok) return null;
    const body = await res.json();
    return typeof body.issuer === "string" && body.issuer && typeof body.clientId === "string" ? body : null;
  } catch {
    return null;
  }
}

async function discover(issuer: string): Promise<{ authorization_endpoint: string; token_endpoint: string }> {
  const res = await fetch(`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
  if (!res.ok) throw new Error(`the provider at ${issuer} did not answer discovery (HTTP ${res.status})`);
  return res.json();
}

/** Leave for the provider's sign-in page. */
export async function startSignIn(config: SignInConfig): Promise<void> {
  const meta = await discover(config.issuer);
  const pending: Pending = {
    verifier: randomString(48), state: randomString(16), nonce: randomString(16),
    redirectUri: redirectUri(), tokenEndpoint: meta.token_endpoint,
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(meta.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: config.clientId, response_type: "code", scope: SCOPE, redirect_uri: pending.redirectUri,
    code_challenge: await challengeOf(pending.verifier), code_challenge_method: "S256",
    state: pending.state, nonce: pending.nonce,
  }).toString();
  window.location.assign(url.toString());
}

/** Whether this page load is the provider sending the browser back (a code or an error, and a state). */
export function isCallback(search: string = window.location.search): boolean {
  const q = new URLSearchParams(search);
  return q.has("state") && (q.has("code") || q.has("error"));
}

/** Finish a sign-in the provider sent back: the code exchanged for the ID token (with the PKCE verifier). */
export async function finishSignIn(config: SignInConfig, search: string = window.location.search): Promise<string> {
  const q = new URLSearchParams(search);
  const pending: Pending | null = JSON.parse(sessionStorage.getItem(PENDING) ?? "null");
  sessionStorage.removeItem(PENDING);
  if (q.has("error")) throw new Error(`the provider refused: ${q.get("error_description") ?? q.get("error")}`);
  if (!pending || q.get("state") !== pending.state) throw new Error("this sign-in was not started here (state mismatch); sign in again");
  const res = await fetch(pending.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code", code: q.get("code") ?? "", redirect_uri: pending.redirectUri,
      client_id: config.clientId, code_verifier: pending.verifier,
    }).toString(),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || typeof body.id_token !== "string") {
    throw new Error(`the provider did not give a token: ${body.error_description ?? body.error ?? `HTTP ${res.status}`}`);
  }
  const claims = JSON.parse(atob(body.id_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
  if (claims.nonce !== pending.nonce) throw new Error("the provider's token is not for this sign-in (nonce mismatch)");
  return body.id_token;
}
