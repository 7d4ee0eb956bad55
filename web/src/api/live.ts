// Live updates: a graphql-transport-ws subscription (the event stream for roles that may read the audit log,
// occupancy, which moves whenever the log does, for the others); polling when the subscription fails. Either
// way screens see a `tick` that moves when something may have changed.

import { createClient, type Client } from "graphql-ws";
import { wsEndpoint } from "./client";
import { LiveEventsDocument, LiveOccupancyDocument } from "./generated";

export interface LiveStatus {
  mode: "subscription" | "polling" | "connecting";
  detail: string;
  lastEventAt: number | null;
}

export const POLL_MS = 4000;

/** The subscription a role follows: `events` needs read_audit; every role may follow `occupancy`. */
export function liveSubscription(readAudit: boolean): { name: "events" | "occupancy"; query: string } {
  return readAudit ? { name: "events", query: LiveEventsDocument.toString() } : { name: "occupancy", query: LiveOccupancyDocument.toString() };
}

export function startLive(token: string, readAudit: boolean, onChange: () => void, onStatus: (s: LiveStatus) => void): () => void {
  let timer: number | undefined;
  let disposed = false;
  const poll = (why: string) => {
    if (disposed || timer !== undefined) return;
    onStatus({ mode: "polling", detail: `polling every ${POLL_MS / 1000} s (${why})`, lastEventAt: null });
    timer = window.setInterval(onChange, POLL_MS);
  };
  const { name, query } = liveSubscription(readAudit);
  onStatus({ mode: "connecting", detail: "connecting to the event stream", lastEventAt: null });
  const client: Client = createClient({
    url: wsEndpoint(),
    connectionParams: { authorization: `Bearer ${token}`, token },
    retryAttempts: 3,
    lazy: false,
  });
  let pending: number | undefined;
  client.subscribe(
    { query },
    {
      next: () => {
        onStatus({ mode: "subscription", detail: `subscribed to ${name}`, lastEventAt: Date.now() / 1000 });
        if (pending === undefined) pending = window.setTimeout(() => ((pending = undefined), onChange()), 700);
      },
      error: (err) => poll(`subscription failed: ${err instanceof Error ? err.message : "closed"}`),
      complete: () => poll("subscription ended"),
    },
  );
  client.on("connected", () => onStatus({ mode: "subscription", detail: `subscribed to ${name}`, lastEventAt: null }));
  return () => {
    disposed = true;
    if (timer !== undefined) window.clearInterval(timer);
    void client.dispose();
  };
}
