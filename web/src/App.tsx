import { type ReactElement, useCallback, useEffect, useMemo, useState } from "react";
import { GraphQLRequestError, gql, setToken } from "./api/client";
import { type ApiSchema, INTROSPECTION, UNKNOWN_SCHEMA, fromSDL, has, parseIntrospection, select, namedType, field } from "./api/schema";

declare const __STEWARD_SDL__: string;
const BUNDLED_SDL: string = typeof __STEWARD_SDL__ === "string" ? __STEWARD_SDL__ : "";
import { CAN, canReadAudit, type Identity, type Role, clearSession, identityFromClaims, isRole, jwtClaims, loadSession, saveSession } from "./api/auth";
import { type LiveStatus, startLive } from "./api/live";
import { AppContext, type AppContextValue } from "./context";
import { SignIn } from "./screens/SignIn";
import { Overview } from "./screens/Overview";
import { TreeScreen } from "./screens/Tree";
import { QueueScreen } from "./screens/Queue";
import { JobsScreen } from "./screens/Jobs";
import { NodesScreen } from "./screens/Nodes";
import { AuditScreen } from "./screens/Audit";

export interface Screen {
  path: string;
  title: string;
  show: (role: Role) => boolean;
  render: () => ReactElement;
}

export const SCREENS: Screen[] = [
  { path: "overview", title: "Overview", show: () => true, render: () => <Overview /> },
  { path: "tree", title: "Allocations", show: () => true, render: () => <TreeScreen /> },
  { path: "queue", title: "Queue", show: () => true, render: () => <QueueScreen /> },
  { path: "jobs", title: "Jobs & sessions", show: () => true, render: () => <JobsScreen /> },
  { path: "nodes", title: "Nodes", show: () => true, render: () => <NodesScreen /> },
  { path: "audit", title: "Audit", show: (r) => CAN.seeAudit(r), render: () => <AuditScreen /> },
];

function routeFromHash(): string {
  return window.location.hash.replace(/^#\/?/, "").split("?")[0] || "overview";
}

/** Learn the schema (introspection may be off in production: then assume the skeleton's fields). */
export async function loadSchema(token: string): Promise<ApiSchema> {
  try {
    return parseIntrospection(await gql(INTROSPECTION, {}, { token }));
  } catch (err) {
    if (err instanceof GraphQLRequestError && (err.status === 401 || err.status === 403)) throw err;
    // Introspection is off in production mode: use the schema exported next to the API, bundled at build time.
    if (BUNDLED_SDL) {
      try {
        return fromSDL(BUNDLED_SDL);
      } catch {
        /* fall through */
      }
    }
    return UNKNOWN_SCHEMA;
  }
}

export async function resolveIdentity(schema: ApiSchema, token: string, chosen: Role): Promise<Identity> {
  if (has(schema, "Query.me")) {
    const typeName = namedType(field(schema, "Query.me")!.type);
    const sel = select(schema, typeName, ["actor", "subject", "sub", "name", "id", "role", "roles", "scope", "scopes", "node", "projects", "capabilities"]);
    const data = await gql<{ me: Record<string, unknown> | null }>(`query Me { me { ${sel} } }`, {}, { token });
    const me = data.me ?? {};
    const role = String(me.role ?? (Array.isArray(me.roles) ? me.roles[0] : "")).toLowerCase();
    if (isRole(role)) {
      const scope = me.scope ?? me.node ?? me.scopes ?? me.projects ?? null;
      return {
        actor: String(me.actor ?? me.subject ?? me.sub ?? me.name ?? me.id ?? "unknown"),
        role,
        scope: Array.isArray(scope) ? scope.join(",") : scope === null ? null : String(scope),
        source: "api",
        capabilities: Array.isArray(me.capabilities) ? (me.capabilities as string[]) : null,
      };
    }
  }
  // A cheap authenticated read, so a bad token fails here rather than on every screen.
  await gql("query Ping { health }", {}, { token }).catch((err: unknown) => {
    if (err instanceof GraphQLRequestError && err.status !== 200) throw err;
  });
  return identityFromClaims(jwtClaims(token)) ?? { actor: "you", role: chosen, scope: null, source: "chosen", capabilities: null };
}

export function App() {
  const [session, setSession] = useState<{ token: string; schema: ApiSchema; identity: Identity } | null>(null);
  const [booting, setBooting] = useState(true);
  const [route, setRoute] = useState(routeFromHash());
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState<LiveStatus>({ mode: "connecting", detail: "", lastEventAt: null });
  const [now, setNow] = useState(Date.now() / 1000);

  const signIn = useCallback(async (token: string, chosen: Role) => {
    const schema = await loadSchema(token);
    const identity = await resolveIdentity(schema, token, chosen);
    setToken(token);
    saveSession(token, chosen);
    setSession({ token, schema, identity });
  }, []);

  const signOut = useCallback(() => {
    clearSession();
    setToken(null);
    setSession(null);
  }, []);

  useEffect(() => {
    const saved = loadSession();
    if (!saved) return setBooting(false);
    signIn(saved.token, saved.chosenRole).catch(() => clearSession()).finally(() => setBooting(false));
  }, [signIn]);

  useEffect(() => {
    const onHash = () => setRoute(routeFromHash());
    window.addEventListener("hashchange", onHash);
    const timer = window.setInterval(() => setNow(Date.now() / 1000), 1000);
    return () => {
      window.removeEventListener("hashchange", onHash);
      window.clearInterval(timer);
    };
  }, []);

  useEffect(() => {
    if (!session) return;
    return startLive(session.schema, session.token, canReadAudit(session.identity), () => setTick((t) => t + 1), setLive);
  }, [session]);

  const ctx: AppContextValue | null = useMemo(
    () => (session ? { schema: session.schema, identity: session.identity, token: session.token, tick, live, now, refresh: () => setTick((t) => t + 1) } : null),
    [session, tick, live, now],
  );

  if (booting) return <p className="booting">Loading…</p>;
  if (!session || !ctx) return <SignIn onSignIn={signIn} />;

  const visible = SCREENS.filter((s) => s.show(session.identity.role));
  const screen = visible.find((s) => s.path === route) ?? visible[0];
  return (
    <AppContext.Provider value={ctx}>
      <a className="skip" href="#main">Skip to content</a>
      <header className="topbar">
        <span className="brand" aria-label="Steward">Steward</span>
        <nav aria-label="Screens">
          <ul>
            {visible.map((s) => (
              <li key={s.path}>
                <a href={`#/${s.path}`} aria-current={s === screen ? "page" : undefined}>{s.title}</a>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span className={`live live-${live.mode}`} title={live.detail} aria-live="polite" data-testid="live-status">
            {live.mode === "subscription" ? "● live" : live.mode === "polling" ? "◌ polling" : "… connecting"}
          </span>
          <span data-testid="identity" title={`role from ${session.identity.source}`}>
            {session.identity.actor} · <strong>{session.identity.role}</strong>
            {session.identity.scope ? ` · ${session.identity.scope}` : ""}
          </span>
          <button type="button" className="ghost" onClick={signOut}>Sign out</button>
        </div>
      </header>
      {!session.schema.known && (
        <p className="missing banner" role="note">The API refused introspection: screens assume the basic fields only.</p>
      )}
      {session.identity.source === "chosen" && (
        <p className="missing banner" role="note" data-missing="Query.me">
          The API cannot tell your role yet (<code>Query.me</code> missing): showing the <strong>{session.identity.role}</strong> view you chose. The server still decides what you may do.
        </p>
      )}
      <main id="main" tabIndex={-1}>
        <h1 className="screen-title">{screen.title}</h1>
        {screen.render()}
      </main>
    </AppContext.Provider>
  );
}
