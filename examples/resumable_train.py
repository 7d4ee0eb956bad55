#!/usr/bin/env python3
"""A sample resumable job: a training-like loop that saves its step to $STEWARD_CHECKPOINT_DIR when asked
to checkpoint (SIGTERM), and resumes from it on its next start.

    steward submit -p PROJECT -g 1 --min-runtime 600 --resumable -- \\
        python3 "$PWD/examples/resumable_train.py" --steps 100000 --step-s 0.1

Options: --steps N (0: forever), --step-s seconds per step, --work-fraction share of each step spent
computing (the rest sleeping), --checkpoint-every K steps (0: only when asked), --save-delay seconds a
checkpoint takes, --idle-after K (stop computing after K steps: an idle interactive session).
Output: one line per step, "resumed from step N" or "starting from step 0", "checkpointed at step N".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

STATE = "state.json"


def checkpoint_dir() -> Path:
    folder = Path(os.environ.get("STEWARD_CHECKPOINT_DIR", ".checkpoint"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def load_step(folder: Path) -> int:
    try:
        return int(json.loads((folder / STATE).read_text())["step"])
    except (OSError, ValueError, KeyError):
        return 0


def save_step(folder: Path, step: int, delay_s: float) -> None:
    time.sleep(delay_s)  # a real model takes a while to write
    tmp = folder / (STATE + ".tmp")
    tmp.write_text(json.dumps({"step": step, "saved_at": time.time(), "pid": os.getpid()}))
    os.replace(tmp, folder / STATE)


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--work-fraction", type=float, default=0.5)
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--save-delay", type=float, default=0.0)
    ap.add_argument("--idle-after", type=int, default=0)
    args = ap.parse_args(argv)

    asked = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal asked
        asked = True
        print(f"received {signal.Signals(signum).name}", flush=True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)
    folder = checkpoint_dir()
    step = load_step(folder)
    print(f"resumed from step {step}" if step else "starting from step 0", flush=True)
    while not args.steps or step < args.steps:
        if asked:
            save_step(folder, step, args.save_delay)
            print(f"checkpointed at step {step}", flush=True)
            return 0
        idle = bool(args.idle_after) and step >= args.idle_after
        if idle:
            time.sleep(args.step_s)
        else:
            busy(args.step_s * args.work_fraction)
            time.sleep(args.step_s * (1 - args.work_fraction))
            step += 1
            print(f"step {step}", flush=True)
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                save_step(folder, step, 0.0)
    save_step(folder, step, 0.0)
    print(f"done at step {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
