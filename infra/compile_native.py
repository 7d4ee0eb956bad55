"""`make compile`: build the mypyc extensions of steward.native.COMPILED in place (ADR 0020).

Does nothing when the build on disk matches its sources (steward.native.stale_reason is None);
otherwise removes the stamp first (a failed or interrupted build leaves the pure sources in force),
compiles every module of COMPILED into one group library, and writes the stamp with the digest of
the sources taken before compiling. `--force` rebuilds anyway; `--clean` removes the build.
Run from the repository root with the project's interpreter (`.venv/bin/python infra/compile_native.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import sysconfig
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ROOT / "services"
sys.path.insert(0, str(SERVICES))
os.environ["STEWARD_PURE"] = "1"  # this process imports steward.native only; never the binaries it replaces

from steward import native  # noqa: E402

# mypy settings for the build only: the project's pyproject config names modules this build does not
# compile (warn_unused_configs would fail it); type errors are the typecheck target's job
MYPY_CONFIG = "[mypy]\npython_version = 3.11\nignore_missing_imports = True\n"
BUILD = ROOT / "build" / "native"  # generated C and objects (git-ignored)


def clean() -> None:
    (SERVICES / "steward" / native.STAMP_NAME).unlink(missing_ok=True)
    for p in native.built_binaries(SERVICES):
        p.unlink()


def toolchain_problem() -> str | None:
    """What is missing to compile C extensions for this interpreter (None: nothing)."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler: {compiler!r} is not on PATH (Debian: apt-get install gcc)"
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.is_file():
        return f"no Python headers: {header} is missing (Debian: apt-get install python3-dev)"
    return None


def build() -> float:
    from mypyc.build import mypycify
    from setuptools import setup

    clean()  # the stamp first; binaries of modules no longer compiled with it
    stamp_path = SERVICES / "steward" / native.STAMP_NAME
    digest = native.sources_digest(SERVICES, native.COMPILED)
    paths = [str(native.source_path(SERVICES, m).relative_to(ROOT)) for m in native.COMPILED]
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "mypy.ini").write_text(MYPY_CONFIG)
    t0 = time.monotonic()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # setuptools' notes on pyproject.toml's [tool.setuptools]
            setup(name="steward-native", package_dir={"": "services"},
                  ext_modules=mypycify(["--config-file", str(BUILD / "mypy.ini"), *paths], opt_level="3",
                                       group_name=native.GROUP, target_dir=str(BUILD)),
                  script_args=["-q", "build_ext", "--inplace", "--build-temp", str(BUILD / "temp")])
    finally:
        os.chdir(cwd)
    if digest != native.sources_digest(SERVICES, native.COMPILED):
        raise SystemExit("compile_native: a source changed during the build; run `make compile` again")
    stamp_path.write_text(json.dumps(native.make_stamp(SERVICES, native.COMPILED, digest), indent=1) + "\n")
    return time.monotonic() - t0


def main() -> int:
    p = argparse.ArgumentParser(prog="compile_native", description=__doc__.splitlines()[0])
    p.add_argument("--force", action="store_true", help="rebuild even when the build matches its sources")
    p.add_argument("--clean", action="store_true", help="remove the binaries and the stamp (pure sources)")
    args = p.parse_args()
    if args.clean:
        clean()
        print("compile_native: removed; the pure sources run")
        return 0
    reason = native.stale_reason(SERVICES)
    if reason is None and not args.force:
        print("compile_native: up to date")
        return 0
    problem = toolchain_problem()
    if problem is not None:
        raise SystemExit(f"compile_native: cannot build: {problem} (the pure .py sources run until then)")
    print(f"compile_native: building {len(native.COMPILED)} modules with mypyc ({reason or '--force'})", flush=True)
    took = build()
    left = native.stale_reason(SERVICES)
    if left is not None:
        raise SystemExit(f"compile_native: the new build does not pass the guard: {left}")
    print(f"compile_native: built in {took:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
