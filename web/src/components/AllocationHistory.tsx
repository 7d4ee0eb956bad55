import { type AllocationChange, historyRows, type PreemptionStory, preemptionFacts } from "../lib/history";

/** Who changed which share, debug quota and display name, when (the browser's zone), why, before → after; newest first. */
export function AllocationHistoryTable({ entries, under }: { entries: AllocationChange[]; under?: string | null }) {
  if (!entries.length) {
    return <p className="muted" data-testid="history-empty">No allocation changes{under ? ` under ${under}` : ""} that you may see.</p>;
  }
  return (
    <table className="data compact history-table" data-testid="allocation-history" aria-label="Allocation history">
      <thead>
        <tr><th scope="col">When</th><th scope="col">Allocation</th><th scope="col">Display name</th><th scope="col">Parent</th><th scope="col">Share</th><th scope="col">Debug quota</th><th scope="col">By</th><th scope="col">Why</th><th scope="col">Position</th></tr>
      </thead>
      <tbody>
        {historyRows(entries).map((r) => (
          <tr key={r.key}>
            <td>{r.when}</td><td>{r.allocation}</td><td>{r.name}</td><td>{r.parent}</td><td>{r.share}</td><td>{r.quota}</td><td>{r.by}</td><td>{r.reason}</td><td><code>#{r.position}</code></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Who gained from a preemption, by how much, who asked and their note; times in the browser's zone. */
export function PreemptionStoryList({ story }: { story: PreemptionStory | null | undefined }) {
  const facts = story ? preemptionFacts(story) : [];
  if (!facts.length) return null;
  return (
    <dl className="facts" data-testid="preemption-story">
      {facts.map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
    </dl>
  );
}
