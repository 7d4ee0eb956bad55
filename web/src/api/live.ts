// Live updates: a graphql-transport-ws subscription to the event stream when the API has one; polling
// otherwise. Either way screens see a `tick` that moves when something may have changed.

import { createClient, type Client } from "graphql-ws";
import { wsEndpoint } from "./client";
import { type ApiSchema, argsFor, namedType, select } from "./schema";

export interface LiveStatus {
  mode: "subscription" | "polling" | "connecting";
  detail: string;
  lastEventAt: number | null;
}

// The event stream needs read_audit; every role may follow occupancy, which moves whenever the log does.
export const SUBSCRIPTION_CANDIDATES = ["events", "eventStream", "auditEvents", "event"];
export const ANY_ROLE_CANDIDATES = ["occupancy", "jobProgress"];
export const POLL_MS = 4000;

export function subscriptionField(schema: ApiSchema, readAudit: boolean): string | null {
  if (!schema.subscriptionType) return null;
  const fields = schema.types.get(schema.subscriptionType)?.fields;
  const usable = (c: string) => fields?.has(c) && !fields.get(c)!.args.some((a) => a.type.kind === "NON_NULL");
  return (readAudit ? SUBSCRIPTION_CANDIDATES.find(usable) : undefined) ?? ANY_ROLE_CANDIDATES.find(usable) ?? null;
}

export function startLive(
  schema: ApiSchema,
  token: string,
  readAudit: boolean,
  onChange: () => void,
  onStatus: (s: LiveStatus) => void,
): () => void {
  let timer: number | undefined;
  let client: Client | undefined;
  let disposed = false;
  const poll = (why: string) => {
    if (disposed || timer !== undefined) return;
    onStatus({ mode: "polling", detail: `polling every ${POLL_MS / 1000} s (${why})`, lastEventAt: null });
    timer = window.setInterval(onChange, POLL_MS);
  };
  const name = subscriptionField(schema, readAudit);
  if (!name) {
    poll("the API has no event subscription yet");
  } else {
    onStatus({ mode: "connecting", detail: "connecting to the event stream", lastEventAt: null });
    const f = schema.types.get(schema.subscriptionType!)!.fields.get(name)!;
    const sel = select(schema, namedType(f.type), ["position", "type", "streamId", "recordedAt", "usedGpus"]) || "__typename";
    const query = `subscription Live { ${name}${argsFor(schema, `Subscription.${name}`, {})} { ${sel} } }`;
    client = createClient({
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
  }
  return () => {
    disposed = true;
    if (timer !== undefined) window.clearInterval(timer);
    void client?.dispose();
  };
}
