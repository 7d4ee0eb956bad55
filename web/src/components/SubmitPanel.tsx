import { useEffect, useState } from "react";
import { previewSubmit, submitJob, type OutlookAnswer, type SubmitAnswer } from "../api/queries";
import { outlookHeadline, outlookTone, parseSubmit, previewInput, qualificationLabel, type SubmitForm, type SubmitOutlook } from "../lib/outlook";
import { Badge, Panel } from "./common";

const CLASSES = ["batch", "debug", "interactive"];

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

/** Submit a job, told before and after submitting whether it runs funded or unfunded and why (DESIGN.md "The
 * time-slicing contract") and, for debug work, whether it is inside its allocation's debug quota. */
export function SubmitPanel({ projects, onSubmitted }: { projects: string[]; onSubmitted: () => void }) {
  const [form, setForm] = useState<SubmitForm>({ project: projects[0] ?? "", gpus: "1", minRuntimeS: "600", jobClass: "batch", resumable: true, command: "" });
  const [preview, setPreview] = useState<{ key: string; answer: OutlookAnswer | null; error: string | null } | null>(null);
  const [result, setResult] = useState<SubmitAnswer | null>(null);
  const [tried, setTried] = useState(false);
  const [busy, setBusy] = useState(false);
  const parsed = parseSubmit(form);
  const wanted = previewInput(form);
  const key = wanted ? JSON.stringify({ ...wanted, command: [] }) : "";

  useEffect(() => {
    if (!wanted) return;
    let live = true;
    const timer = window.setTimeout(() => {
      previewSubmit(wanted).then(
        (answer) => live && setPreview({ key, answer, error: null }),
        (err: unknown) => live && setPreview({ key, answer: null, error: err instanceof Error ? err.message : String(err) }),
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
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    setTried(true);
    if (!parsed.input) return;
    setBusy(true);
    try {
      const answer = await submitJob(parsed.input);
      setResult(answer);
      if (answer.ok) onSubmitted();
    } catch (err) {
      setResult({ ok: false, message: err instanceof Error ? err.message : String(err) });
    } finally {
      setBusy(false);
    }
  };
  const err = (k: string) => (tried && parsed.errors[k] ? <span id={`submit-${k}-err`} className="field-error">{parsed.errors[k]}</span> : null);
  const shown = preview && preview.key === key ? preview : null;

  return (
    <Panel title="Submit a job" id="submit">
      <form onSubmit={submit} aria-label="Submit a job" noValidate className="submit-form">
        <div className="form-row">
          <label>Project <input list="submit-projects" value={form.project} onChange={set("project")} size={12} aria-invalid={tried && !!parsed.errors.project} data-testid="submit-project" /></label>
          <datalist id="submit-projects">{projects.map((p) => <option key={p} value={p} />)}</datalist>
          {err("project")}
          <label>GPUs <input inputMode="numeric" value={form.gpus} onChange={set("gpus")} size={4} aria-invalid={tried && !!parsed.errors.gpus} data-testid="submit-gpus" /></label>
          {err("gpus")}
          <label>Protection (s) <input inputMode="numeric" value={form.minRuntimeS} onChange={set("minRuntimeS")} size={6} aria-invalid={tried && !!parsed.errors.minRuntimeS} aria-describedby="submit-protection-help" data-testid="submit-min-runtime" /></label>
          {err("minRuntimeS")}
          <label>Class <select value={form.jobClass} onChange={set("jobClass")} data-testid="submit-class">{CLASSES.map((c) => <option key={c} value={c}>{c}</option>)}</select></label>
          <label className="inline"><input type="checkbox" checked={form.resumable} onChange={set("resumable")} /> resumable</label>
        </div>
        <p id="submit-protection-help" className="muted small">Protection is the minimum runtime nothing preempts it for fairness; 0 asks for none (unfunded: idle GPUs only, preemptible at once).</p>
        <label>Command <input value={form.command} onChange={set("command")} size={40} aria-invalid={tried && !!parsed.errors.command} data-testid="submit-command" /></label>
        {err("command")}
        <section aria-labelledby="outlook-h" className="outlook-box" data-testid="submit-preview" aria-busy={!!wanted && !shown}>
          <h3 id="outlook-h">Before you submit</h3>
          {!wanted ? <p className="muted">Fill in the project, GPUs and protection to see what the job would get now.</p>
            : !shown ? <p className="muted">Asking the scheduler's view…</p>
            : shown.error ? <p className="error" role="alert">{shown.error}</p>
            : shown.answer?.kind === "refused" ? <p className="error" role="alert" data-testid="submit-preview-refused">{shown.answer.message}</p>
            : shown.answer?.kind === "outlook" ? <OutlookView outlook={shown.answer.outlook} testid="submit-preview-outlook" /> : null}
        </section>
        <div className="actions">
          <button type="submit" disabled={busy} data-testid="submit-button">{busy ? "Submitting…" : "Submit"}</button>
        </div>
        {result && (result.ok ? (
          <div data-testid="submit-result">
            <p className="ok" role="status">Submitted <strong>{result.jobId}</strong>.</p>
            {result.outlook && <OutlookView outlook={result.outlook} testid="submit-result-outlook" />}
          </div>
        ) : <p className="error" role="alert" data-testid="submit-result">Refused: {result.message}</p>)}
      </form>
    </Panel>
  );
}
