"""The process a job runs under: `python -m steward.executor.shim --exit-file F --pid-file P
[--spec S] -- CMD...`.

The executor starts it in a new session (its own process group) and signals the group. The shim:
writes its pid, runs CMD as its child, survives the checkpoint signal itself (a handler, not SIG_IGN, so
CMD gets the default dispositions), waits, and writes CMD's exit code to the exit file (atomically) — so
an executor that restarted meanwhile still learns how the attempt ended. SIGKILL ends both, no file.

The shim stays the executor's (its user, its files); CMD does not: the spec file (JSON, written by the
executor beside the exit file, readable by the executor only) gives CMD's environment, built from scratch,
its working folder and, when the executor isolates jobs, the user and group it runs as, with no
supplementary groups and a umask of 077 (`steward.executor.isolation`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT)


def write_atomically(path: Path, data: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def start(command: list[str], spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """CMD as the spec says: its environment (else the shim's), folder, user and group."""
    if "uid" in spec:
        return subprocess.Popen(command, env=spec.get("env"), cwd=spec.get("cwd"), user=int(spec["uid"]),
                                group=int(spec["gid"]), extra_groups=[], umask=0o077)
    return subprocess.Popen(command, env=spec.get("env"), cwd=spec.get("cwd"), umask=0o077 if spec else -1)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        sys.stderr.write("usage: shim --exit-file F --pid-file P -- CMD...\n")
        return 2
    split = argv.index("--")
    opts, command = argv[:split], argv[split + 1:]
    exit_file = Path(opts[opts.index("--exit-file") + 1])
    pid_file = Path(opts[opts.index("--pid-file") + 1])
    spec: dict[str, Any] = {}
    if "--spec" in opts:
        spec = json.loads(Path(opts[opts.index("--spec") + 1]).read_text())
    for sig in FORWARDED:  # the group gets the signal; the shim only outlives it
        signal.signal(sig, lambda *_: None)
    write_atomically(pid_file, {"pid": os.getpid(), "at": time.time()})
    try:
        child = start(command, spec)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        sys.stderr.write(f"steward: cannot start {command[0]!r}: {err}\n")
        write_atomically(exit_file, {"exit_code": 127, "ended_at": time.time(), "error": str(err)})
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:
            continue
    write_atomically(exit_file, {"exit_code": code, "ended_at": time.time()})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
