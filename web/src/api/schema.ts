import { buildSchema, introspectionFromSchema } from "graphql";

// What the API offers right now, learned by introspection, so every screen can ask only for fields that
// exist and say plainly which ones are missing (the API grows while the UI is built against it).

export interface TypeRef {
  kind: string;
  name: string | null;
  ofType?: TypeRef | null;
}
export interface ArgInfo {
  name: string;
  type: TypeRef;
}
export interface FieldInfo {
  name: string;
  args: ArgInfo[];
  type: TypeRef;
}
export interface TypeInfo {
  name: string;
  kind: string;
  fields: Map<string, FieldInfo>;
  inputFields: Map<string, ArgInfo>;
  possibleTypes: string[];
  enumValues: string[];
}

export interface ApiSchema {
  known: boolean; // false when introspection was refused: then everything is "maybe"
  queryType: string;
  mutationType: string | null;
  subscriptionType: string | null;
  types: Map<string, TypeInfo>;
}

const TYPE_REF = "kind name ofType { kind name ofType { kind name ofType { kind name } } }";
export const INTROSPECTION = `query StewardIntrospection { __schema {
  queryType { name } mutationType { name } subscriptionType { name }
  types { name kind possibleTypes { name } enumValues { name }
    fields { name type { ${TYPE_REF} } args { name type { ${TYPE_REF} } } }
    inputFields { name type { ${TYPE_REF} } } } } }`;

interface RawType {
  name: string;
  kind: string;
  fields: { name: string; type: TypeRef; args: ArgInfo[] }[] | null;
  inputFields: ArgInfo[] | null;
  possibleTypes: { name: string }[] | null;
  enumValues: { name: string }[] | null;
}

export function parseIntrospection(data: {
  __schema: {
    queryType: { name: string };
    mutationType: { name: string } | null;
    subscriptionType: { name: string } | null;
    types: RawType[];
  };
}): ApiSchema {
  const types = new Map<string, TypeInfo>();
  for (const t of data.__schema.types) {
    types.set(t.name, {
      name: t.name,
      kind: t.kind,
      fields: new Map((t.fields ?? []).map((f) => [f.name, { name: f.name, args: f.args ?? [], type: f.type }])),
      inputFields: new Map((t.inputFields ?? []).map((f) => [f.name, f])),
      possibleTypes: (t.possibleTypes ?? []).map((p) => p.name),
      enumValues: (t.enumValues ?? []).map((e) => e.name),
    });
  }
  return {
    known: true,
    queryType: data.__schema.queryType.name,
    mutationType: data.__schema.mutationType?.name ?? null,
    subscriptionType: data.__schema.subscriptionType?.name ?? null,
    types,
  };
}

/** The schema from SDL text (the exported schema/graphql/schema.graphql bundled at build time). */
export function fromSDL(sdl: string): ApiSchema {
  return parseIntrospection(introspectionFromSchema(buildSchema(sdl)) as unknown as Parameters<typeof parseIntrospection>[0]);
}

export const UNKNOWN_SCHEMA: ApiSchema = {
  known: false,
  queryType: "Query",
  mutationType: "Mutation",
  subscriptionType: null,
  types: new Map(),
};

export function namedType(ref: TypeRef | null | undefined): string | null {
  let r = ref;
  while (r && !r.name) r = r.ofType ?? null;
  return r?.name ?? null;
}

export function isList(ref: TypeRef | null | undefined): boolean {
  let r = ref;
  while (r) {
    if (r.kind === "LIST") return true;
    r = r.ofType ?? null;
  }
  return false;
}

function rootName(schema: ApiSchema, root: string): string | null {
  if (root === "Query") return schema.queryType;
  if (root === "Mutation") return schema.mutationType;
  if (root === "Subscription") return schema.subscriptionType;
  return root;
}

/** "Query.queue", "Job.protectionEndsAt": does the API offer it? Unknown schema: assume only the skeleton. */
export function has(schema: ApiSchema, path: string): boolean {
  const [root, field] = path.split(".");
  const typeName = rootName(schema, root);
  if (!typeName) return false;
  return schema.types.get(typeName)?.fields.has(field) ?? false;
}

export function field(schema: ApiSchema, path: string): FieldInfo | null {
  const [root, name] = path.split(".");
  const typeName = rootName(schema, root);
  return (typeName && schema.types.get(typeName)?.fields.get(name)) || null;
}

/** The first of several candidate names that exists ("Query.whyPending" | "Query.why"). */
export function firstOf(schema: ApiSchema, ...paths: string[]): string | null {
  return paths.find((p) => has(schema, p)) ?? null;
}

/** The object type a field returns, looking through lists, non-nulls and Relay connections. */
export function nodeTypeOf(schema: ApiSchema, path: string): { type: string | null; connection: boolean } {
  const f = field(schema, path);
  const name = namedType(f?.type);
  if (!name) return { type: null, connection: false };
  const t = schema.types.get(name);
  if (t?.fields.has("edges")) {
    const edges = namedType(t.fields.get("edges")!.type);
    const node = edges ? namedType(schema.types.get(edges)?.fields.get("node")?.type) : null;
    return { type: node, connection: true };
  }
  if (t?.fields.has("nodes") && !t.fields.has("id")) {
    return { type: namedType(t.fields.get("nodes")!.type), connection: true };
  }
  return { type: name, connection: false };
}

/**
 * A selection set with only the fields `type` has. A wanted entry is a name or "name { sub selection }";
 * a sub-selection is kept as written when the field exists (its inner fields are filtered recursively).
 */
export function select(schema: ApiSchema, type: string | null, wanted: string[]): string {
  const t = type ? schema.types.get(type) : undefined;
  const out: string[] = [];
  for (const w of wanted) {
    const brace = w.indexOf("{");
    const name = (brace < 0 ? w : w.slice(0, brace)).trim();
    const f = t?.fields.get(name);
    if (!f) continue;
    if (brace < 0) {
      out.push(name);
      continue;
    }
    const inner = splitSelection(w.slice(brace + 1, w.lastIndexOf("}")));
    const innerType = namedType(f.type);
    const innerInfo = innerType ? schema.types.get(innerType) : undefined;
    if (innerInfo && (innerInfo.kind === "UNION" || innerInfo.kind === "INTERFACE")) {
      out.push(`${name} { ${inner.join(" ")} }`);
      continue;
    }
    const sub = select(schema, innerType, inner);
    if (sub) out.push(`${name} { ${sub} }`);
  }
  return out.join(" ");
}

/** Split "a b { c d } e" into ["a", "b { c d }", "e"]. */
export function splitSelection(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of text.trim()) {
    if (ch === "{") depth++;
    if (ch === "}") depth--;
    if (/\s/.test(ch) && depth === 0) {
      if (cur.trim()) parts.push(cur.trim());
      cur = "";
      continue;
    }
    cur += ch;
  }
  if (cur.trim()) parts.push(cur.trim());
  // re-attach "name" + "{...}" written with a space between them
  const merged: string[] = [];
  for (const p of parts) {
    if (p.startsWith("{") && merged.length) merged[merged.length - 1] += " " + p;
    else merged.push(p);
  }
  return merged;
}

/** A GraphQL literal for `value` typed by `ref` (enums unquoted, input objects spelled out). */
export function literal(schema: ApiSchema, value: unknown, ref: TypeRef | null | undefined): string {
  if (value === null || value === undefined) return "null";
  const name = namedType(ref);
  const info = name ? schema.types.get(name) : undefined;
  if (Array.isArray(value)) return `[${value.map((v) => literal(schema, v, ref)).join(", ")}]`;
  if (info?.kind === "ENUM") return String(value);
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([k]) => !info || info.inputFields.has(k))
      .map(([k, v]) => `${k}: ${literal(schema, v, info?.inputFields.get(k)?.type)}`);
    return `{ ${entries.join(", ")} }`;
  }
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(String(value));
}

/** "(a: 1, b: \"x\")" with only the arguments the field declares; candidates may alias (first wins). */
export function argsFor(schema: ApiSchema, path: string, values: Record<string, unknown>): string {
  const f = field(schema, path);
  if (!f) return "";
  const parts: string[] = [];
  for (const arg of f.args) {
    if (!(arg.name in values) || values[arg.name] === undefined) continue;
    parts.push(`${arg.name}: ${literal(schema, values[arg.name], arg.type)}`);
  }
  return parts.length ? `(${parts.join(", ")})` : "";
}

/** Read a list that may be a plain list or a Relay connection ({edges {node}} or {nodes}). */
export function nodesOf<T>(value: unknown): T[] {
  if (!value) return [];
  if (Array.isArray(value)) return value as T[];
  const v = value as { edges?: { node: T }[]; nodes?: T[] };
  if (v.edges) return v.edges.map((e) => e.node);
  if (v.nodes) return v.nodes;
  return [];
}

/** The selection for a field that returns `type` either directly or inside a connection. */
export function wrapSelection(connection: boolean, inner: string, extra = ""): string {
  return connection ? `{ edges { node { ${inner} } } ${extra} }` : `{ ${inner} }`;
}
