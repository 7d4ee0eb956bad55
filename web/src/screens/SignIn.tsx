import { useState, type FormEvent } from "react";
import { ROLES, type Role } from "../api/auth";
import { ProviderSignIn } from "../auth/ProviderSignIn";

export function SignIn({ onSignIn }: { onSignIn: (token: string, role: Role) => Promise<void> }) {
  const [token, setToken] = useState("");
  const [role, setRole] = useState<Role>("researcher");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) return setError("paste the token that `steward token create --role ROLE` printed");
    setBusy(true);
    setError(null);
    try {
      await onSignIn(token.trim(), role);
    } catch (err) {
      setError(`sign-in failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="signin" id="main">
      <form onSubmit={submit} aria-labelledby="signin-h">
        <h1 id="signin-h">Sign in to Steward</h1>
        <p className="muted">Your token decides what you see and may change: managers allocate, researchers follow their work, auditors verify.</p>
        <ProviderSignIn onSignIn={onSignIn} />
        <label htmlFor="token">API token</label>
        <input id="token" name="token" type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} aria-describedby="token-help" autoFocus />
        <p id="token-help" className="help">Create one with <code>steward token create --role manager --output json</code>.</p>
        <label htmlFor="role">View as (used only when the API cannot tell your role)</label>
        <select id="role" value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
        </select>
        {error && <p className="error" role="alert">{error}</p>}
        <button type="submit" disabled={busy}>{busy ? "Signing in…" : "Sign in"}</button>
      </form>
    </main>
  );
}
