"""`python -m steward.tools.import_graph`: the house drawn from the code, as a Mermaid diagram.

Reads every module of `steward` and `steward_workflows` (their import statements, function-level ones
included, as `lint-imports` counts them), folds the imports to packages (steward.api, steward.store, ...,
steward_workflows), and draws one arrow per pair of packages with the number of imports on it. The layers
come from the layers contract in pyproject.toml (the one place they are written); an arrow that runs back
up a layer, or between two siblings that must not import each other, is drawn dashed and labelled `UP`.

    python -m steward.tools.import_graph                 # this checkout
    python -m steward.tools.import_graph --root OTHER    # another checkout (e.g. an older commit)
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

PACKAGES = (("services", "steward"), ("workflows", "steward_workflows"))


def modules(root: Path) -> Iterator[tuple[str, Path]]:
    for folder, top in PACKAGES:
        base = root / folder
        for path in sorted((base / top).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "steward_workflows" else ".".join(parts[:2])


def imported(module: str, path: Path) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                yield ".".join([*base, node.module] if node.module else base)
            elif node.module in ("steward", "steward_workflows"):
                yield from (f"{node.module}.{a.name}" for a in node.names)
            elif node.module:
                yield node.module


def package_edges(root: Path) -> Counter[tuple[str, str]]:
    """(importer package, imported package) -> number of import statements, between our packages."""
    ours = {package_of(m) for m, _ in modules(root) if "." in m or m == "steward_workflows"}
    edges: Counter[tuple[str, str]] = Counter()
    for module, path in modules(root):
        for target in imported(module, path):
            a, b = package_of(module), package_of(target)
            if b in ours and a != b and "." in module and target.split(".")[0] in ("steward", "steward_workflows"):
                edges[(a, b)] += 1
    return edges


def layers(pyproject: Path) -> list[list[str]]:
    """The layers contract's layers, top first, each a list of sibling packages."""
    config = tomllib.loads(pyproject.read_text())
    for contract in config.get("tool", {}).get("importlinter", {}).get("contracts", []):
        if contract.get("type") == "layers":
            return [[p.strip() for p in line.replace(":", "|").split("|")] for line in contract["layers"]]
    return []


def _id(package: str) -> str:
    return package.replace(".", "_")


def mermaid(edges: Counter[tuple[str, str]], stack: list[list[str]]) -> str:
    level = {p: i for i, line in enumerate(stack) for p in line}
    packages = sorted({p for e in edges for p in e} | set(level))
    out = ["flowchart TD"]
    for i, line in enumerate(stack):
        out.append(f"  subgraph L{i}[\" \"]")
        out.extend(f"    {_id(p)}[{p.removeprefix('steward.')}]" for p in line if p in packages)
        out.append("  end")
    out.extend(f"  {_id(p)}[{p.removeprefix('steward.')}]" for p in packages if p not in level)
    for (a, b), n in sorted(edges.items()):
        up = a in level and b in level and level[a] >= level[b]
        out.append(f"  {_id(a)} -. UP {n} .-> {_id(b)}" if up else f"  {_id(a)} -- {n} --> {_id(b)}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m steward.tools.import_graph", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3],
                        help="the checkout to draw (default: this one)")
    parser.add_argument("--layers-from", type=Path, default=None, metavar="PYPROJECT",
                        help="the pyproject.toml whose layers group the boxes (default: the root's, else this one's)")
    args = parser.parse_args(argv)
    if not (args.root / "services" / "steward").is_dir():
        parser.exit(2, f"import_graph: {args.root} has no services/steward\n")
    pyproject = args.layers_from or args.root / "pyproject.toml"
    stack = layers(pyproject) or layers(Path(__file__).resolve().parents[3] / "pyproject.toml")
    sys.stdout.write(mermaid(package_edges(args.root), stack))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
