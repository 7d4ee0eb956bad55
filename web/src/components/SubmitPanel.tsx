import { useEffect, useRef, useState } from "react";
import { labelOf } from "../lib/names";
import { useNames } from "../names";
import type { OutlookAnswer } from "../api/queries";
import { preview, send, type SendAnswer } from "../api/acting";
import { outlookHeadline, outlookTone, qualificationLabel, type SubmitForm, type SubmitOutlook } from "../lib/outlook";
import { fieldOfRefusal, initialProject, MAX_PROTECTION_S, parseSubmission, policyCapNote, previewHint } from "../lib/acting";
import { formatDuration } from "../lib/format";
import { submitChoices, toggled } from "../lib/clusters";
import { fetchGpuModels } from "../api/queries";
import { useData } from "../context";
import { Badge, Panel } from "./common";

const KINDS: { value: string; label: string }[] = [
  { value: "batch", label: "batch job" },
  { value: "debug", label: "debug job" },
  { value: "interactive", label: "interactive session" },
];

/** The outlook in a box: funded or unfunded and why (the server's words), and the debug qualification. */
export function OutlookView({ outlook, testid }: { outlook: SubmitOutlook; testid: string }) {
  const q = outlook.qualification;
  const label = q ? qualificationLabel(q) : null;
  return (
    <div className={`outlook outlook-${outlookTone(outlook)}`} data-testid={testid} role="status" aria-live="polite">
      <p>
        <Badge tone={outlookTone(outlook)}>{outlookHeadline(outlook)}</Badge>
        {label && <> <Badge tone={label.tone}>{label.text}</Badge></>}
      </p>
      <ul className="outlook-lines">{outlook.message.split("\n").map((line) => <li key={line}>{line}</li>)}</ul>
    </div>
  );
}

/** The GPU models or clusters a job accepts (issue 25): a box per one the registered nodes have; none ticked means
 * any. A session takes them as a job does (OpenSessionInput.gpuModels, clusters). */
export function AcceptsPicker({ kind, choices, chosen, onToggle, error }: {
  kind: "gpuModels" | "clusters"; choices: string[]; chosen: string[]; onToggle: (name: string) => void; error: string | null;
}) {
  const what = kind === "gpuModels" ? "GPU models" : "Clusters";
  if (!choices.length) return null;
  return (
    <fieldset className="accepts" data-testid={`submit-${kind}`} aria-describedby={error ? `submit-${kind}-err` : undefined}>
      <legend>{what} <span className="muted small">(none ticked: any)</span></legend>
      {choices.map((name, i) => (
        <label key={name} className="inline">
          <input type="checkbox" id={i === 0 ? `submit-${kind}` : undefined} checked={chosen.includes(name)} onChange={() => onToggle(name)} data-testid={`submit-${kind}-${name}`} /> {name}
        </label>
      ))}
      {error && <span id={`submit-${kind}-err`} className="field-error" data-testid={`submit-${kind}-error`}>{error}</span>}
    </fieldset>
  );
}

/** Submit a job or open a session (issue 24 "Acting from the UI"), told before and after sending whether it runs
 * funded or unfunded and why (DESIGN.md "The time-slicing contract") and, for debug work and sessions, whether
 * it is inside its allocation's debug quota. Only the projects one may act for are offered; the server's refusal
 * is shown at the field it names. Every control is a native one: the form works from the keyboard alone. */
export function SubmitPanel({ projects, onSubmitted, prefill }: {
  projects: string[]; onSubmitted: (jobId: string) => void; prefill?: { form: SubmitForm; nonce: number } | null;
}) {
  const names = useNames();
  const [form, setForm] = useState<SubmitForm>({ project: initialProject(projects, null), gpus: "1", minRuntimeS: "600", jobClass: "batch", resumable: true, command: "" });
  const [shown, setShown] = useState<{ key: string; answer: OutlookAnswer | null; error: string | null } | null>(null);
  const [result, setResult] = useState<SendAnswer | null>(null);
  const [tried, setTried] = useState(false);
  const [busy, setBusy] = useState(false);
  const resultRef = useRef<HTMLDivElement>(null);
  const models = useData(fetchGpuModels, []);
  const choices = submitChoices(models.data ?? []);
  const session = form.jobClass === "interactive";
  const parsed = parseSubmission(form);
  const wanted = parseSubmission({ ...form, command: form.command.trim() || "(preview)" }).submission;
  const key = wanted ? JSON.stringify({ ...wanted, input: { ...wanted.input, command: [] } }) : "";

  // "Submit again" from a job's drawer: the form takes that job's shape and the focus
  useEffect(() => {
    if (!prefill) return;
    setForm(prefill.form);
    setResult(null);
    setTried(false);
    const select = document.getElementById("submit-project");
    select?.scrollIntoView({ block: "center" });
    select?.focus();
  }, [prefill]);

  useEffect(() => {
    if (!projects.includes(form.project)) setForm((f) => ({ ...f, project: initialProject(projects, f.project) }));
  }, [projects, form.project]);

  useEffect(() => {
    if (!wanted) return;
    let live = true;
    const timer = window.setTimeout(() => {
      preview(wanted).then(
        (answer) => live && setShown({ key, answer, error: null }),
        (err: unknown) => live && setShown({ key, answer: null, error: err instanceof Error ? err.message : String(err) }),
      );
    }, 300);
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  const set = (k: keyof SubmitForm) => (e: React.ChangeEvent<HTMLInputElement | HTMLSelectElement>) => {
    const value = e.target instanceof HTMLInputElement && e.target.type === "checkbox" ? e.target.checked : e.target.value;
    setForm((f) => ({ ...f, [k]: value }));
    setResult(null);
  };
  const toggle = (k: "gpuModels" | "clusters") => (name: string) => {
    setForm((f) => ({ ...f, [k]: toggled(f[k] ?? [], name, choices[k]) }));
    setResult(null);
  };
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (!parsed.submission) {
      // keyboard users land on the first field to mend
      const first = ["project", "gpus", "minRuntimeS", "command", "gpuModels", "clusters"].find((k) => parsed.errors[k]);
      if (first) document.getElementById(`submit-${first}`)?.focus();
      return;
    }
    setBusy(true);
    let answer: SendAnswer;
    try {
      answer = await send(parsed.submission);
    } catch (err) {
      answer = { ok: false, message: err instanceof Error ? err.message : String(err) };
    }
    setBusy(false);
    setResult(answer);
    if (answer.ok) onSubmitted(answer.jobId);
    window.setTimeout(() => resultRef.current?.focus(), 0);
  };

  // the API's refusal at the field it is about (InvalidInput's field, or the field its message names)
  const refusedField = result && !result.ok ? fieldOfRefusal(result.field, result.message) : null;
  const problem = (k: keyof SubmitForm): string | null =>
    (tried && parsed.errors[k]) || (refusedField === k && result && !result.ok ? result.message : null);
  const err = (k: keyof SubmitForm) => {
    const p = problem(k);
    return p ? <span id={`submit-${k}-err`} className="field-error" data-testid={`submit-${k}-error`}>{p}</span> : null;
  };
  const describe = (k: keyof SubmitForm, help?: string) => [problem(k) ? `submit-${k}-err` : "", help ?? ""].filter(Boolean).join(" ") || undefined;
  const current = shown && shown.key === key ? shown : null;
  const asked = Number(form.minRuntimeS);
  const capNote = current?.answer?.kind === "outlook" ? policyCapNote(asked, current.answer.outlook) : null;

  return (
    <Panel title="Submit a job or open a session" id="submit">
      <form onSubmit={submit} aria-label="Submit a job" noValidate className="submit-form">
        {projects.length === 0 && <p className="note" role="note" data-testid="submit-no-project">You may act for no project: the API shows none in your scopes.</p>}
        <div className="form-row">
          <div className="field">
            <label htmlFor="submit-project">Project</label>
            <select id="submit-project" value={form.project} onChange={set("project")} aria-invalid={!!problem("project")} aria-describedby={describe("project")} data-testid="submit-project">
              {projects.map((p) => <option key={p} value={p}>{labelOf(names, p)}</option>)}
            </select>
            {err("project")}
          </div>
          <div className="field">
            <label htmlFor="submit-jobClass">Kind</label>
            <select id="submit-jobClass" value={form.jobClass} onChange={set("jobClass")} data-testid="submit-class" aria-describedby={describe("jobClass")}>
              {KINDS.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
            </select>
            {err("jobClass")}
          </div>
          <div className="field">
            <label htmlFor="submit-gpus">GPUs</label>
            <input id="submit-gpus" inputMode="numeric" value={form.gpus} onChange={set("gpus")} size={4} aria-invalid={!!problem("gpus")} aria-describedby={describe("gpus")} data-testid="submit-gpus" />
            {err("gpus")}
          </div>
          <div className="field">
            <label htmlFor="submit-minRuntimeS">{session ? "Session cap (s)" : "Protection (s)"}</label>
            <input id="submit-minRuntimeS" inputMode="numeric" value={form.minRuntimeS} onChange={set("minRuntimeS")} size={6} aria-invalid={!!problem("minRuntimeS")} aria-describedby={describe("minRuntimeS", "submit-protection-help")} data-testid="submit-min-runtime" />
            {err("minRuntimeS")}
          </div>
          <label className="inline">
            <input type="checkbox" checked={session || form.resumable} disabled={session} onChange={set("resumable")} data-testid="submit-resumable" /> resumable
          </label>
        </div>
        <p id="submit-protection-help" className="muted small">
          {session
            ? `A session is protected until its cap (at most ${MAX_PROTECTION_S} s = ${formatDuration(MAX_PROTECTION_S)}), warned before it, then checkpointed and stopped; restore it later from the checkpoint.`
            : `Protection is the minimum runtime nothing preempts it for fairness, at most ${MAX_PROTECTION_S} s (${formatDuration(MAX_PROTECTION_S)}; the policy may cap it lower); 0 asks for none (unfunded: idle GPUs only, preemptible at once).`}
          {form.minRuntimeS.trim() && Number.isFinite(asked) && asked > 0 ? ` You asked for ${formatDuration(asked)}.` : ""}
        </p>
        <div className="field">
          <label htmlFor="submit-command">Command</label>
          <input id="submit-command" className="wide" value={form.command} onChange={set("command")} aria-invalid={!!problem("command")} aria-describedby={describe("command")} data-testid="submit-command" placeholder="python train.py --epochs 3" />
          {err("command")}
        </div>
        {(choices.gpuModels.length > 1 || choices.clusters.length > 1) && (
          <div className="form-row" data-testid="submit-accepts">
            <AcceptsPicker kind="gpuModels" choices={choices.gpuModels} chosen={form.gpuModels ?? []} onToggle={toggle("gpuModels")} error={problem("gpuModels")} />
            <AcceptsPicker kind="clusters" choices={choices.clusters} chosen={form.clusters ?? []} onToggle={toggle("clusters")} error={problem("clusters")} />
          </div>
        )}
        <section aria-labelledby="outlook-h" className="outlook-box" data-testid="submit-preview" aria-busy={!!wanted && !current}>
          <h3 id="outlook-h">Before you {session ? "open it" : "submit"}</h3>
          {!wanted ? <p className="muted">{previewHint(form)}</p>
            : !current ? <p className="muted">Asking the scheduler's view…</p>
            : current.error ? <p className="error" role="alert">{current.error}</p>
            : current.answer?.kind === "refused" ? <p className="error" role="alert" data-testid="submit-preview-refused">{current.answer.message}</p>
            : current.answer?.kind === "outlook" ? <OutlookView outlook={current.answer.outlook} testid="submit-preview-outlook" /> : null}
          {capNote && <p className="note small" role="note" data-testid="submit-policy-cap">{capNote}</p>}
        </section>
        <div className="actions">
          <button type="submit" disabled={busy || projects.length === 0} data-testid="submit-button">{busy ? "Sending…" : session ? "Open session" : "Submit"}</button>
        </div>
        <div ref={resultRef} tabIndex={-1} className="submit-result-slot">
          {result && (result.ok ? (
            <div data-testid="submit-result">
              <p className="ok" role="status">{session ? "Opened" : "Submitted"} <strong>{result.jobId}</strong>.</p>
              {result.outlook && <OutlookView outlook={result.outlook} testid="submit-result-outlook" />}
            </div>
          ) : <p className="error" role="alert" data-testid="submit-result">Refused: {result.message}</p>)}
        </div>
      </form>
    </Panel>
  );
}
