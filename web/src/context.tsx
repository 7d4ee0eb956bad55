import { createContext, useCallback, useContext, useEffect, useRef, useState } from "react";
import type { Identity } from "./api/auth";
import type { LiveStatus } from "./api/live";

export interface AppContextValue {
  identity: Identity;
  token: string;
  tick: number; // moves when live updates say data may have changed
  live: LiveStatus;
  now: number; // epoch seconds, updated every second (countdowns)
  refresh: () => void;
}

export const AppContext = createContext<AppContextValue | null>(null);

export function useApp(): AppContextValue {
  const v = useContext(AppContext);
  if (!v) throw new Error("useApp outside the signed-in app");
  return v;
}

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/** Load data with `fn`, again whenever `deps` change or live updates tick (keeping the last data on screen). */
export function useData<T>(fn: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const { tick } = useApp();
  const [state, setState] = useState<{ data: T | undefined; error: string | null; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [nonce, setNonce] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    fn().then(
      (data) => mine === seq.current && setState({ data, error: null, loading: false }),
      (err: unknown) => mine === seq.current && setState((s) => ({ data: s.data, error: err instanceof Error ? err.message : String(err), loading: false })),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick, nonce]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  return { ...state, reload };
}
