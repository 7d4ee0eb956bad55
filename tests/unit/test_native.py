"""The compiled build's stale-binary guard (steward.native, ADR 0020): a compiled module runs only while
the stamp written at build time matches every compiled source and binary on disk; otherwise, or with
STEWARD_PURE=1, every compiled module is loaded from its .py source (all or nothing)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from steward import native

MODULES = ("steward.policy.alpha", "steward.sim.beta")
SERVICES = native.source_root()
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]

# prints, for a fresh interpreter on PYTHONPATH: the guard's reason (or null), each compiled module's
# file suffix after importing it, and whether mypyc's group library was loaded
PROBE = """
import importlib, json, sys
import steward.native as n
files = {m: importlib.import_module(m).__file__ for m in n.COMPILED}
guard = n.active_guard()
print(json.dumps({"reason": guard.reason if guard else None,
                  "pure": sorted(m for m, f in files.items() if f.endswith(".py")),
                  "group_loaded": n.GROUP + "__mypyc" in sys.modules}))
"""


def probe(pythonpath: Path, **env: str) -> dict[str, object]:
    full = {k: v for k, v in os.environ.items() if k not in (native.PURE_ENV, "PYTHONPATH")}
    full.update(env, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def fake_build(root: Path) -> None:
    """A tree shaped like a build of MODULES: sources, one binary each, the group library, the stamp."""
    for m in MODULES:
        src = native.source_path(root, m)
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(f"X = {m!r}\n")
    for p in native.binary_paths(root, MODULES):
        p.write_bytes(b"\x7fELF" + p.name.encode())
    stamp = native.make_stamp(root, MODULES, native.sources_digest(root, MODULES))
    (root / "steward" / native.STAMP_NAME).write_text(json.dumps(stamp))


def edit_source(root: Path) -> None:
    with native.source_path(root, MODULES[1]).open("a") as f:
        f.write("# edited after the build\n")


def replace_binary(root: Path) -> None:
    native.binary_paths(root, MODULES)[0].write_bytes(b"\x7fELF another build, longer")


def leave_old_binary(root: Path) -> None:
    """steward.sim.gamma was compiled by an older build and is not any more; its binary stayed."""
    gamma = native.source_path(root, "steward.sim.gamma")
    gamma.write_text("X = 1\n")
    gamma.with_name("gamma" + SUFFIX).write_bytes(b"\x7fELF old")


def stamp_field(key: str, value: object) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        path = root / "steward" / native.STAMP_NAME
        stamp = json.loads(path.read_text())
        stamp[key] = value
        path.write_text(json.dumps(stamp))
    return change


CASES: list[tuple[str, Callable[[Path], object], str | None]] = [
    ("untouched build", lambda root: None, None),
    ("source edited", edit_source, "sources changed since the build: steward.sim.beta"),
    ("binary replaced", replace_binary, "the binaries are not the ones the stamp recorded"),
    ("group library gone", lambda root: native.binary_paths(root, MODULES)[-1].unlink(), "missing file"),
    ("no stamp", lambda root: (root / "steward" / native.STAMP_NAME).unlink(), "not compiled (no stamp)"),
    ("garbled stamp", lambda root: (root / "steward" / native.STAMP_NAME).write_text("{"), "unreadable stamp"),
    ("other module list", stamp_field("modules", ["steward.policy.alpha"]), "other modules"),
    ("binary of a module not compiled", leave_old_binary, f"does not name: steward/sim/gamma{SUFFIX}"),
    ("other interpreter", stamp_field("python", "cpython-399"), "built for cpython-399"),
]


@pytest.mark.parametrize(("case", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_stamp_decides_whether_the_build_may_run(
        tmp_path: Path, case: str, change: Callable[[Path], object], expected: str | None) -> None:
    fake_build(tmp_path)
    change(tmp_path)
    reason = native.stale_reason(tmp_path, MODULES)
    if expected is None:
        assert reason is None, case
    else:
        assert reason is not None and expected in reason, (case, reason)


def test_the_finder_loads_steward_modules_from_their_sources_whatever_binary_lies_next_to_them(
        tmp_path: Path) -> None:
    fake_build(tmp_path)
    leave_old_binary(tmp_path)
    finder = native.PureSourceFinder(tmp_path, "test")
    for name in ("steward.sim.beta", "steward.sim.gamma"):
        spec = finder.find_spec(name)
        assert spec is not None and spec.origin == str(native.source_path(tmp_path, name))
    assert finder.find_spec("steward.sim") is None  # a package: the usual finders
    assert finder.find_spec("stewardship.x") is None


def test_steward_pure_runs_every_compiled_module_from_source() -> None:
    result = probe(SERVICES, **{native.PURE_ENV: "1"})
    assert result == {"reason": "STEWARD_PURE=1", "pure": sorted(native.COMPILED), "group_loaded": False}


compiled = pytest.mark.skipif(native.stale_reason(SERVICES) is not None,
                              reason="no current compiled build here (`make compile`)")


@compiled
def test_a_current_build_runs_compiled() -> None:
    assert probe(SERVICES) == {"reason": None, "pure": [], "group_loaded": True}


@compiled
def test_the_installed_package_runs_compiled_without_the_source_root_on_the_path(tmp_path: Path) -> None:
    """As `steward` runs from its console script: only the editable install's finder, which maps the
    `steward` package but not mypyc's group library beside it (this failed with "No module named
    'steward_native__mypyc'" while every test with the source root on its path passed)."""
    env = {k: v for k, v in os.environ.items() if k not in (native.PURE_ENV, "PYTHONPATH")}
    where = subprocess.run([sys.executable, "-c", "import steward.native as n; print(n.source_root())"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    if Path(where) != SERVICES:
        pytest.skip(f"the installed steward is {where}, not this tree")
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"reason": None, "pure": [], "group_loaded": True}


@compiled
@pytest.mark.parametrize("module", ["steward.policy.lane", "steward.domain.state", "steward.store.encoding",
                                    "steward.bus.envelope", "steward.store.copytext",
                                    "steward.domain.decoding"])
def test_after_a_source_edit_every_compiled_module_runs_from_source(tmp_path: Path, module: str) -> None:
    """A copy of the built tree (binaries keep their mtimes), then one source edited as a developer would:
    a policy module, or one of the ledger's (ADR 0020's second group: the domain, the store's encoding; the
    writer's COPY text, ADR 0022; the command decoder, ADR 0027)."""
    shutil.copytree(SERVICES / "steward", tmp_path / "steward", ignore=shutil.ignore_patterns("__pycache__"))
    group = native.binary_paths(SERVICES, native.COMPILED)[-1]
    shutil.copy2(group, tmp_path / group.name)
    assert probe(tmp_path)["reason"] is None  # the copy is still a current build

    edited = native.source_path(tmp_path, module)
    edited.write_text(edited.read_text() + "\n# edited\n")
    result = probe(tmp_path)
    assert result == {"reason": f"sources changed since the build: {module}",
                      "pure": sorted(native.COMPILED), "group_loaded": False}


@pytest.mark.skipif(os.environ.get("STEWARD_EXPECT_NATIVE") != "1", reason="only where the build is required")
def test_the_required_build_is_the_one_running() -> None:
    """`make test` sets STEWARD_EXPECT_NATIVE=1 after `make compile`: the suite must run the compiled build."""
    import steward.domain.state
    import steward.policy.cycle

    assert native.active_guard() is None and native.compiled_in_use(), steward.policy.cycle.__file__
    assert not steward.domain.state.__file__.endswith(".py"), steward.domain.state.__file__
