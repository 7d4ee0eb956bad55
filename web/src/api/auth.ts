// Who is signed in: the API's `me`; for a role the UI has no screens for, the claims of a JWT (display only:
// the server decides), else the role the user chose. The token stays in this tab's sessionStorage.

export const ROLES = ["admin", "manager", "researcher", "auditor"] as const;
export type Role = (typeof ROLES)[number];

export interface Identity {
  actor: string;
  role: Role;
  scope: string | null; // a manager's node, a researcher's projects (comma-separated)
  source: "api" | "token" | "chosen";
  capabilities: string[] | null; // from `me`; null when the API does not say
}

export function isRole(x: unknown): x is Role {
  return typeof x === "string" && (ROLES as readonly string[]).includes(x);
}

/** The claims of a JWT, without checking it (the server checks); null for anything that is not one. */
export function jwtClaims(token: string): Record<string, unknown> | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
    const claims = JSON.parse(json);
    return claims && typeof claims === "object" ? claims : null;
  } catch {
    return null;
  }
}

export function identityFromClaims(claims: Record<string, unknown> | null): Identity | null {
  if (!claims) return null;
  const role = claims.role ?? (Array.isArray(claims.roles) ? claims.roles[0] : undefined);
  if (!isRole(role)) return null;
  const scope = claims.scope ?? claims.node ?? null;
  return {
    actor: String(claims.sub ?? claims.name ?? "unknown"),
    role,
    scope: Array.isArray(scope) ? scope.join(",") : scope === null ? null : String(scope),
    source: "token",
    capabilities: null,
  };
}

/** The API's `me` (Query.me) as the UI's identity; null when its role is not one the UI has screens for. */
export function identityFromMe(me: { subject: string; name?: string | null; role: string; scopes: string[]; capabilities: string[] }): Identity | null {
  const role = me.role.toLowerCase();
  if (!isRole(role)) return null;
  // a person signed in through the lab's provider is shown by name (ADR 0049); a token by its subject
  return { actor: me.name || me.subject, role, scope: me.scopes.join(","), source: "api", capabilities: me.capabilities };
}

const KEY = "steward.session";

export function saveSession(token: string, chosenRole: Role): void {
  sessionStorage.setItem(KEY, JSON.stringify({ token, chosenRole }));
}
export function loadSession(): { token: string; chosenRole: Role } | null {
  try {
    const v = JSON.parse(sessionStorage.getItem(KEY) ?? "null");
    return v && typeof v.token === "string" && isRole(v.chosenRole) ? v : null;
  } catch {
    return null;
  }
}
export function clearSession(): void {
  sessionStorage.removeItem(KEY);
}

/** What each role is shown and may change (the server enforces the same, this only hides dead ends); who may
 * submit, cancel, open, close, restore and requeue: lib/acting.ts `powersOf` (from `me.capabilities`). */
/** Read the audit stream (auditEvents, stateAt, verify): the API says so in `me.capabilities`. */
export function canReadAudit(id: Identity): boolean {
  return id.capabilities ? id.capabilities.includes("read_audit") : id.role === "admin" || id.role === "auditor";
}

export const CAN = {
  editAllocations: (r: Role) => r === "admin" || r === "manager",
  seeAudit: (r: Role) => r !== "researcher",
};
