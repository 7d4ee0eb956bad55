"""The waiting jobs a cycle can act on: a trimmed, incrementally kept view of the queue.

A cycle walks waiting jobs in order (projects by fair share; inside a project by priority, then
submit time, then id) and acts on a job by placing it or by planning a preemption for it. Call two
waiting jobs *twins* when the cycle reads the same things about them apart from their position:
same project, GPUs, session or not, priority, funding asked (min_runtime > 0), topology constraint and
restore node. Capacity only shrinks while a cycle runs, so once the cycle fails to place one twin it
fails on the later ones; a failed victim search is memoised for that size and larger; searches are
capped at `preemption_attempts_per_cycle`. A chain of twins therefore has at most
`free_gpus // gpus + attempts` jobs acted on, all at its head, and the jobs behind decide nothing.

`PendingView` keeps each chain sorted and hands the cycle the first `free // gpus + attempts + 1`
(+ slack) of every chain, plus the chain's last job (so that "does anything behind this position
fit?", which ends the cycle's walk, sees every job size that the full queue has). The cycle's cost
then follows what can happen rather than the queue length (thousands of jobs in the philly backlog).

The protection a job asks for is not part of the key: keying on it would split debug jobs
(protection = duration) into chains of one, and it matters at one place only. On the nodes reserved
for a large gang, work may backfill only if its protection ends before the reservation is due, so a
twin far down a chain, protected for less, may be placed where its twins ahead may not. When a cycle
makes a reservation, the engine asks `backfill_candidates` for such jobs that the trimmed queue left
out, for the due time of each of the cycle's reservations, and, if there are any, runs the cycle
again with them (about 2 % of the cycles of the philly run). (`exact_protection=True` keys on
protection instead.) A failed victim search is memoised by size whatever the waiting job's
protection, so the strict-improvement horizon does not need it.

Debug work of one allocation is qualified for the lane by its place in the allocation's debug work
in submit order, across its chains (ADR 0029), which a trimmed chain would hide. So a lane chain's
head also has `quota // gpus` jobs (its project's debug quota): a job of another chain with a cut
job of this chain ahead of it has the whole head ahead too, more than the quota, and is over the
quota in the trimmed view as in the full one; a qualified job has no cut job ahead of it.

The bound counts `attempts` (32) searches per chain, but a cycle rarely makes room for more than a
few jobs of one chain. So the engine first hands the cycle a *narrow* view (`jobs(free, narrow=True)`:
at most `NARROW` searches and lane jobs per chain) and checks the result (`acted_past`): if, in some
chain the narrow view cut, the cycle acted on (placed, made room for, reserved for) all but `SLACK`
jobs of the head or on the chain's last job, it runs the cycle again on the full heads. Otherwise a
twin at the head got no action, and by the argument above neither would any twin behind it: the
decisions are the full view's. "Made room for" includes searches whose victims were all leaving
already (no new `Preemption`): the cycle lists them in its evidence (`making_room_for`).

Trimming is checked decision by decision against the full queue: on philly slices for every policy
(tests/unit/sim/test_philly_slice.py) and, during development, on the whole philly trace for
`steward` (190,908 cycles, identical) and 30,000 jobs of `ai2`. Explanations of trimmed jobs are
not built: the simulator does not read them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Iterator, Mapping

from steward.domain.policy_settings import PolicySettings
from steward.policy.contract import protection_s
from steward.policy.lane import lane_pending
from steward.policy.model import PendingJob

ChainKey = tuple[Hashable, ...]

SLACK = 2
NARROW = 4
"""Searches per chain that the narrow view makes room for; a cycle that acts on more
runs again on the full view (`acted_past`)."""


def chain_key(job: PendingJob, settings: PolicySettings, exact_protection: bool = False) -> ChainKey:
    """Jobs with equal keys are twins (see the module docstring). Protection is part of the key only
    with `exact_protection`: it matters for backfill on reserved nodes and for the strict-improvement
    horizon, but keying on it splits debug jobs (protection = duration) into chains of one."""
    asks = job.klass == "interactive" or job.min_runtime_s > 0
    prot = protection_s(job.klass, job.min_runtime_s, settings) if exact_protection else None
    session = job.klass == "interactive"  # the cycle reads the class only to single out sessions
    lane = lane_pending(job, settings)  # and lane jobs (ADR 0007)
    return (job.project, job.gpus, session, job.priority, prot, asks, job.topology_depth, job.previous_node,
            job.gpu_models, job.clusters, lane)  # ADR 0057: what it accepts decides where it may go (lane: last)


class _Chain:
    __slots__ = ("gpus", "jobs", "keys", "lane", "prots")

    def __init__(self, gpus: int, lane: int = 0) -> None:
        self.gpus = gpus
        self.lane = lane  # a lane chain: its project's debug quota (GPUs); 0 otherwise
        self.keys: list[tuple[float, str]] = []
        self.jobs: list[PendingJob] = []
        self.prots: list[float] = []  # protection asked, for backfill on reserved nodes


class PendingView:
    def __init__(self, settings: PolicySettings, attempts: int, exact_protection: bool = False,
                 debug_quotas: Mapping[str, int] | None = None) -> None:
        self.settings = settings
        self.debug_quotas: Mapping[str, int] = debug_quotas or {}
        self.exact_protection = exact_protection
        self.attempts = attempts
        self.chains: dict[ChainKey, _Chain] = {}
        self.where: dict[str, ChainKey] = {}
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, job: PendingJob) -> int:
        """Queue a job; returns its position in its chain (0 = head)."""
        key = chain_key(job, self.settings, self.exact_protection)
        chain = self.chains.get(key)
        if chain is None:
            chain = self.chains[key] = _Chain(job.gpus, self.debug_quotas.get(job.project, 0) if key[-1] else 0)
        k = (job.submitted_at, job.id)
        prot = protection_s(job.klass, job.min_runtime_s, self.settings)
        if not chain.keys or k > chain.keys[-1]:
            chain.keys.append(k)
            chain.jobs.append(job)
            chain.prots.append(prot)
            pos = len(chain.keys) - 1
        else:
            pos = bisect_left(chain.keys, k)
            insort(chain.keys, k)
            chain.jobs.insert(pos, job)
            chain.prots.insert(pos, prot)
        self.where[job.id] = key
        self.count += 1
        return pos

    def remove(self, job: PendingJob) -> None:
        key = self.where.pop(job.id)
        chain = self.chains[key]
        k = (job.submitted_at, job.id)
        pos = bisect_left(chain.keys, k)
        del chain.keys[pos]
        del chain.jobs[pos]
        del chain.prots[pos]
        if not chain.keys:
            del self.chains[key]
        self.count -= 1

    def window(self, gpus: int, free: int, lane: int = 0, narrow: bool = False) -> int:
        """How many jobs at the head of a chain of `gpus`-GPU jobs a cycle may act on, plus one. A
        lane chain (`lane`: its project's debug quota) also has `lane // gpus` jobs, in the narrow
        view too (ADR 0029: see the module docstring). `narrow`: the head of the narrow view, which
        counts at most `NARROW` searches (see `acted_past`)."""
        extra = lane // gpus
        attempts = self.attempts
        if narrow:
            attempts = min(attempts, NARROW)
        return free // gpus + attempts + extra + 1 + SLACK

    def jobs(self, free: int, narrow: bool = False) -> list[PendingJob]:
        """The head of every chain, and its last job (so that "does anything behind this position
        fit?", which ends the cycle's walk, sees every job size where the full queue has it)."""
        out: list[PendingJob] = []
        for chain in self.chains.values():
            k = self.window(chain.gpus, free, chain.lane, narrow)
            jobs = chain.jobs
            if len(jobs) <= k:
                out.extend(jobs)
            else:
                out.extend(jobs[:k])
                out.append(jobs[-1])
        return out

    def backfill_candidates(self, free: int, horizons: Iterable[float], narrow: bool = False) -> list[PendingJob]:
        """Jobs left out by `jobs(free)` that a reservation due in one of `horizons` seconds could
        still admit: work whose protection ends by then may backfill reserved nodes although its
        twins ahead, protected longer, may not. Per chain and per horizon, the first
        `free // gpus + 1 + slack` jobs that may backfill, when they lie beyond the head handed to
        the cycle. Every reservation's horizon counts, not only the latest: the first jobs short
        enough for the latest may all be too long for an earlier one, whose nodes only jobs further
        down the chain may backfill."""
        out: list[PendingJob] = []
        limits = sorted(set(horizons))
        for chain in self.chains.values():
            k = self.window(chain.gpus, free, chain.lane, narrow)
            last = len(chain.jobs) - 1
            if last < k:
                continue
            prots = chain.prots
            taken: set[int] = set()
            per_horizon = free // chain.gpus + 1 + SLACK
            for horizon in limits:
                need = per_horizon
                for i, p in enumerate(prots):  # a plain loop: compiled, a generator here was a whole list
                    if p > horizon:
                        continue
                    if need == 0:
                        break
                    need -= 1
                    if k <= i < last:
                        taken.add(i)
            out.extend(chain.jobs[i] for i in sorted(taken))
        return out

    def acted_past(self, acted: Iterable[str], free: int) -> bool:
        """Could the full view decide differently from the narrow one, given the jobs a cycle on the
        narrow view acted on (placed, made room for, reserved for)? Yes when, in a chain the narrow
        view cut, the cycle acted on its last job or on all but `SLACK` of its head: then a twin
        behind the head might have been acted on too. Otherwise some twin at the head was left
        without an action (tried and failed, or never reached) and, twins being alike, so would
        every twin behind it (see the module docstring): the decisions are those of the full view."""
        count: dict[ChainKey, int] = {}
        where = self.where
        for job_id in acted:
            key = where.get(job_id)
            if key is not None:
                count[key] = count.get(key, 0) + 1
        for key, n in count.items():
            chain = self.chains[key]
            k = self.window(chain.gpus, free, chain.lane, True)
            if len(chain.jobs) <= k:
                continue  # handed whole
            if n >= k - SLACK or chain.jobs[-1].id in acted:
                return True
        return False

    def lane_jobs(self, project: str) -> Iterator[PendingJob]:
        """The waiting debug work of `project` (its lane chains), every job."""
        for key, chain in self.chains.items():
            if key[0] == project and key[-1]:
                yield from chain.jobs

    def all_jobs(self) -> list[PendingJob]:
        return [j for chain in self.chains.values() for j in chain.jobs]
