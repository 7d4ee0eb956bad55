import { type ReactElement, useCallback, useEffect, useMemo, useState } from "react";
import { GraphQLRequestError, setToken } from "./api/client";
import { fetchMe, ping } from "./api/queries";
import { CAN, canReadAudit, type Identity, type Role, clearSession, identityFromClaims, identityFromMe, jwtClaims, loadSession, saveSession } from "./api/auth";
import { type LiveStatus, startLive } from "./api/live";
import { AppContext, type AppContextValue } from "./context";
import { NamesProvider } from "./names";
import { SignIn } from "./screens/SignIn";
import { Overview } from "./screens/Overview";
import { TreeScreen } from "./screens/Tree";
import { BudgetScreen } from "./screens/Budget";
import { QueueScreen } from "./screens/Queue";
import { JobsScreen } from "./screens/Jobs";
import { NodesScreen } from "./screens/Nodes";
import { AuditScreen } from "./screens/Audit";
import { PeopleScreen } from "./auth/People";
import { NotificationsScreen } from "./screens/Notifications";

export interface Screen {
  path: string;
  title: string;
  show: (role: Role) => boolean;
  render: () => ReactElement;
}

export const SCREENS: Screen[] = [
  { path: "overview", title: "Overview", show: () => true, render: () => <Overview /> },
  { path: "tree", title: "Allocations", show: () => true, render: () => <TreeScreen /> },
  { path: "budget", title: "Budget", show: () => true, render: () => <BudgetScreen /> },
  { path: "queue", title: "Queue", show: () => true, render: () => <QueueScreen /> },
  { path: "jobs", title: "Jobs & sessions", show: () => true, render: () => <JobsScreen /> },
  { path: "nodes", title: "Nodes", show: () => true, render: () => <NodesScreen /> },
  { path: "audit", title: "Audit", show: (r) => CAN.seeAudit(r), render: () => <AuditScreen /> },
  { path: "people", title: "People", show: (r) => r === "admin" || r === "auditor", render: () => <PeopleScreen /> },
  { path: "notifications", title: "Notifications", show: () => true, render: () => <NotificationsScreen /> },
];

function routeFromHash(): string {
  return window.location.hash.replace(/^#\/?/, "").split("?")[0] || "overview";
}

/** Who the token is: the API's `me`; else (a role the UI does not know) the token's claims or the role chosen. */
export async function resolveIdentity(token: string, chosen: Role): Promise<Identity> {
  const me = await fetchMe(token).catch((err: unknown) => {
    if (err instanceof GraphQLRequestError && err.status !== 200) throw err;
    return null;
  });
  const known = me ? identityFromMe(me) : null;
  if (known) return known;
  // A cheap authenticated read, so a bad token fails here rather than on every screen.
  await ping(token).catch((err: unknown) => {
    if (err instanceof GraphQLRequestError && err.status !== 200) throw err;
  });
  return identityFromClaims(jwtClaims(token)) ?? { actor: "you", role: chosen, scope: null, source: "chosen", capabilities: null };
}

export function App() {
  const [session, setSession] = useState<{ token: string; identity: Identity } | null>(null);
  const [booting, setBooting] = useState(true);
  const [route, setRoute] = useState(routeFromHash());
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState<LiveStatus>({ mode: "connecting", detail: "", lastEventAt: null });
  const [now, setNow] = useState(Date.now() / 1000);

  const signIn = useCallback(async (token: string, chosen: Role) => {
    const identity = await resolveIdentity(token, chosen);
    setToken(token);
    saveSession(token, chosen);
    setSession({ token, identity });
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
    return startLive(session.token, canReadAudit(session.identity), () => setTick((t) => t + 1), setLive);
  }, [session]);

  const ctx: AppContextValue | null = useMemo(
    () => (session ? { identity: session.identity, token: session.token, tick, live, now, refresh: () => setTick((t) => t + 1) } : null),
    [session, tick, live, now],
  );

  if (booting) return <p className="booting">Loading…</p>;
  if (!session || !ctx) return <SignIn onSignIn={signIn} />;

  const visible = SCREENS.filter((s) => s.show(session.identity.role));
  const screen = visible.find((s) => s.path === route) ?? visible[0];
  return (
    <AppContext.Provider value={ctx}>
      {/* not a plain #main link: the hash is the route, and "#main" would take the reader to the first screen */}
      <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
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
      {session.identity.source === "chosen" && (
        <p className="note banner" role="note" data-testid="chosen-role">
          The API names a role the UI has no screens for: showing the <strong>{session.identity.role}</strong> view you chose. The server still decides what you may do.
        </p>
      )}
      <main id="main" tabIndex={-1}>
        <h1 className="screen-title">{screen.title}</h1>
        <NamesProvider>{screen.render()}</NamesProvider>
      </main>
    </AppContext.Provider>
  );
}
