// "Sign in with your lab account": the button that leaves for the OpenID provider, and the landing that
// finishes the sign-in when the provider sends the browser back (src/auth/oidc.ts). Shown above the
// token form when the API has a provider configured.
import { useEffect, useState } from "react";
import type { Role } from "../api/auth";
import { type SignInConfig, finishSignIn, isCallback, signInConfig, startSignIn } from "./oidc";

export function ProviderSignIn({ onSignIn }: { onSignIn: (token: string, role: Role) => Promise<void> }) {
  const [config, setConfig] = useState<SignInConfig | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(isCallback());

  useEffect(() => {
    let live = true;
    signInConfig().then(async (c) => {
      if (!live) return;
      setConfig(c);
      if (!c || !isCallback()) return setBusy(false);
      try {
        const token = await finishSignIn(c);
        window.history.replaceState(null, "", `${window.location.pathname}${window.location.hash}`);
        await onSignIn(token, "researcher");
      } catch (err) {
        window.history.replaceState(null, "", `${window.location.pathname}${window.location.hash}`);
        if (live) setError(err instanceof Error ? err.message : String(err));
      } finally {
        if (live) setBusy(false);
      }
    });
    return () => {
      live = false;
    };
  }, [onSignIn]);

  if (!config) return null;
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      await startSignIn(config);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
      setBusy(false);
    }
  };
  return (
    <section className="signin-provider" aria-labelledby="provider-h">
      <h2 id="provider-h">Your lab account</h2>
      <p className="muted">Sign in at <code>{new URL(config.issuer).host}</code>; your groups there decide your role.</p>
      {error && <p className="error" role="alert">sign-in failed: {error}</p>}
      <button type="button" onClick={go} disabled={busy}>{busy ? "Signing in…" : "Sign in with your lab account"}</button>
      <p className="help">Or paste an API token below (automation, scripts).</p>
    </section>
  );
}
