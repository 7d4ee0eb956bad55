"""`make demo`: the walking skeleton on the reference scenario's tree and cluster, through the real stack.

It applies the allocation tree and the cluster of ../shared/data/scenarios/philly.yaml, submits a few
jobs with the CLI (each goes API -> Kafka -> ledger -> store -> scheduler -> Temporal -> executor),
waits for them to finish and prints what happened and where the API is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from steward.config import REPO_ROOT, get_settings

SCENARIO = REPO_ROOT.parent / "shared" / "data" / "scenarios" / "philly.yaml"

DEMO_JOBS = [
    ("ee9e8c", 2, 600, ["bash", "-c", "echo training on GPUs $CUDA_VISIBLE_DEVICES; sleep 2"]),
    ("b436b2", 8, 3600, ["bash", "-c", "echo a whole node: $CUDA_VISIBLE_DEVICES; sleep 3"]),
    ("6c71a0", 1, 0, ["python3", "-c", "import os; print('unfunded debug on', os.environ['CUDA_VISIBLE_DEVICES'])"]),
    ("7f04ca", 4, 1800, ["bash", "-c", "exit 3"]),
]


def steward(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"demo: `steward {' '.join(args)}` failed")
    return proc.stdout


def main(scenario: Path = SCENARIO) -> int:
    settings = get_settings()
    print(f"applying the allocation tree and cluster of {scenario}")
    steward("tree", "apply", str(scenario), "--reason", "demo setup")
    steward("cluster", "apply", str(scenario))
    ids = []
    for project, gpus, min_runtime, command in DEMO_JOBS:
        out = steward("submit", "--project", project, "--gpus", str(gpus), "--min-runtime", str(min_runtime),
                      "--output", "json", "--", *command)
        ids.append(json.loads(out)["id"])
    print(f"submitted {len(ids)} jobs; waiting for them to finish")
    deadline = time.monotonic() + 120
    jobs: dict[str, dict[str, object]] = {}
    while time.monotonic() < deadline:
        jobs = {i: json.loads(steward("job", "show", i, "--output", "json")) for i in ids}
        if all(j["state"] in ("COMPLETED", "FAILED", "CANCELLED") for j in jobs.values()):
            break
        time.sleep(1)
    print()
    print(f"{'JOB':16} {'PROJECT':8} {'GPUS':>4}  {'STATE':10} {'EXIT':>4}  EVENTS")
    for i in ids:
        j = jobs[i]
        events = " > ".join(str(e["type"]) for e in j["events"])  # type: ignore[attr-defined]
        print(f"{i:16} {j['project']!s:8} {j['gpus']!s:>4}  {j['state']!s:10} {j['exitCode']!s:>4}  {events}")
    print()
    print(f"UI:            http://{settings.api_host}:{settings.api_port}/  (sign in with the token below)")
    print(f"API (GraphQL): {settings.resolved_api_url}")
    print(f"admin token:   {settings.run_dir / 'token'}  (`steward token create --role ROLE` makes others)")
    print(f"job logs:      {settings.run_dir}/executor/{settings.executor_id}/jobs/<job>/")
    print("try:          .venv/bin/steward jobs    |    .venv/bin/steward job show <id>    |    make down")
    unfinished = [i for i in ids if jobs[i]["state"] not in ("COMPLETED", "FAILED", "CANCELLED")]
    return 1 if unfinished else 0


if __name__ == "__main__":
    raise SystemExit(main())
