import { useEffect, useRef, useState } from "react";
import { act } from "../api/acting";
import { ACTIONS, actionReason, type ActionKind, canSubmitAgain, jobActions, type Powers } from "../lib/acting";

type Outcome = { kind: ActionKind; ok: boolean; message: string; newId: string | null };

/** The actions a job offers the signed-in person (cancel, or close / restore for a session; requeue for those
 * who may ask for a preemption), each asked again before it is sent, and the server's answer shown as given:
 * its refusal (role, scope, a protected job, a finished one) in its own words. */
export function JobActions({ job, powers, onDone, onSubmitAgain }: {
  job: { id: string; state: string; jobClass: string; attempt?: number | null }; powers: Powers; onDone: () => void; onSubmitAgain?: () => void;
}) {
  const kinds = jobActions(job, powers);
  const again = !!onSubmitAgain && canSubmitAgain(job, powers);
  const [asking, setAsking] = useState<ActionKind | null>(null);
  const [reason, setReason] = useState("");
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const reasonRef = useRef<HTMLInputElement>(null);

  useEffect(() => {
    if (!asking) return;
    (ACTIONS[asking].reason === "none" ? confirmRef.current : reasonRef.current)?.focus();
  }, [asking]);

  if (!kinds.length && !again && !outcome) return null;

  const ask = (k: ActionKind) => {
    setAsking(k);
    setReason("");
    setProblem(null);
    setOutcome(null);
  };
  const confirm = async () => {
    if (!asking) return;
    const r = actionReason(asking, reason);
    if (!r.ok) {
      setProblem(r.message);
      reasonRef.current?.focus();
      return;
    }
    setBusy(true);
    const kind = asking;
    try {
      const answer = await act(kind, job.id, r.reason, job.attempt);
      setOutcome(answer.ok
        ? { kind, ok: true, message: ACTIONS[kind].done, newId: kind === "restore" ? answer.jobId : null }
        : { kind, ok: false, message: `Refused: ${answer.refusal.message}${answer.refusal.code ? ` (${answer.refusal.code})` : ""}`, newId: null });
      if (answer.ok) onDone();
    } catch (err) {
      setOutcome({ kind, ok: false, message: err instanceof Error ? err.message : String(err), newId: null });
    } finally {
      setBusy(false);
      setAsking(null);
    }
  };

  return (
    <section aria-labelledby={`actions-${job.id}-h`} className="job-actions" data-testid="job-actions">
      <h3 id={`actions-${job.id}-h`} className="sr-only">Actions</h3>
      {!asking && (
        <div className="actions">
          {kinds.map((k) => (
            <button key={k} type="button" className={k === "restore" ? "" : "secondary"} onClick={() => ask(k)} data-testid={`action-${k}`}>{ACTIONS[k].label}</button>
          ))}
          {again && <button type="button" className="secondary" onClick={onSubmitAgain} data-testid="action-submit-again" title="Fill the submit form with this job's project, GPUs, protection and command">Submit again…</button>}
        </div>
      )}
      {asking && (
        <form className="confirm" role="group" aria-label={`Confirm: ${ACTIONS[asking].label}`} data-testid="action-confirm-box"
          onSubmit={(e) => { e.preventDefault(); void confirm(); }}
          onKeyDown={(e) => { if (e.key === "Escape") { e.stopPropagation(); setAsking(null); } }}>
          <p>{ACTIONS[asking].question(job.id)}</p>
          {ACTIONS[asking].reason !== "none" && (
            <>
              <label htmlFor={`action-reason-${job.id}`}>Reason{ACTIONS[asking].reason === "optional" ? " (optional, recorded)" : " (recorded)"}</label>
              <input id={`action-reason-${job.id}`} ref={reasonRef} className="wide" value={reason} onChange={(e) => setReason(e.target.value)}
                aria-invalid={!!problem} aria-describedby={problem ? `action-reason-${job.id}-err` : undefined} data-testid="action-reason" />
              {problem && <span id={`action-reason-${job.id}-err`} className="field-error">{problem}</span>}
            </>
          )}
          <div className="actions">
            <button type="submit" ref={confirmRef} disabled={busy} data-testid="action-confirm">{busy ? "Sending…" : ACTIONS[asking].confirm}</button>
            <button type="button" className="ghost" onClick={() => setAsking(null)} data-testid="action-keep">No, keep it as it is</button>
          </div>
        </form>
      )}
      {outcome && (
        <p className={outcome.ok ? "ok" : "error"} role={outcome.ok ? "status" : "alert"} data-testid="action-result">
          {outcome.message}{outcome.newId ? <> New session: <code data-testid="action-new-id">{outcome.newId}</code>.</> : null}
        </p>
      )}
    </section>
  );
}
