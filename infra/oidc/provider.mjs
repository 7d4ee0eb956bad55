// The OpenID provider Steward's demo and tests sign in against: the OpenID-certified `oidc-provider`
// package (installed from this folder's package-lock.json by infra/oidc.sh install), with Steward's
// clients, a login page, and the people of the demo. Not for production: a lab points Steward at its own
// provider (docs/operator-guide.md "Single sign-on").
//
//   node infra/oidc/provider.mjs      (infra/oidc.sh start runs it in the background)
//
// Env: STEWARD_OIDC_PORT (9100), STEWARD_OIDC_ISSUER (http://127.0.0.1:PORT),
//      STEWARD_OIDC_WEB_REDIRECTS (space-separated redirect URIs of the web client; default: the UI on
//      the API's port and Vite's dev server), STEWARD_OIDC_USERS (a JSON file of people, see USERS below),
//      STEWARD_OIDC_ID_TOKEN_TTL_S (3600).
import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const PORT = Number(process.env.STEWARD_OIDC_PORT || 9100);
const HOST = '127.0.0.1';
const ISSUER = process.env.STEWARD_OIDC_ISSUER || `http://${HOST}:${PORT}`;
const API_PORT = Number(process.env.STEWARD_API_PORT || 8000);
const WEB_REDIRECTS = (process.env.STEWARD_OIDC_WEB_REDIRECTS
  || `http://127.0.0.1:${API_PORT}/ http://localhost:${API_PORT}/ http://127.0.0.1:5173/ http://localhost:5173/`)
  .split(/\s+/).filter(Boolean);

// The demo's people: login, password, display name, groups. Groups map to Steward roles and scopes by
// the mapping an admin records (`steward identity map`), never here.
const USERS = process.env.STEWARD_OIDC_USERS
  ? JSON.parse(readFileSync(process.env.STEWARD_OIDC_USERS, 'utf8'))
  : [
    { login: 'ada', password: 'ada-pass', name: 'Ada Admin', email: 'ada@lab.example', groups: ['steward-admins'] },
    { login: 'maria', password: 'maria-pass', name: 'Maria Manager', email: 'maria@lab.example', groups: ['physics-leads'] },
    { login: 'rui', password: 'rui-pass', name: 'Rui Researcher', email: 'rui@lab.example', groups: ['physics-researchers'] },
    { login: 'aud', password: 'aud-pass', name: 'Audrey Auditor', email: 'aud@lab.example', groups: ['compliance'] },
    { login: 'nobody', password: 'nobody-pass', name: 'Nemo Nobody', email: 'nemo@lab.example', groups: ['visitors'] },
  ];
const byLogin = new Map(USERS.map((u) => [u.login, u]));
const subjectOf = (u) => `user-${u.login}`;
const bySubject = new Map(USERS.map((u) => [subjectOf(u), u]));

// A signing key per start (RS256); Steward reads it from the provider's JWKS (discovery).
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' };

const configuration = {
  clients: [
    {
      // the web UI: a public client, authorization code with PKCE
      client_id: 'steward-web',
      token_endpoint_auth_method: 'none',
      application_type: 'web',
      redirect_uris: WEB_REDIRECTS,
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      // the CLI (`steward login`): device flow, or the authorization code with a loopback callback
      client_id: 'steward-cli',
      token_endpoint_auth_method: 'none',
      application_type: 'native',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'authorization_code'],
      response_types: ['code'],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: { openid: ['sub'], profile: ['name', 'preferred_username'], email: ['email'], groups: ['groups'] },
  // the ID token carries the person's claims itself: it is what Steward verifies
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
  },
  ttl: {
    IdToken: Number(process.env.STEWARD_OIDC_ID_TOKEN_TTL_S || 3600),
    AccessToken: 3600,
    DeviceCode: 600,
    Interaction: 600,
    Session: 8 * 3600,
    Grant: 8 * 3600,
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(_ctx, sub) {
    const u = bySubject.get(sub);
    if (!u) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { sub, name: u.name, preferred_username: u.login, email: u.email, groups: u.groups };
      },
    };
  },
  // Steward's own clients are first-party: signing in is the consent (no consent screen)
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid profile email groups');
    await grant.save();
    return grant;
  },
};

const provider = new Provider(ISSUER, configuration);
provider.proxy = false;

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(uid, client, error) {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in - Steward lab provider</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>Sign in to Steward</h1><p>${esc(client)} asks who you are.</p>
${error ? `<p role="alert" id="error">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
<label for="login">User name</label> <input id="login" name="login" required autofocus>
<label for="password">Password</label> <input id="password" name="password" type="password" required>
<button type="submit" id="submit">Sign in</button></form></main></body></html>`;
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const c of req) {
    size += c.length;
    if (size > 16384) throw new Error('form too large');
    chunks.push(c);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

const callback = provider.callback();

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  const client = details.params.client_id;
  if (details.prompt.name === 'consent') {
    // Steward's clients are first-party: the person signed in, the requested scopes are granted
    const grant = details.grantId ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: client });
    grant.addOIDCScope(String(details.params.scope || 'openid'));
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(loginPage(uid, client, ''));
    return;
  }
  if (action === 'login' && req.method === 'POST') {
    const form = await readForm(req);
    const u = byLogin.get(form.get('login') || '');
    if (!u || u.password !== form.get('password')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(loginPage(uid, client, 'Unknown user name or wrong password.'));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: subjectOf(u) } }, { mergeWithLastSubmission: false });
    return;
  }
  res.writeHead(405);
  res.end();
}

const server = createServer((req, res) => {
  const m = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login))?$/.exec(new URL(req.url, ISSUER).pathname);
  if (m) {
    interaction(req, res, m[1], m[2]).catch((err) => {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`sign-in failed: ${err.message}\n`);
    });
    return;
  }
  callback(req, res);
});

server.listen(PORT, HOST, () => {
  console.log(`steward oidc provider: issuer ${ISSUER}, ${USERS.length} people, clients steward-web steward-cli`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
