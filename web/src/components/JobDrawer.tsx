import { useApp, useData } from "../context";
import { type AuditEvent, type Explanation, explain, fetchJob, type Job } from "../api/queries";
import { Badge, Drawer, ErrorNote, JsonView, stateTone } from "./common";
import { sessionCountdown } from "../lib/countdown";
import { actorOf } from "../lib/audit";
import { assignmentsOf, contractFacts } from "../lib/contract";
import { formatDuration, formatRelative, formatTime, humanise, shortHash } from "../lib/format";
import { qualificationFromEvidence, qualificationLabel } from "../lib/outlook";
import { type PreemptionStory, readableEvidence } from "../lib/history";
import { PreemptionStoryList } from "./AllocationHistory";
import { JobActions } from "./JobActions";
import { fetchOwner } from "../api/acting";
import { ownerLabel, powersOf } from "../lib/acting";
import { sessionAddress } from "../lib/address";
import { routingOf } from "../lib/routing";
import { acceptsText } from "../lib/clusters";
import { ProjectName } from "../names";

/** whyPreempted's `evidence.preemption` (steward.api.explain.preemption_story), when the API records one. */
function storyOf(evidence: unknown): PreemptionStory | null {
  const p = evidence && typeof evidence === "object" ? (evidence as Record<string, unknown>).preemption : null;
  return p && typeof p === "object" ? (p as PreemptionStory) : null;
}

/** Pending / preempted in words from the job's own events, when the API has no explanation of it (whyPending
 * and whyPreempted answer null for a job it has none for). */
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

/** An explanation as the drawer words it: the server's text and reason code, its evidence and its facts. */
export interface Why {
  summary: string;
  code: string | null;
  evidence: unknown;
  facts: Record<string, unknown>;
}

const FACTS = ["blockingGpus", "blockingScope", "blockingUntil", "position", "positionInProject", "positionInClusters", "source"] as const;

export function whyOf(e: Explanation): Why {
  return {
    summary: e.text, code: e.reason, evidence: e.evidence,
    facts: Object.fromEntries(FACTS.filter((k) => e[k] !== null && e[k] !== undefined).map((k) => [k, e[k]])),
  };
}

const couldNotAsk = (e: Error): Why => ({ summary: `could not ask: ${e.message}`, code: null, evidence: null, facts: {} });

export function JobDrawer({ jobId, onClose, onSubmitAgain }: { jobId: string; onClose: () => void; onSubmitAgain?: (job: Job) => void }) {
  const { identity, now, refresh } = useApp();
  const { data, error } = useData(async () => {
    const [job, owner] = await Promise.all([fetchJob(jobId), fetchOwner(jobId).catch(() => null)]);
    if (!job) return null;
    const waiting = ["QUEUED", "PREEMPTED"].includes(job.state);
    const wasPreempted = job.state === "PREEMPTED" || job.events.some((e) => e.type === "JobPreempted");
    const ask = (kind: "pending" | "preempted") => explain(kind, jobId).then((e) => (e ? whyOf(e) : null), couldNotAsk);
    const [pending, preempted] = await Promise.all([waiting ? ask("pending") : null, wasPreempted ? ask("preempted") : null]);
    return { job, owner, pending, preempted, waiting, wasPreempted };
  }, [jobId]);

  const job = data?.job;
  const events = job?.events ?? [];
  const isSession = job?.jobClass === "interactive";
  // The contract's times are the API's fields (as the job's events recorded them); its history is read
  // from the events (lib/contract.ts).
  const facts = job ? contractFacts(events) : null;
  const prot = job?.protectedUntil ?? null;
  const capAt = job?.sessionCapAt ?? null;
  const warningsAt = job?.sessionWarningsAt ?? null;
  const cap = job && isSession && job.state === "RUNNING" ? sessionCountdown(job, now) : null;
  const checkpoints = facts?.checkpoints ?? [];
  const preemptions = facts?.preemptions ?? [];
  const routing = job ? routingOf(job.decisions) : null;  // issue 25: where its latest placement went, and why
  const placement = Object.entries(assignmentsOf(job?.assignments));
  const address = job && job.state === "RUNNING" ? sessionAddress(job.sessionAddress) : null;

  return (
    <Drawer title={`Job ${jobId}`} onClose={onClose}>
      <ErrorNote error={error} />
      {data === null && <p>This job does not exist or you may not see it.</p>}
      {job && (
        <div className="job-detail" data-testid="job-drawer">
          <p>
            <Badge tone={stateTone(job.state)}>{humanise(job.state)}</Badge> {job.jobClass} · {job.gpus} GPU{job.gpus === 1 ? "" : "s"} · project <ProjectName id={job.project} strong />{["RUNNING", "PLACED"].includes(job.state) ? ` · ${job.funded ? "funded" : "unfunded"}` : ""} · attempt {job.attempt}
            {data.owner ? <> · by <span data-testid="job-owner">{ownerLabel(data.owner)}</span></> : null}
          </p>
          <JobActions job={job} powers={powersOf(identity)} onDone={refresh} onSubmitAgain={onSubmitAgain ? () => onSubmitAgain(job) : undefined} />
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
                  {Object.keys(data.pending.facts).length > 0 && (
                    <dl className="facts">{Object.entries(data.pending.facts).map(([k, val]) => <div key={k}><dt>{k}</dt><dd>{k === "blockingUntil" ? formatTime(Number(val)) : String(val)}</dd></div>)}</dl>
                  )}
                  <details open><summary>Evidence</summary><JsonView value={readableEvidence(data.pending.evidence)} label="why pending evidence" /></details>
                </>
              ) : (
                <>
                  <p className="why" data-testid="why-pending">{explainFromEvents(job, events)}</p>
                  <p className="note small" role="note">The scheduler has no explanation of this job: told from its own events.</p>
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
                  <PreemptionStoryList story={storyOf(data.preempted.evidence)} />
                  <details open><summary>Evidence</summary><JsonView value={readableEvidence(data.preempted.evidence)} label="why preempted evidence" /></details>
                </>
              ) : (
                <>
                  <p className="why" data-testid="why-preempted">{explainFromEvents({ ...job, state: "PREEMPTED" }, events)}</p>
                  <p className="note small" role="note">No recorded preemption explains it: told from the job's own events.</p>
                </>
              )}
            </section>
          )}
          <dl className="facts">
            <div><dt>submitted</dt><dd>{formatTime(job.submittedAt)}</dd></div>
            <div><dt>started</dt><dd>{formatTime(job.startedAt)}</dd></div>
            <div><dt>min runtime</dt><dd>{formatDuration(job.minRuntimeS)}</dd></div>
            <div><dt>protection ends</dt><dd data-testid="protection-ends">{job.state !== "RUNNING" ? "—" : !job.funded ? "unprotected (unfunded)" : prot ? `${formatTime(prot)} (${formatRelative(prot, now)})` : "—"}</dd></div>
            {job.endedAt ? <div><dt>ended</dt><dd>{formatTime(job.endedAt)}{job.exitCode !== null && job.exitCode !== undefined ? ` · exit ${job.exitCode}` : ""}</dd></div> : null}
            <div><dt>resumable</dt><dd>{job.resumable ? "yes" : "no"}</dd></div>
            {facts?.restoredTo ? <div><dt>restored as</dt><dd><code data-testid="restored-to">{facts.restoredTo}</code></dd></div> : null}
            {facts?.restoredFrom ? <div><dt>restored from</dt><dd><code>{facts.restoredFrom}</code></dd></div> : null}
            <div><dt>GPU models</dt><dd data-testid="job-gpu-models">{acceptsText(job.gpuModels, "GPU model")}</dd></div>
            <div><dt>clusters</dt><dd data-testid="job-clusters">{acceptsText(job.clusters, "cluster")}</dd></div>
            {job.runsOn ? <div><dt>runs on</dt><dd data-testid="job-runs-on">cluster {job.runsOn}</dd></div> : null}
            <div><dt>placement</dt><dd>{placement.length ? placement.map(([n, g]) => `${n}: GPUs ${g.join(",")}`).join("; ") : "—"}</dd></div>
            {routing ? <div><dt>{routing.movedFrom ? "moved" : "routed"}</dt><dd data-testid="routing-reason">{routing.reason}</dd></div> : null}
          </dl>
          {isSession && (
            <section aria-labelledby="session-h" className="session-box">
              <h3 id="session-h">Interactive session</h3>
              {cap && cap.level !== "none" ? (
                <p className={`cap cap-${cap.level}`} data-testid="cap-countdown" role="timer" aria-live="off">
                  Cap: {cap.label}{cap.nextWarningS ? ` · next warning at ${formatDuration(cap.nextWarningS)} left` : ""}
                  {cap.level === "warning" || cap.level === "critical" ? " — save your work: the session will be checkpointed and stopped at the cap." : ""}
                </p>
              ) : <p className="muted" data-testid="cap-countdown-none">{cap ? "Opening: no SessionOpened event records the cap yet." : "Not running."}</p>}
              {address ? (
                <p data-testid="session-address">Reach it at{" "}
                  {address.href ? <a href={address.href} target="_blank" rel="noopener noreferrer">{address.text}</a> : <code>{address.text}</code>}
                  <span className="muted small"> ({address.hint}; published by attempt {job.attempt})</span></p>
              ) : job.state === "RUNNING" ? (
                <p className="muted small" data-testid="session-address-none">The session has not published how to reach it: its process writes a URL or host:port to the file <code>$STEWARD_SESSION_ADDRESS_FILE</code> names.</p>
              ) : null}
              {cap && capAt !== null && (
                <p className="small" data-testid="cap-times">{warningsAt && warningsAt.length ? `Warnings at ${warningsAt.map((w) => formatTime(w)).join(", ")}; cap` : "Cap"} at {formatTime(capAt)}.</p>
              )}
            </section>
          )}
          <h3>Checkpoints</h3>
          {checkpoints.length ? <ul className="history">{checkpoints.map((c, i) => <li key={i}>{formatTime(Number(c.at ?? c.recordedAt ?? c.time))} <JsonView value={c} /></li>)}</ul> : <p className="muted">None recorded.</p>}
          <h3>Preemptions</h3>
          {preemptions.length ? <ul className="history">{preemptions.map((c, i) => <li key={i}>{formatTime(Number(c.at ?? c.recordedAt ?? c.time))} <JsonView value={c} /></li>)}</ul> : <p className="muted">None.</p>}
          {job.decisions.length > 0 && (
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
