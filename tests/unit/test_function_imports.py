"""A function-level import across packages hides a dependency from whoever reads the top of the module
(issue 20, ADR 0040): it is allowed only with a one-line reason, `# lazy: <reason>`, on the import's first
line or on the line just above its block of imports. Imports inside one package (steward.api -> steward.api)
are the package's own business and are not checked; `lint-imports` (make lint) checks the direction of
every import, function-level ones included."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "services" / "steward", ROOT / "workflows" / "steward_workflows")
MARK = "# lazy:"


@dataclass(frozen=True)
class Hidden:
    where: str
    target: str

    def __str__(self) -> str:
        return f"{self.where}: imports {self.target} inside a function without a '{MARK} <reason>' comment"


def module_name(path: Path) -> str:
    root = next(s for s in SOURCES if path.is_relative_to(s))
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """steward.api.app -> steward.api; steward.config -> steward.config; steward_workflows.x -> steward_workflows."""
    parts = module.split(".")
    return parts[0] if parts[0] == "steward_workflows" else ".".join(parts[:2])


def targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        return [".".join([*base, node.module] if node.module else base)]
    if node.module in ("steward", "steward_workflows"):  # `from steward import metrics`: the module named
        return [f"{node.module}.{a.name}" for a in node.names]
    return [node.module or ""]


def ours(name: str) -> bool:
    return name.split(".")[0] in ("steward", "steward_workflows") and "." in name


def statement_lists(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every list of statements inside a function (its body, and the bodies of its if/try/with/for...)."""
    out: list[list[ast.stmt]] = []
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def hidden_imports(path: Path) -> list[Hidden]:
    source = path.read_text()
    lines = source.splitlines()
    module = module_name(path)
    own = package_of(module)
    found: list[Hidden] = []
    seen: set[int] = set()
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for block in statement_lists(fn):
            start: int | None = None  # the first line of the current run of imports
            for stmt in block:
                if not isinstance(stmt, ast.Import | ast.ImportFrom):
                    start = None
                    continue
                start = stmt.lineno if start is None else start
                if stmt.lineno in seen:
                    continue
                seen.add(stmt.lineno)
                above = lines[start - 2].strip() if start >= 2 else ""
                marked = MARK in lines[stmt.lineno - 1] or above.startswith(MARK)
                for target in targets(stmt, module, path.name == "__init__.py"):
                    if ours(target) and package_of(target) != own and not marked:
                        found.append(Hidden(f"{path.relative_to(ROOT)}:{stmt.lineno}", target))
    return found


def test_every_cross_package_function_level_import_gives_its_reason() -> None:
    hidden = [h for src in SOURCES for path in sorted(src.rglob("*.py")) for h in hidden_imports(path)]
    assert not hidden, "\n".join(map(str, hidden))


@pytest.mark.parametrize(("code", "expected"), [
    ("def f():\n    from steward.store.eventstore import EventStore\n", 1),
    ("def f():\n    # lazy: the store only when asked\n    from steward.store.eventstore import EventStore\n", 0),
    ("def f():\n    from steward.store.eventstore import EventStore  # lazy: start-up\n", 0),
    ("def f():\n    # lazy: start-up\n    from steward.store import schema\n    from steward.bus.kafka import x\n", 0),
    ("def f():\n    # lazy: start-up\n    from steward.store import schema\n    y = 1\n"
     "    from steward.bus import x\n", 1),
    ("def f():\n    from steward.api.figures import HOUR\n", 0),  # inside the package
    ("def f():\n    from . import figures\n", 0),
    ("def f():\n    from steward import metrics\n", 1),
    ("def f():\n    if True:\n        from steward_workflows.payloads import X\n", 1),
    ("from steward.store.eventstore import EventStore\n", 0),  # module top: lint-imports' business
    ("def f():\n    import json\n", 0),
])
def test_the_check_finds_what_it_should(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str,
                                        expected: int) -> None:
    pkg = tmp_path / "steward"
    (pkg / "api").mkdir(parents=True)
    path = pkg / "api" / "probe.py"
    path.write_text(code)
    monkeypatch.setattr(f"{__name__}.SOURCES", (pkg,))
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert len(hidden_imports(path)) == expected
