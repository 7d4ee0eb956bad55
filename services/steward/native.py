"""The compiled build of the hot pure modules (ADR 0020), and the guard that never lets a stale one run.

`make compile` (infra/compile_native.py) compiles `COMPILED` with mypyc into one group library
(`steward_native__mypyc`) plus one small extension per module next to its `.py`, and writes a stamp:
the sha256 of every compiled source and the size and mtime of every binary it produced. Python
imports an extension before a `.py` of the same name, so after anyone edits a source the old binary
would run. `install_guard()` (called by `steward/__init__.py`) therefore checks the stamp once per
process and, when it does not match the files on disk or when `STEWARD_PURE=1`, puts a finder first
on `sys.meta_path` that loads every compiled module from its `.py` source instead (and any other
`steward.*` module with a source, so a binary left over from an older build never runs either; a
build first removes every extension under the package).

It is all or nothing: compiled modules call each other's functions natively inside the group
library, so one module loaded from source next to compiled ones would still run the others' old
code. The `.py` sources remain the specification and the fallback.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# the modules compiled by `make compile` (packages' __init__ stay pure)
COMPILED: tuple[str, ...] = (
    "steward.bus.envelope",
    "steward.domain.budget",
    "steward.domain.clusters",
    "steward.domain.contract",
    "steward.domain.decide",
    "steward.domain.decoding",
    "steward.domain.denials",
    "steward.domain.events",
    "steward.domain.guards",
    "steward.domain.nodes",
    "steward.domain.periods",
    "steward.domain.pins",
    "steward.domain.protection",
    "steward.domain.requests",
    "steward.domain.recorded",
    "steward.domain.sessions",
    "steward.domain.state",
    "steward.domain.todict",
    "steward.ledger.deciding.steps",
    "steward.ledger.intake.recordbatch",
    "steward.policy.churn",
    "steward.policy.contract",
    "steward.policy.cycle",
    "steward.policy.debug_quota",
    "steward.policy.draining",
    "steward.policy.errors",
    "steward.policy.explain",
    "steward.policy.lane",
    "steward.policy.model",
    "steward.policy.ordering",
    "steward.policy.packing",
    "steward.policy.phases.phase1_expire",
    "steward.policy.phases.phase2_order",
    "steward.policy.phases.phase3_rooms",
    "steward.policy.phases.phase4_reserve",
    "steward.policy.phases.phase5_lane",
    "steward.policy.phases.phase6_place",
    "steward.policy.phases.phase7_preempt",
    "steward.policy.phases.phase8_backfill",
    "steward.policy.phases.phase9_explain",
    "steward.policy.placement",
    "steward.policy.plan",
    "steward.policy.preemption",
    "steward.policy.reasons",
    "steward.policy.reservation",
    "steward.policy.routing",
    "steward.policy.sessions",
    "steward.policy.topology",
    "steward.policy.tree",
    "steward.policy.usage",
    "steward.sim.engine",
    "steward.sim.tiresias",
    "steward.sim.usage",
    "steward.sim.view",
    "steward.store.copytext",
    "steward.store.encoding",
    "steward.store.hashing",
    "steward.store.projector",
)
# the records whose `__init__` is generated from their dataclass fields into the class (`make compile` runs
# infra/generate_inits.py; `make lint` fails when one is stale): compiled, a native slot write per field
# instead of the `dataclasses` module's interpreted `__init__` (ADR 0042)
GENERATED_INITS: tuple[tuple[str, str], ...] = (
    ("steward.domain.state", "Job"),
    ("steward.domain.events", "Event"),
    ("steward.store.encoding", "RecordedEvent"),
    ("steward.store.encoding", "PendingAppend"),
    ("steward.bus.envelope", "Envelope"),
)
GROUP = "steward_native"  # mypyc's shared library: `steward_native__mypyc` at the top of the source root
STAMP_NAME = "native-stamp.json"  # in the steward package, next to __init__.py; git-ignored
PURE_ENV = "STEWARD_PURE"


def source_root() -> Path:
    """The directory holding the `steward` package (services/)."""
    return Path(__file__).resolve().parent.parent


def source_path(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def binary_paths(root: Path, modules: Sequence[str]) -> list[Path]:
    """The extensions a build of `modules` puts under `root`: one per module and the group library."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    names = [*modules, f"{GROUP}__mypyc"]
    return [root.joinpath(*m.split(".")).with_name(m.rsplit(".", 1)[-1] + suffix) for m in names]


def sources_digest(root: Path, modules: Sequence[str]) -> dict[str, str]:
    return {m: hashlib.sha256(source_path(root, m).read_bytes()).hexdigest() for m in modules}


def built_binaries(root: Path) -> list[Path]:
    """Every extension under the steward package and every group library: what a new build replaces."""
    found = [p for suffix in importlib.machinery.EXTENSION_SUFFIXES for p in (root / "steward").rglob("*" + suffix)]
    return sorted({*found, *root.glob(f"{GROUP}__mypyc.*")})


def binaries_record(root: Path, modules: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p in binary_paths(root, modules):
        st = p.stat()
        out[str(p.relative_to(root))] = [st.st_size, st.st_mtime_ns]
    return out


def make_stamp(root: Path, modules: Sequence[str], sources: dict[str, str]) -> dict[str, object]:
    """The stamp of a finished build: `sources` is the digest taken *before* compiling them."""
    return {"python": sys.implementation.cache_tag, "modules": list(modules), "sources": sources,
            "binaries": binaries_record(root, modules)}


def stale_reason(root: Path, modules: Sequence[str] = COMPILED) -> str | None:
    """Why the compiled build under `root` must not run (None: it matches its sources and may run)."""
    stamp_path = root / "steward" / STAMP_NAME
    try:
        stamp = json.loads(stamp_path.read_text())
    except FileNotFoundError:
        return "not compiled (no stamp)"
    except (OSError, ValueError) as exc:
        return f"unreadable stamp {stamp_path}: {exc}"
    if not isinstance(stamp, dict) or stamp.get("modules") != list(modules):
        return "the stamp names other modules than steward.native.COMPILED"
    if stamp.get("python") != sys.implementation.cache_tag:
        return f"built for {stamp.get('python')}, running {sys.implementation.cache_tag}"
    try:
        if stamp.get("binaries") != binaries_record(root, modules):
            return "the binaries are not the ones the stamp recorded"
        extra = set(built_binaries(root)) - set(binary_paths(root, modules))
        if extra:
            return "binaries the stamp does not name: " + ", ".join(sorted(str(p.relative_to(root)) for p in extra))
        sources = sources_digest(root, modules)
    except OSError as exc:
        return f"missing file: {exc.filename}"
    changed = [m for m in modules if stamp["sources"].get(m) != sources[m]]
    if changed:
        return "sources changed since the build: " + ", ".join(changed)
    return None


class PureSourceFinder:
    """A meta-path finder that loads every `steward.*` module that has a `.py` source from that source,
    whatever binary lies next to it (the compiled ones, and any left over from an older build)."""

    def __init__(self, root: Path, reason: str) -> None:
        self.root = root
        self.reason = reason

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("steward."):
            return None
        source = source_path(self.root, fullname)
        if not source.is_file():
            return None  # a package (its __init__.py) or not ours: the usual finders
        return importlib.util.spec_from_file_location(fullname, source)


def active_guard() -> PureSourceFinder | None:
    """The finder installed in this process, if the pure sources are in force."""
    return next((f for f in sys.meta_path if isinstance(f, PureSourceFinder)), None)


def load_group_library(root: Path) -> None:
    """Load mypyc's group library from the file the stamp checked. It lies at the top of the source root,
    beside the `steward` package, where an editable install's finder (which maps only the package) does
    not look: without this, `steward` run from its console script failed with "No module named
    'steward_native__mypyc'" while the tests, with the source root on their path, passed."""
    name = f"{GROUP}__mypyc"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, binary_paths(root, ())[-1])
    if spec is None or spec.loader is None:
        raise ImportError(f"steward.native: cannot load the group library {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def install_guard() -> None:
    """Run the pure sources unless the compiled build matches them (and STEWARD_PURE is not 1)."""
    if active_guard() is not None:
        return
    root = source_root()
    reason = "STEWARD_PURE=1" if os.environ.get(PURE_ENV) == "1" else stale_reason(root)
    if reason is None:
        load_group_library(root)
        return
    loaded = [m for m in COMPILED if m in sys.modules]
    if loaded:  # imported before the guard (should not happen: steward/__init__ runs first)
        raise ImportError(f"steward.native: {', '.join(loaded)} imported before the stale-binary guard")
    sys.meta_path.insert(0, PureSourceFinder(root, reason))


def compiled_in_use() -> bool:
    """Whether this process runs the compiled build (for `steward bench` output and the tests)."""
    mod = next((sys.modules[m] for m in COMPILED if m in sys.modules), None)  # any one: all or nothing
    return mod is not None and not str(getattr(mod, "__file__", "")).endswith(".py")
