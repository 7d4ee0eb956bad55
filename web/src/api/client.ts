// A small GraphQL-over-HTTP client: bearer token, JSON body, typed errors. Subscriptions live in live.ts.

import type { DocumentTypeDecoration } from "@graphql-typed-document-node/core";

export interface GraphQLErrorItem {
  message: string;
  path?: (string | number)[];
  extensions?: Record<string, unknown>;
}

export class GraphQLRequestError extends Error {
  readonly errors: GraphQLErrorItem[];
  readonly status: number;
  constructor(message: string, errors: GraphQLErrorItem[] = [], status = 200) {
    super(message);
    this.errors = errors;
    this.status = status;
  }
}

let currentToken: string | null = null;
export function setToken(token: string | null): void {
  currentToken = token;
}
export function getToken(): string | null {
  return currentToken;
}

export const GRAPHQL_PATH = "/graphql";

export function endpoint(): string {
  return new URL(GRAPHQL_PATH, window.location.href).toString();
}

export function wsEndpoint(): string {
  const url = new URL(GRAPHQL_PATH, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

/** POST one operation; resolves with `data` or throws GraphQLRequestError (HTTP fault or top-level errors). */
export async function gql<T = Record<string, unknown>>(
  query: string,
  variables: Record<string, unknown> = {},
  opts: { token?: string | null; allowPartial?: boolean } = {},
): Promise<T> {
  const token = opts.token === undefined ? currentToken : opts.token;
  const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(endpoint(), { method: "POST", headers, body: JSON.stringify({ query, variables }) });
  } catch (err) {
    throw new GraphQLRequestError(`the API did not answer (${String(err)})`, [], 0);
  }
  let body: { data?: T; errors?: GraphQLErrorItem[] } = {};
  try {
    body = await res.json();
  } catch {
    throw new GraphQLRequestError(`the API answered HTTP ${res.status} without JSON`, [], res.status);
  }
  if (body.errors?.length && !(opts.allowPartial && body.data)) {
    throw new GraphQLRequestError(body.errors.map((e) => e.message).join("; "), body.errors, res.status);
  }
  if (!res.ok && !body.data) {
    throw new GraphQLRequestError(`the API answered HTTP ${res.status}`, body.errors ?? [], res.status);
  }
  return (body.data ?? {}) as T;
}

/** One of the UI's generated operations (src/api/generated.ts, from src/api/operations/*.graphql), its result
 * and variables typed by the API's exported schema. */
export function request<R, V extends Record<string, unknown>>(
  doc: DocumentTypeDecoration<R, V>,
  variables: V,
  opts: { token?: string | null; allowPartial?: boolean } = {},
): Promise<R> {
  return gql<R>(doc.toString(), variables, opts);
}
