"""`steward run supervisor`: keeps the stack's own processes running (issue 22 "Replicas and standbys"; ADR 0058).

`steward up` starts it after the ledger, scheduler, worker, executor and API (and their replicas). Every
`tick_s` it looks at each process that has a PID file in the run folder: one whose PID file is there but
whose process is gone died (`steward down` and `stop_own` remove the PID file first, under the process's
lock, so a stop on purpose is never taken for a death). It logs the death, waits the backoff
(`steward.infra.restarts`: 1 s doubling to 30 s, from 1 s again once a process stayed up a minute), starts
the process again exactly as it was started (its spec file: command line, environment, folder), logs the
restart and counts it in `steward_supervisor_restarts_total{process}` on its metrics port.

It supervises the processes `steward up` and the demo start (`ledger`, `scheduler`, `worker`, `executor`,
`api`, `api-N`, `sim-executor`), not itself: a dead supervisor is started again by the next `steward up`,
and the processes run on without it meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from steward.config import Settings
from steward.infra.processes import (
    OWN_PROCESSES,
    STANDBYS,
    Paths,
    pid_alive,
    pid_in_file,
    process_lock,
    spawn,
)
from steward.infra.restarts import Backoff, Watched, delay_of, died, due, restarted
from steward.metrics import serve as serve_metrics

log = logging.getLogger("steward.supervisor")

SUPERVISED_EXTRA = ("sim-executor",)
TICK_S = 0.5
# nothing left to supervise this long (every process stopped on purpose, e.g. by a test's teardown that
# stops the processes one by one): the supervisor ends too instead of idling
IDLE_EXIT_S = 5.0


def supervised(paths: Paths) -> list[str]:
    """The processes to keep running: those of the stack with a PID file (and a spec to restart them with)."""
    replicas = sorted((p.name.removesuffix(".pid") for p in paths.pids.glob("api-*.pid")
                       if p.name.removesuffix(".pid").removeprefix("api-").isdigit()),
                      key=lambda n: int(n.removeprefix("api-")))
    names = [*OWN_PROCESSES, *STANDBYS, *replicas, *SUPERVISED_EXTRA]
    return [n for n in names if paths.pid_file(n).exists() and paths.spec_file(n).exists()]


class Supervisor:
    def __init__(self, paths: Paths, policy: Backoff | None = None,
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.paths = paths
        self.policy = policy or Backoff()
        self.watched: dict[str, Watched] = {}
        self.restarts = Counter("steward_supervisor_restarts", "Processes of the stack the supervisor restarted "
                                "after they died.", ["process"], registry=registry)

    def tick(self, now: float) -> None:
        names = supervised(self.paths)
        for gone in set(self.watched) - set(names):  # stopped on purpose: forget its history
            del self.watched[gone]
        for name in names:
            with process_lock(self.paths, name):
                self._check(name, now)
        self._reap()

    def _check(self, name: str, now: float) -> None:
        pid = pid_in_file(self.paths, name)
        if pid is None:  # stopped on purpose between the listing and the lock
            self.watched.pop(name, None)
            return
        w = self.watched.get(name) or Watched(now)
        if pid_alive(pid):
            self.watched[name] = w if not w.waiting else Watched(now, w.quick_deaths, None, w.restarts)
            return
        if not w.waiting:
            w = died(w, now, self.policy)
            log.warning("%s (pid %d) died; restarting it in %.0f s", name, pid, delay_of(w, now),
                        extra={"supervised": name, "supervised_pid": pid, "delay_s": delay_of(w, now)})
        if due(w, now):
            new = spawn(name, self.paths)
            w = restarted(w, now)
            self.restarts.labels(process=name).inc()
            log.warning("%s restarted as pid %d (restart %d since the supervisor started)", name, new, w.restarts,
                        extra={"supervised": name, "supervised_pid": new, "restarts": w.restarts})
        self.watched[name] = w

    @staticmethod
    def _reap() -> None:
        """The processes it restarted are its children: collect their exit so none lingers as a zombie."""
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass


def run_supervisor(settings: Settings, stop: threading.Event, tick_s: float = TICK_S) -> None:
    paths = Paths(settings.run_dir)
    supervisor = Supervisor(paths)
    serve_metrics("supervisor", settings)
    log.info("supervising the stack's processes in %s: %s", settings.run_dir,
             ", ".join(supervised(paths)) or "none yet")
    idle_since: float | None = None
    while not stop.is_set():
        supervisor.tick(time.time())
        if supervisor.watched:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= IDLE_EXIT_S:
            log.info("nothing left to supervise (every process was stopped on purpose); the supervisor ends")
            return
        stop.wait(tick_s)
    log.info("supervisor stopping; the processes run on")
