import { useEffect, useMemo, useState } from "react";
import { useApp, useData } from "../context";
import { type Allocation, fetchAllocationHistory, fetchAllocations, type MutationOutcome, setAllocations, setDebugQuota, setDisplayName, setPin, whatIf } from "../api/queries";
import { pinChanges, pinProblem, pinText } from "../lib/pins";
import { parseQuota, quotaText } from "../lib/outlook";
import { CAN } from "../api/auth";
import { ErrorNote, Panel } from "../components/common";
import { TreeTable } from "../components/TreeTable";
import { AllocationHistoryTable } from "../components/AllocationHistory";
import type { AllocationChange } from "../lib/history";
import { childrenOf, editableParents, ROOT } from "../lib/tree";
import { type ShareRow, validateShares } from "../lib/shares";
import { formatDuration, formatGpuHours, formatPercent, formatRatio, formatShare } from "../lib/format";
import { isSplit, splitBy, type PlaceRow } from "../lib/split";
import { labelOf } from "../lib/names";
import { ProjectName, useNames } from "../names";
import { askUntilDone, previewRows, proposalKey, replayCaption, shouldPreview, waitRows, type WhatIfOutcome } from "../lib/whatif";

export function TreeScreen() {
  const { identity, refresh } = useApp();
  const { data, error, reload } = useData(async () => ({ allocations: await fetchAllocations() }), []);
  const [selected, setSelected] = useState<string | null>(null);
  const canEdit = CAN.editAllocations(identity.role);
  const names = useNames();
  const parents = useMemo(() => (data ? editableParents(data.allocations, identity.role, identity.scope) : []), [data, identity]);

  useEffect(() => {
    if (selected === null && parents.length) setSelected(identity.scope && parents.includes(identity.scope) ? identity.scope : parents.includes(ROOT) ? ROOT : parents[0]);
  }, [parents, selected, identity.scope]);
  const editing = selected && parents.includes(selected) ? selected : null;

  return (
    <div className="grid-tree">
      <Panel title="Allocation tree" id="tree">
        <ErrorNote error={error} />
        {data ? (
          <TreeTable rows={data.allocations} selected={selected} onSelect={setSelected} label="Allocation tree" testid="tree-table" />
        ) : <p aria-busy="true">Loading…</p>}
      </Panel>
      <Panel title="Owed and delivered by cluster and GPU model" id="split">
        {data && <SplitPanel row={data.allocations.find((a) => a.name === (selected ?? ROOT)) ?? null} />}
      </Panel>
      <Panel title="Edit shares, quotas and names" id="edit">
        {!canEdit ? (
          <p data-testid="read-only">Read-only: your role (<strong>{identity.role}</strong>) cannot change allocations. Managers re-share their node among its children.</p>
        ) : !data ? null : (
          <>
            <label htmlFor="parent-pick">Node whose children to re-share</label>
            <select id="parent-pick" value={editing ?? ""} onChange={(e) => setSelected(e.target.value || null)}>
              <option value="">— choose a node —</option>
              {parents.map((p) => <option key={p} value={p}>{labelOf(names, p)}</option>)}
            </select>
            {editing && <ShareEditor key={editing} parent={editing} rows={data.allocations} onSaved={reload} />}
            {editing && <QuotaEditor key={`q-${editing}`} parent={editing} rows={data.allocations} onSaved={reload} />}
            {editing && <NameEditor key={`n-${editing}`} parent={editing} rows={data.allocations} onSaved={() => { reload(); refresh(); }} />}
            {editing && <PinEditor key={`p-${editing}`} parent={editing} rows={data.allocations} onSaved={reload} />}
          </>
        )}
      </Panel>
      <Panel title="Allocation history" id="history">
        <HistoryPanel under={selected} version={data} />
      </Panel>
    </div>
  );
}

/** The selected allocation's owed and delivered split by cluster, by GPU model, and per (cluster, model)
 * (Allocation.split: weighted GPU-hours, ADR 0062). */
export function SplitPanel({ row }: { row: { name: string; window?: string | null; split?: PlaceRow[] | null } | null }) {
  const [by, setBy] = useState<"cluster" | "model" | "place">("cluster");
  if (!row) return <p className="muted">Select an allocation in the tree to see where its budget went.</p>;
  const rows = row.split ?? [];
  if (!rows.length) return <p className="muted" data-testid="split-empty">Nothing owed or delivered to <strong>{row.name}</strong> in the {row.window ?? "window"}.</p>;
  const shown = splitBy(rows, by);
  return (
    <>
      <p className="muted">
        <strong>{row.name}</strong>, {row.window ?? "window"}, in weighted GPU-hours (an hour on a GPU costs its model's weight).
        {!isSplit(rows) && " All of it in one cluster and model."}
      </p>
      <div role="radiogroup" aria-label="Split by" className="nowrap">
        {(["cluster", "model", "place"] as const).map((b) => (
          <label key={b}><input type="radio" name="split-by" value={b} checked={by === b} onChange={() => setBy(b)} />
            {b === "place" ? "cluster and model" : b === "model" ? "GPU model" : "cluster"}</label>
        ))}
      </div>
      <table className="compact" data-testid="split-table">
        <thead><tr><th scope="col">{by === "place" ? "cluster · model" : by === "model" ? "GPU model" : "cluster"}</th><th scope="col">owed</th><th scope="col">delivered</th><th scope="col">delivered / owed</th></tr></thead>
        <tbody>
          {shown.map((r) => (
            <tr key={r.key} data-testid={`split-${r.key}`}>
              <th scope="row">{r.key}</th>
              <td className="num">{formatGpuHours(r.owed)}</td>
              <td className="num">{formatGpuHours(r.delivered)}</td>
              <td className="num nowrap">{formatRatio(r.ratio)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function HistoryPanel({ under, version }: { under: string | null; version: unknown }) {
  const [entries, setEntries] = useState<AllocationChange[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    const scope = under === ROOT ? null : under;
    fetchAllocationHistory(scope).then((e) => live && (setEntries(e), setError(null)), (e: Error) => live && setError(e.message));
    return () => { live = false; };
  }, [under, version]);
  return (
    <>
      <p className="muted">Newest first{under && under !== ROOT ? `, under ${under}` : ""}; times in your browser's zone.</p>
      <ErrorNote error={error} />
      {entries ? <AllocationHistoryTable entries={entries} under={under === ROOT ? null : under} /> : !error && <p aria-busy="true">Loading…</p>}
    </>
  );
}

function ShareEditor({ parent, rows, onSaved }: { parent: string; rows: Allocation[]; onSaved: () => void }) {
  const kids = childrenOf(rows, parent);
  const [texts, setTexts] = useState<Record<string, string>>(Object.fromEntries(kids.map((k) => [k.name, formatShare(k.share)])));
  const [reason, setReason] = useState("");
  const [touchedReason, setTouchedReason] = useState(false);
  const [saving, setSaving] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; message: string } | null>(null);
  const [preview, setPreview] = useState<{ key: string; loading: boolean; waiting: number; data: WhatIfOutcome | null; error: string | null }>({ key: "", loading: false, waiting: 0, data: null, error: null });
  const shareRows: ShareRow[] = kids.map((k) => ({ child: k.name, text: texts[k.name] ?? "", original: k.share }));
  const v = validateShares(shareRows, reason);

  // The what-if re-runs (debounced) whenever the proposed shares are valid and changed; a long replay is
  // asked for again while the server reports it still running (it keeps the run and serves it when done).
  const key = proposalKey(parent, v.changed);
  const wanted = shouldPreview(v);
  useEffect(() => {
    if (!wanted) return;
    let live = true;
    setPreview((p) => ({ ...p, key, loading: true, waiting: 0, error: null }));
    const timer = window.setTimeout(() => {
      askUntilDone(() => whatIf(parent, v.changed), { attempts: 12, delayMs: 2500, onWaiting: (n) => live && setPreview((p) => ({ ...p, waiting: n })) }).then(
        (data) => live && setPreview({ key, loading: false, waiting: 0, data, error: null }),
        (err: unknown) => live && setPreview({ key, loading: false, waiting: 0, data: null, error: err instanceof Error ? err.message : String(err) }),
      );
    }, 400);
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, wanted, parent]);
  const shown = preview.key === key ? preview : null;

  const save = async (e: React.FormEvent) => {
    e.preventDefault();
    setTouchedReason(true);
    if (!v.ok) return;
    setSaving(true);
    setResult(null);
    try {
      const out = await setAllocations(parent, v.changed, reason.trim());
      setResult({ ok: out.ok, message: out.ok ? `Saved${out.raw.position ? ` at position ${out.raw.position}` : ""}. The change is in the audit stream.` : `Refused: ${out.message}` });
      if (out.ok) {
        setReason("");
        setTouchedReason(false);
        onSaved();
      }
    } catch (err) {
      setResult({ ok: false, message: err instanceof Error ? err.message : String(err) });
    } finally {
      setSaving(false);
    }
  };

  const pct = Math.min(100, v.total * 100);
  return (
    <form onSubmit={save} aria-label={`Shares of the children of ${parent}`} noValidate>
      <table className="compact shares">
        <caption>Children of <strong>{parent}</strong>: each share is a fraction of {parent}'s allocation</caption>
        <thead><tr><th scope="col">child</th><th scope="col">share</th><th scope="col">now</th></tr></thead>
        <tbody>
          {kids.map((k) => {
            const err = v.rowErrors[k.name];
            return (
              <tr key={k.name}>
                <th scope="row"><label htmlFor={`share-${k.name}`}>{k.name}</label></th>
                <td>
                  <input id={`share-${k.name}`} inputMode="decimal" value={texts[k.name] ?? ""} aria-invalid={!!err}
                    aria-describedby={err ? `share-${k.name}-err` : "sum-status"}
                    onChange={(e) => setTexts((t) => ({ ...t, [k.name]: e.target.value }))} />
                  {err && <span id={`share-${k.name}-err`} className="field-error">{err}</span>}
                </td>
                <td className="num muted">{formatShare(k.share)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <div className={`sum ${v.sumError ? "bad" : ""}`} id="sum-status" role="status" aria-live="polite" data-testid="sum-status">
        <div className="meter" aria-hidden="true"><span className={v.sumError ? "over" : "funded"} style={{ width: `${pct}%` }} /></div>
        {v.sumError ?? `Sum ${formatShare(v.total)} of 1 — ${formatPercent(Math.max(0, v.remaining))} of ${parent} left unallocated`}
      </div>
      <label htmlFor="reason">Reason (required, recorded in the audit log)</label>
      <textarea id="reason" rows={2} value={reason} onChange={(e) => setReason(e.target.value)} onBlur={() => setTouchedReason(true)}
        aria-invalid={touchedReason && !!v.reasonError} aria-describedby={touchedReason && v.reasonError ? "reason-err" : undefined} />
      {touchedReason && v.reasonError && <span id="reason-err" className="field-error">{v.reasonError}</span>}

      <section className="whatif" aria-labelledby="whatif-h" data-testid="whatif" aria-busy={shown?.loading ?? false}>
        <h3 id="whatif-h">What-if preview</h3>
        {!v.changed.length ? <p className="muted">Change a share to see, before saving, what the simulator makes of the last 7 days with and without it.</p>
          : !wanted ? <p className="muted">Fix the shares above to preview them.</p>
          : !shown || shown.loading ? <p aria-live="polite" data-testid="whatif-loading">Simulating recent history with and without the change…{shown && shown.waiting > 0 ? ` (still replaying, ${shown.waiting * 2.5} s more)` : ""}</p>
          : shown.error ? <p className="error" role="alert">{shown.error}</p>
          : shown.data?.kind === "refused" ? <p className="error" role="alert" data-testid="whatif-refused">The preview refused the proposal: {shown.data.message}</p>
          : shown.data?.kind === "preview" ? <WhatIfTables data={shown.data.preview} /> : null}
      </section>

      {result && <p className={result.ok ? "ok" : "error"} role={result.ok ? "status" : "alert"} data-testid="save-result">{result.message}{result.ok && <> <a href="#/audit">Open the audit explorer</a></>}</p>}
      <div className="actions">
        <button type="submit" disabled={saving || !v.changed.length || !!v.sumError || Object.keys(v.rowErrors).length > 0}>{saving ? "Saving…" : "Save shares"}</button>
        <button type="button" className="ghost" onClick={() => { setTexts(Object.fromEntries(kids.map((k) => [k.name, formatShare(k.share)]))); setResult(null); }}>Reset</button>
        {!v.changed.length && !Object.keys(v.rowErrors).length && <span className="muted">No change yet.</span>}
      </div>
    </form>
  );
}

/** Send one change per child in turn (a quota, a name), stopping at the first refusal, which is shown in the
 * server's words; what was saved before it stays saved and the screen reloads. */
async function saveEach(children: string[], send: (child: string) => Promise<MutationOutcome>, what: string, ui: {
  setSaving: (v: boolean) => void; setResult: (r: { ok: boolean; message: string } | null) => void; onSaved: () => void; done: () => void;
}): Promise<void> {
  ui.setSaving(true);
  ui.setResult(null);
  const saved: string[] = [];
  try {
    for (const child of children) {
      const out = await send(child);
      if (!out.ok) {
        ui.setResult({ ok: false, message: `Refused for ${child}: ${out.message}` });
        return;
      }
      saved.push(child);
    }
    ui.setResult({ ok: true, message: `Saved the ${what} of ${saved.join(", ")}. The change is in the audit stream.` });
    ui.done();
  } catch (err) {
    ui.setResult({ ok: false, message: err instanceof Error ? err.message : String(err) });
  } finally {
    ui.setSaving(false);
    if (saved.length) ui.onSaved();
  }
}

/** The debug quotas of a node's children (DESIGN.md "Debug quota"): GPUs that may run debug jobs and sessions
 * ahead of the fair-share order. Empty puts a child back on the default that follows its share. */
function QuotaEditor({ parent, rows, onSaved }: { parent: string; rows: Allocation[]; onSaved: () => void }) {
  const kids = childrenOf(rows, parent) as Allocation[];
  const initial = Object.fromEntries(kids.map((k) => [k.name, k.debugQuotaGpus?.setGpus == null ? "" : String(k.debugQuotaGpus.setGpus)]));
  const [texts, setTexts] = useState<Record<string, string>>(initial);
  const [reason, setReason] = useState("");
  const [tried, setTried] = useState(false);
  const [saving, setSaving] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; message: string } | null>(null);
  const parsed = Object.fromEntries(kids.map((k) => [k.name, parseQuota(texts[k.name] ?? "")]));
  const changed = kids.filter((k) => (texts[k.name] ?? "") !== initial[k.name]);
  const bad = kids.filter((k) => !parsed[k.name].ok);
  const reasonError = reason.trim() ? null : "say why (recorded in the audit log)";

  const save = async (e: React.FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (bad.length || reasonError || !changed.length) return;
    await saveEach(changed.map((k) => k.name), (name) => {
      const p = parsed[name];
      return setDebugQuota(name, p.ok ? p.gpus : null, reason.trim());
    }, "debug quota", { setSaving, setResult, onSaved, done: () => { setReason(""); setTried(false); } });
  };

  return (
    <form onSubmit={save} aria-label={`Debug quotas of the children of ${parent}`} noValidate data-testid="quota-editor">
      <table className="compact shares">
        <caption>Debug quotas of <strong>{parent}</strong>'s children: GPUs that may run debug jobs and sessions ahead of the fair-share order (empty: the default, which follows the share)</caption>
        <thead><tr><th scope="col">child</th><th scope="col">set (GPUs)</th><th scope="col">in force</th></tr></thead>
        <tbody>
          {kids.map((k) => {
            const p = parsed[k.name];
            return (
              <tr key={k.name}>
                <th scope="row"><label htmlFor={`quota-${k.name}`}>{k.name}<span className="sr-only"> debug quota</span></label></th>
                <td>
                  <input id={`quota-${k.name}`} inputMode="numeric" size={5} value={texts[k.name] ?? ""} placeholder="default" aria-invalid={!p.ok}
                    aria-describedby={!p.ok ? `quota-${k.name}-err` : undefined} onChange={(e) => { setTexts((t) => ({ ...t, [k.name]: e.target.value })); setResult(null); }} />
                  {!p.ok && <span id={`quota-${k.name}-err`} className="field-error">{p.message}</span>}
                </td>
                <td className="num muted" data-testid={`quota-now-${k.name}`}>{quotaText(k.debugQuotaGpus)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <label htmlFor="quota-reason">Reason for the quota change (required, recorded in the audit log)</label>
      <input id="quota-reason" value={reason} onChange={(e) => setReason(e.target.value)} aria-invalid={tried && !!reasonError} data-testid="quota-reason" />
      {tried && reasonError && <span className="field-error">{reasonError}</span>}
      {result && <p className={result.ok ? "ok" : "error"} role={result.ok ? "status" : "alert"} data-testid="quota-result">{result.message}</p>}
      <div className="actions">
        <button type="submit" disabled={saving || !changed.length || bad.length > 0} data-testid="quota-save">{saving ? "Saving…" : "Save debug quotas"}</button>
        {!changed.length && <span className="muted">No change yet.</span>}
      </div>
    </form>
  );
}

/** The display names of a node's children (ADR 0055): what people read in every screen instead of the ids, which
 * stay what commands, filters and search take. Empty shows the id again. The server checks a name and says why it
 * refuses one (1 to 64 characters, no control characters, not a sibling's name or another node's id). */
function NameEditor({ parent, rows, onSaved }: { parent: string; rows: Allocation[]; onSaved: () => void }) {
  const kids = childrenOf(rows, parent) as Allocation[];
  const initial = Object.fromEntries(kids.map((k) => [k.name, k.displayName && k.displayName !== k.name ? k.displayName : ""]));
  const [texts, setTexts] = useState<Record<string, string>>(initial);
  const [reason, setReason] = useState("");
  const [tried, setTried] = useState(false);
  const [saving, setSaving] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; message: string } | null>(null);
  const changed = kids.filter((k) => (texts[k.name] ?? "").trim() !== initial[k.name]);
  const reasonError = reason.trim() ? null : "say why (recorded in the audit log)";

  const save = async (e: React.FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (reasonError || !changed.length) return;
    await saveEach(changed.map((k) => k.name), (name) => setDisplayName(name, (texts[name] ?? "").trim() || null, reason.trim()),
      "name", { setSaving, setResult, onSaved, done: () => { setReason(""); setTried(false); } });
  };

  return (
    <form onSubmit={save} aria-label={`Display names of the children of ${parent}`} noValidate data-testid="name-editor">
      <table className="compact shares">
        <caption>Names of <strong>{parent}</strong>'s children, as every screen shows them (empty: the id); ids do not change</caption>
        <thead><tr><th scope="col">child (id)</th><th scope="col">display name</th></tr></thead>
        <tbody>
          {kids.map((k) => (
            <tr key={k.name}>
              <th scope="row"><label htmlFor={`name-${k.name}`}>{k.name}<span className="sr-only"> display name</span></label></th>
              <td>
                <input id={`name-${k.name}`} maxLength={64} size={28} value={texts[k.name] ?? ""} placeholder={k.name} data-testid={`name-input-${k.name}`}
                  onChange={(e) => { setTexts((t) => ({ ...t, [k.name]: e.target.value })); setResult(null); }} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <label htmlFor="name-reason">Reason for the name change (required, recorded in the audit log)</label>
      <input id="name-reason" value={reason} onChange={(e) => setReason(e.target.value)} aria-invalid={tried && !!reasonError}
        aria-describedby={tried && reasonError ? "name-reason-err" : undefined} data-testid="name-reason" />
      {tried && reasonError && <span id="name-reason-err" className="field-error">{reasonError}</span>}
      {result && <p className={result.ok ? "ok" : "error"} role={result.ok ? "status" : "alert"} data-testid="name-result">{result.message}</p>}
      <div className="actions">
        <button type="submit" disabled={saving || !changed.length} data-testid="name-save">{saving ? "Saving…" : "Save names"}</button>
        {!changed.length && <span className="muted">No change yet.</span>}
      </div>
    </form>
  );
}

/** The pins of a node's children (ADR 0067): the cluster each child's jobs run on (a lab's own hardware); empty
 * unpins. The server checks the cluster is registered and that a subtree stays on one cluster, and says why it
 * refuses. A pinned child is owed at most what its cluster could deliver, and its jobs asking for another
 * cluster are refused at submit. */
export function PinEditor({ parent, rows, onSaved }: { parent: string; rows: Allocation[]; onSaved: () => void }) {
  const kids = childrenOf(rows, parent) as Allocation[];
  const [texts, setTexts] = useState<Record<string, string>>(Object.fromEntries(kids.map((k) => [k.name, k.pin ?? ""])));
  const [reason, setReason] = useState("");
  const [tried, setTried] = useState(false);
  const [saving, setSaving] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; message: string } | null>(null);
  const changes = pinChanges(kids, texts);
  const bad = kids.filter((k) => pinProblem(texts[k.name] ?? "") !== null);
  const reasonError = reason.trim() ? null : "say why (recorded in the audit log)";

  const save = async (e: React.FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (reasonError || !changes.length || bad.length) return;
    const to = Object.fromEntries(changes.map((c) => [c.child, c.cluster]));
    await saveEach(changes.map((c) => c.child), (name) => setPin(name, to[name] ?? null, reason.trim()),
      "pin", { setSaving, setResult, onSaved, done: () => { setReason(""); setTried(false); } });
  };

  return (
    <form onSubmit={save} aria-label={`Clusters the children of ${parent} are pinned to`} noValidate data-testid="pin-editor">
      <table className="compact shares">
        <caption>Pins of <strong>{parent}</strong>'s children: the cluster each one's jobs run on (empty: any cluster)</caption>
        <thead><tr><th scope="col">child</th><th scope="col">runs on now</th><th scope="col">pinned to</th></tr></thead>
        <tbody>
          {kids.map((k) => {
            const problem = pinProblem(texts[k.name] ?? "");
            return (
              <tr key={k.name}>
                <th scope="row"><label htmlFor={`pin-${k.name}`}><ProjectName id={k.name} /><span className="sr-only"> pinned to</span></label></th>
                <td className="muted" data-testid={`pin-now-${k.name}`}>{pinText(k)}</td>
                <td>
                  <input id={`pin-${k.name}`} maxLength={100} size={16} value={texts[k.name] ?? ""} placeholder="any cluster"
                    data-testid={`pin-input-${k.name}`} aria-invalid={!!problem}
                    onChange={(e) => { setTexts((t) => ({ ...t, [k.name]: e.target.value })); setResult(null); }} />
                  {problem && <span className="field-error">{problem}</span>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <label htmlFor="pin-reason">Reason for the pin change (required, recorded in the audit log)</label>
      <input id="pin-reason" value={reason} onChange={(e) => setReason(e.target.value)} aria-invalid={tried && !!reasonError} data-testid="pin-reason" />
      {tried && reasonError && <span className="field-error">{reasonError}</span>}
      {result && <p className={result.ok ? "ok" : "error"} role={result.ok ? "status" : "alert"} data-testid="pin-result">{result.message}</p>}
      <div className="actions">
        <button type="submit" disabled={saving || !changes.length || bad.length > 0} data-testid="pin-save">{saving ? "Saving…" : "Save pins"}</button>
        {!changes.length && <span className="muted">No change yet.</span>}
      </div>
    </form>
  );
}

/** GPU-seconds as a bare number of GPU-hours (the unit is in the column header). */
function gpuHours(gpuSeconds: number): string {
  return formatGpuHours(gpuSeconds).replace(" GPU·h", "");
}

const TREND_LABEL = { better: "better", worse: "worse", same: "no change", unknown: "" } as const;

function WhatIfTables({ data }: { data: import("../lib/whatif").WhatIfPreview }) {
  const rows = previewRows(data);
  const waits = waitRows(data);
  return (
    <div data-testid="whatif-result" aria-live="polite">
      <p data-testid="whatif-summary">{data.summary}</p>
      <p className="muted small">{replayCaption(data)}. Each cell reads without → with the change.</p>
      <div className="scroll-x">
      <table className="compact whatif-table" data-testid="whatif-allocations">
        <caption className="sr-only">Owed and delivered over owed per allocation in the replay, without → with the change</caption>
        <thead><tr><th scope="col">allocation</th><th scope="col">share</th><th scope="col">owed GPU·h</th><th scope="col">delivered / owed</th><th scope="col">change</th></tr></thead>
        <tbody>{rows.map((r) => (
          <tr key={r.name} className={r.changed ? "changed" : ""}>
            <th scope="row" style={{ paddingLeft: `${0.25 + Math.max(0, r.depth - (rows[0]?.depth ?? 1)) * 0.75}rem` }}><ProjectName id={r.name} /></th>
            <td className="num nowrap">{r.changed ? <>{formatShare(r.shareBefore)} → <strong>{formatShare(r.shareAfter)}</strong></> : formatShare(r.shareBefore)}</td>
            <td className="num nowrap">{gpuHours(r.owedBefore)} → {gpuHours(r.owedAfter)}</td>
            <td className="num nowrap">{formatPercent(r.ratioBefore, 0)} → {formatPercent(r.ratioAfter, 0)}</td>
            <td className={`num nowrap trend-${r.trend}`}>{r.delta}{TREND_LABEL[r.trend] ? <span className="sr-only"> ({TREND_LABEL[r.trend]})</span> : null}</td>
          </tr>
        ))}</tbody>
      </table>
      </div>
      <table className="compact" data-testid="whatif-waits">
        <caption className="sr-only">Waits by class in the replay, without and with the change</caption>
        <thead><tr><th scope="col">class</th><th scope="col">jobs</th><th scope="col">p50 wait</th><th scope="col">p90 wait</th></tr></thead>
        <tbody>{waits.map((w) => (
          <tr key={w.jobClass}><th scope="row">{w.jobClass}</th><td className="num">{w.jobs}</td>
            <td className="num nowrap">{formatDuration(w.p50BeforeS)} → {formatDuration(w.p50AfterS)}</td>
            <td className={`num nowrap trend-${w.trend}`}>{formatDuration(w.p90BeforeS)} → {formatDuration(w.p90AfterS)}</td></tr>
        ))}
        {!waits.length && <tr><td colSpan={4} className="muted">No waits in the replay.</td></tr>}</tbody>
      </table>
    </div>
  );
}
