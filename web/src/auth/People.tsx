// People (admins, auditors): which OpenID provider Steward trusts and the group mapping in force (who set
// it, when, why); admins change it here (setGroupMapping, recorded through the ledger like every admin
// command). ADR 0049.
import { type FormEvent, useState } from "react";
import { gql } from "../api/client";
import { ErrorNote, Panel } from "../components/common";
import { useApp, useData } from "../context";
import { person } from "./person";
import { type GroupRule, parseRules, ruleLine } from "./people";

interface Mapping {
  issuer: string;
  position: number;
  recordedAt: number | null;
  setBy: string;
  setByName: string;
  reason: string;
  rules: GroupRule[];
}

const READ = "query GroupMapping { groupMapping { issuer position recordedAt setBy setByName reason rules { group role scopes } } }";
const WRITE = `mutation SetGroupMapping($rules: [GroupRuleInput!]!, $reason: String!) {
  setGroupMapping(rules: $rules, reason: $reason) { __typename ... on GroupMappingChanged { position rules }
    ... on Rejected { reason } ... on InvalidInput { message } ... on NotAuthorised { message } } }`;

export function PeopleScreen() {
  const { identity } = useApp();
  const { data, error, reload } = useData(async () => (await gql<{ groupMapping: Mapping }>(READ)).groupMapping, []);
  const [text, setText] = useState<string | null>(null);
  const [reason, setReason] = useState("");
  const [note, setNote] = useState<string | null>(null);
  const admin = identity.capabilities ? identity.capabilities.includes("manage_identities") : identity.role === "admin";
  if (!data) return <><ErrorNote error={error} /><p aria-busy="true">Loading the group mapping…</p></>;
  const draft = text ?? data.rules.map(ruleLine).join("\n");

  const save = async (e: FormEvent) => {
    e.preventDefault();
    const { rules, problem } = parseRules(draft);
    if (problem) return setNote(problem);
    if (!reason.trim()) return setNote("say why (recorded with the change)");
    const res = (await gql<{ setGroupMapping: Record<string, unknown> }>(WRITE, { rules, reason })).setGroupMapping;
    if (res.__typename !== "GroupMappingChanged") return setNote(`refused: ${String(res.reason ?? res.message)}`);
    setNote(`recorded at position ${String(res.position)}`);
    setText(null);
    setReason("");
    reload();
  };

  return (
    <>
      <Panel title="Single sign-on" id="sso">
        <ErrorNote error={error} />
        <p>{data.issuer ? <>People sign in at <code>{data.issuer}</code>; their groups there give their role.</> : "Single sign-on is off (STEWARD_OIDC_ISSUER): API tokens only."}</p>
        <p className="muted">
          {data.position ? <>Set by {person(data.setBy, data.setByName)} at position {data.position}{data.recordedAt ? `, ${new Date(data.recordedAt * 1000).toLocaleString()}` : ""}: “{data.reason}”</> : "No mapping set yet: nobody who signs in has a role."}
        </p>
      </Panel>
      <Panel title="Group mapping" id="mapping">
        <table>
          <caption className="muted">A person gets the strongest role their groups map to (admin, manager, researcher, auditor), over the scopes of that role's rules.</caption>
          <thead><tr><th scope="col">group</th><th scope="col">role</th><th scope="col">scopes</th></tr></thead>
          <tbody>
            {data.rules.map((r) => <tr key={`${r.group}/${r.role}`}><td>{r.group}</td><td>{r.role}</td><td>{r.scopes.join(", ") || "everything"}</td></tr>)}
          </tbody>
        </table>
        {admin && (
          <form onSubmit={save} aria-labelledby="mapping-edit-h">
            <h3 id="mapping-edit-h">Change the mapping</h3>
            <label htmlFor="mapping-rules">Rules, one per line: GROUP=ROLE[:SCOPE,SCOPE]</label>
            <textarea id="mapping-rules" rows={6} value={draft} onChange={(e) => setText(e.target.value)} />
            <label htmlFor="mapping-reason">Why</label>
            <input id="mapping-reason" value={reason} onChange={(e) => setReason(e.target.value)} />
            {note && <p role="status">{note}</p>}
            <button type="submit">Record the mapping</button>
          </form>
        )}
      </Panel>
    </>
  );
}
