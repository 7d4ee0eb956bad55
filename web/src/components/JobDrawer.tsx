import { useState } from "react";
import { useApp, useData } from "../context";
import { type AuditEvent, type Explanation, explain, fetchJob, type Job, restoreSession, RESTORE_CANDIDATES, actorOf } from "../api/queries";
import { firstOf } from "../api/schema";
import { CAN } from "../api/auth";
import { Badge, Drawer, ErrorNote, JsonView, Missing, stateTone } from "./common";
import { countdown, protectionEndsAt, sessionCapEndsAt } from "../lib/countdown";
import { formatDuration, formatRelative, formatTime, humanise, shortHash } from "../lib/format";
import { qualificationFromEvidence, qualificationLabel } from "../lib/outlook";

/** Sessions the ledger restores (steward.domain.sessions.RESTORABLE_STATES). */
export const RESTORABLE = ["SUSPENDED", "CANCELLED", "FAILED", "COMPLETED"];

/** Pending / preempted in words from the job's own events, when the API has no whyPending yet. */
export function explainFromEvents(job: Job, events: AuditEvent[]): string {
  const last = events.at(-1);
  if (job.state === "QUEUED") {
    const placedBefore = events.some((e) => e.type === "JobPlaced");
    return `Waiting since ${formatTime(job.submittedAt)} for ${job.gpus} free GPU${job.gpus === 1 ? "" : "s"}${placedBefore ? " (it ran before and was requeued)" : ""}. The scheduler places the most under-served allocation first; this job's project is ${job.project}.`;
  }
  if (job.state === "PREEMPTED" || events.some((e) => e.type === "JobPreempted")) {
    const p = [...events].reverse().find((e) => e.type === "JobPreempted");
    return p ? `Preempted at ${formatTime(p.recordedAt)}; the event's evidence below names the waiting demand it made room for.` : "Preempted.";
  }
  return last ? `Last event: ${last.type} at ${formatTime(last.recordedAt)}.` : "No events.";
}

export function JobDrawer({ jobId, onClose }: { jobId: string; onClose: () => void }) {
  const { schema, identity, now, refresh } = useApp();
  const { data, error } = useData(async () => {
    const job = await fetchJob(schema, jobId);
    if (!job) return null;
    const waiting = ["QUEUED", "PREEMPTED"].includes(job.state);
    const wasPreempted = job.state === "PREEMPTED" || (job.events ?? []).some((e) => e.type === "JobPreempted") || (job.preemptions?.length ?? 0) > 0;
    const [pending, preempted] = await Promise.all([
      waiting ? explain(schema, "pending", jobId).catch((e: Error): Explanation => ({ summary: `could not ask: ${e.message}`, code: null, evidence: null })) : null,
      wasPreempted ? explain(schema, "preempted", jobId).catch((e: Error): Explanation => ({ summary: `could not ask: ${e.message}`, code: null, evidence: null })) : null,
    ]);
    return { job, pending, preempted, waiting, wasPreempted };
  }, [schema, jobId]);
  const [restore, setRestore] = useState<{ busy: boolean; message: string | null; ok: boolean }>({ busy: false, message: null, ok: false });

  const job = data?.job;
  const events = job?.events ?? [];
  const isSession = job?.jobClass === "interactive";
  // Contract times: the API's fields when it has them, else what the job's own events recorded.
  const lastPayload = (type: string) => [...events].reverse().find((e) => e.type === type)?.payload as Record<string, unknown> | undefined;
  const started = lastPayload("JobStarted");
  const opened = lastPayload("SessionOpened");
  const prot = job ? (job.protectionEndsAt ?? (typeof started?.protected_until === "number" ? started.protected_until : null) ?? protectionEndsAt(job)) : null;
  const capAt = job ? (job.capEndsAt ?? (typeof opened?.cap_at === "number" ? opened.cap_at : null) ?? sessionCapEndsAt(job)) : null;
  const warningsAt = Array.isArray(opened?.warnings_at) ? (opened!.warnings_at as number[]) : null;
  const restoredPayload = lastPayload("SessionRestored");
  const restoredTo = job?.restoredTo ?? (restoredPayload ? String(restoredPayload.new_job_id ?? restoredPayload.restored_to ?? "") || null : null);
  const capSource = job?.capEndsAt != null ? "api" : typeof opened?.cap_at === "number" ? "events" : "default";
  const cap = job && isSession && job.state === "RUNNING" ? countdown(capAt, now, warningsAt && capAt ? warningsAt.map((w) => capAt - w) : undefined) : null;
  const restorePath = firstOf(schema, ...RESTORE_CANDIDATES);
  const checkpoints: Record<string, unknown>[] = job?.checkpoints ?? events.filter((e) => /Checkpoint/.test(e.type)).map((e) => ({ at: e.recordedAt, type: e.type, ...(e.payload as object) }));
  const preemptions: Record<string, unknown>[] = job?.preemptions ?? events.filter((e) => e.type === "JobPreempted").map((e) => ({ at: e.recordedAt, ...(e.payload as object) }));

  const doRestore = async () => {
    if (!job) return;
    setRestore({ busy: true, message: null, ok: false });
    try {
      const out = await restoreSession(schema, job.id);
      setRestore({ busy: false, ok: out.ok, message: out.ok ? "Restore requested: the session re-opens from its last checkpoint." : `Refused: ${out.message}` });
      refresh();
    } catch (err) {
      setRestore({ busy: false, ok: false, message: err instanceof Error ? err.message : String(err) });
    }
  };

  return (
    <Drawer title={`Job ${jobId}`} onClose={onClose}>
      <ErrorNote error={error} />
      {data === null && <p>This job does not exist or you may not see it.</p>}
      {job && (
        <div className="job-detail" data-testid="job-drawer">
          <p>
            <Badge tone={stateTone(job.state)}>{humanise(job.state)}</Badge> {job.jobClass ?? "batch"} · {job.gpus} GPU{job.gpus === 1 ? "" : "s"} · project <strong>{job.project}</strong>{["RUNNING", "PLACED"].includes(job.state) ? ` · ${job.funded === false ? "unfunded" : "funded"}` : ""} · attempt {job.attempt ?? 1}
          </p>
          {data.waiting && (
            <section aria-labelledby="why-pending-h">
              <h3 id="why-pending-h">Why pending</h3>
              {data.pending ? (
                <>
                  <p className="why" data-testid="why-pending">{data.pending.summary}{data.pending.code && <> <code>{data.pending.code}</code></>}</p>
                  {(() => {
                    const q = qualificationFromEvidence(data.pending.evidence);
                    if (!q) return null;
                    const label = qualificationLabel(q);
                    return <p data-testid="why-pending-quota"><Badge tone={label.tone}>{label.text}</Badge> <span className="muted">debug quota {q.quotaGpus} GPUs: {q.inUseGpus} in use, {q.aheadGpus} waiting ahead</span></p>;
                  })()}
                  {data.pending.facts && Object.keys(data.pending.facts).length > 0 && (
                    <dl className="facts">{Object.entries(data.pending.facts).map(([k, val]) => <div key={k}><dt>{k}</dt><dd>{k === "blockingUntil" ? formatTime(Number(val)) : String(val)}</dd></div>)}</dl>
                  )}
                  <details open><summary>Evidence</summary><JsonView value={data.pending.evidence} label="why pending evidence" /></details>
                </>
              ) : (
                <>
                  <p className="why" data-testid="why-pending">{explainFromEvents(job, events)}</p>
                  <Missing fields={["Query.whyPending(job: ID!): Explanation { summary reasonCode evidence }"]}>explained from the job's own events</Missing>
                </>
              )}
            </section>
          )}
          {data.wasPreempted && (
            <section aria-labelledby="why-preempted-h">
              <h3 id="why-preempted-h">Why preempted</h3>
              {data.preempted ? (
                <>
                  <p className="why" data-testid="why-preempted">{data.preempted.summary}{data.preempted.code && <> <code>{data.preempted.code}</code></>}</p>
                  <details open><summary>Evidence</summary><JsonView value={data.preempted.evidence} label="why preempted evidence" /></details>
                </>
              ) : (
                <>
                  <p className="why" data-testid="why-preempted">{explainFromEvents({ ...job, state: "PREEMPTED" }, events)}</p>
                  <Missing fields={["Query.whyPreempted(job: ID!): Explanation"]} />
                </>
              )}
            </section>
          )}
          <dl className="facts">
            <div><dt>submitted</dt><dd>{formatTime(job.submittedAt)}</dd></div>
            <div><dt>started</dt><dd>{formatTime(job.startedAt)}</dd></div>
            <div><dt>min runtime</dt><dd>{formatDuration(job.minRuntimeS)}</dd></div>
            <div><dt>protection ends</dt><dd data-testid="protection-ends">{job.state !== "RUNNING" ? "—" : prot ? `${formatTime(prot)} (${formatRelative(prot, now)})` : job.funded === false ? "unprotected (unfunded)" : "—"}</dd></div>
            {job.endedAt ? <div><dt>ended</dt><dd>{formatTime(job.endedAt)}{job.exitCode !== null && job.exitCode !== undefined ? ` · exit ${job.exitCode}` : ""}</dd></div> : null}
            <div><dt>resumable</dt><dd>{job.resumable ? "yes" : "no"}</dd></div>
            {restoredTo ? <div><dt>restored as</dt><dd><code data-testid="restored-to">{restoredTo}</code></dd></div> : null}
            {job.restoredFrom ? <div><dt>restored from</dt><dd><code>{job.restoredFrom}</code></dd></div> : null}
            <div><dt>placement</dt><dd>{job.assignments && Object.keys(job.assignments).length ? Object.entries(job.assignments).map(([n, g]) => `${n}: GPUs ${g.join(",")}`).join("; ") : "—"}</dd></div>
          </dl>
          {isSession && (
            <section aria-labelledby="session-h" className="session-box">
              <h3 id="session-h">Interactive session</h3>
              {cap ? (
                <p className={`cap cap-${cap.level}`} data-testid="cap-countdown" role="timer" aria-live="off">
                  Cap: {cap.label}{cap.nextWarningS ? ` · next warning at ${formatDuration(cap.nextWarningS)} left` : ""}
                  {cap.level === "warning" || cap.level === "critical" ? " — save your work: the session will be checkpointed and stopped at the cap." : ""}
                </p>
              ) : <p className="muted">Not running.</p>}
              {cap && warningsAt && (
                <p className="small">Warnings at {warningsAt.map((w) => formatTime(w)).join(", ")}; cap at {formatTime(capAt)}.</p>
              )}
              {capSource === "default" && isSession && job.state === "RUNNING" && <Missing fields={["Job.sessionCapAt: Float", "Job.sessionWarningsAt: [Float!]"]}>cap assumed to be start + 8 h (the default policy)</Missing>}
              {CAN.restoreSessions(identity.role) && (
                <div className="actions">
                  <button type="button" onClick={doRestore} disabled={!restorePath || restore.busy || !RESTORABLE.includes(job.state)} data-testid="restore">
                    {restore.busy ? "Restoring…" : "Restore session"}
                  </button>
                  {!RESTORABLE.includes(job.state) && <span className="muted">Restore is for stopped or preempted sessions.</span>}
                </div>
              )}
              {!restorePath && <Missing fields={["Mutation.restoreSession(id: ID!): RestoreSessionResult"]}>the restore button is disabled until then</Missing>}
              {restore.message && <p className={restore.ok ? "ok" : "error"} role="status" data-testid="restore-result">{restore.message}</p>}
            </section>
          )}
          <h3>Checkpoints</h3>
          {checkpoints.length ? <ul className="history">{checkpoints.map((c, i) => <li key={i}>{formatTime(Number(c.at ?? c.recordedAt ?? c.time))} <JsonView value={c} /></li>)}</ul> : <p className="muted">None recorded.</p>}
          <h3>Preemptions</h3>
          {preemptions.length ? <ul className="history">{preemptions.map((c, i) => <li key={i}>{formatTime(Number(c.at ?? c.recordedAt ?? c.time))} <JsonView value={c} /></li>)}</ul> : <p className="muted">None.</p>}
          {job.decisions && job.decisions.length > 0 && (
            <>
              <h3>Decisions and their evidence</h3>
              <ol className="events" data-testid="decisions">
                {job.decisions.map((d) => (
                  <li key={d.position}><details><summary><code>#{d.position}</code> <strong>{d.type}</strong> {formatTime(d.recordedAt)}{d.actor ? ` · ${d.actor}` : ""}</summary><JsonView value={d.evidence} label={`${d.type} evidence`} /></details></li>
                ))}
              </ol>
            </>
          )}
          <h3>Events</h3>
          <ol className="events">
            {events.map((e) => (
              <li key={e.position}>
                <details>
                  <summary><code>#{e.position}</code> <strong>{e.type}</strong> {formatTime(e.recordedAt)} · {actorOf(e)} · <span className="hash" title={e.hash}>{shortHash(e.hash)}</span></summary>
                  <JsonView value={e.payload} label={`${e.type} payload`} />
                </details>
              </li>
            ))}
          </ol>
        </div>
      )}
    </Drawer>
  );
}
