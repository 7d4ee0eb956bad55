// The queue when the API does not rank it yet: waiting jobs in submit order (priority first inside a
// project), positions overall and inside the project. The real order is the fair-share walk (Query.queue).

export interface Waiting {
  id: string;
  project: string;
  state: string;
  gpus: number;
  priority?: number;
  submittedAt: number;
}

export interface Ranked<T> {
  job: T;
  position: number;
  positionInProject: number;
}

export const WAITING_STATES = ["QUEUED", "PREEMPTED"];

export function rankBySubmitOrder<T extends Waiting>(jobs: T[]): Ranked<T>[] {
  const waiting = jobs
    .filter((j) => WAITING_STATES.includes(j.state))
    .sort((a, b) => a.submittedAt - b.submittedAt || (b.priority ?? 0) - (a.priority ?? 0) || a.id.localeCompare(b.id));
  const perProject = new Map<string, number>();
  return waiting.map((job, i) => {
    const p = (perProject.get(job.project) ?? 0) + 1;
    perProject.set(job.project, p);
    return { job, position: i + 1, positionInProject: p };
  });
}
