"""The record classes whose `__init__` is generated from their dataclass fields into the class (so that,
compiled, it is a native slot write: ADR 0020, ADR 0042; infra/generate_inits.py) take exactly the fields, in
order, with the fields' defaults, and set each one; the generator writes what the fields say and `--check`
finds a stale one."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

import steward
from steward.native import GENERATED_INITS

SERVICES = Path(steward.__file__).resolve().parent.parent
WRITTEN = list(GENERATED_INITS)


def declared(module: str) -> Any:
    """The module run from its source under another name (a compiled class shows no Python signature)."""
    name = "_declared_" + module.replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, SERVICES.joinpath(*module.split(".")).with_suffix(".py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve the annotations through it
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("module", "name"), WRITTEN)
def test_the_written_init_takes_the_fields_with_their_defaults(module: str, name: str) -> None:
    cls = getattr(declared(module), name)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert p.default is None, f.name  # None stands for a fresh default, as the factory makes it
        else:
            assert p.default is inspect.Parameter.empty, f.name


@pytest.mark.parametrize(("module", "name"), WRITTEN)
def test_the_written_init_sets_every_field_and_defaults_as_the_dataclass(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    hints = {f.name: str(f.type) for f in dataclasses.fields(getattr(declared(module), name))}
    index = {f.name: i for i, f in enumerate(fields)}

    def sample(field: str) -> Any:
        """A value of the field's declared type that no other field gets (a swap would show)."""
        i, text = index[field], hints[field]
        if text.startswith("int"):
            return 100 + i
        if text.startswith("float"):
            return i + 0.5
        if text.startswith("str"):
            return f"s{i}"
        if text.startswith("bool"):
            return i % 2 == 0
        if text.startswith("dict"):
            return {f"k{i}": i}
        return (f"t{i}",) if text.startswith("tuple") else [i]

    given = {f.name: sample(f.name) for f in required}
    obj = cls(*given.values())
    for f in fields:
        if f.name in given:
            assert getattr(obj, f.name) == given[f.name]
        elif f.default is not dataclasses.MISSING:
            assert getattr(obj, f.name) == f.default
        else:
            assert getattr(obj, f.name) == f.default_factory()  # type: ignore[misc]
    everything = {f.name: sample(f.name) for f in fields}
    full = cls(*everything.values())
    assert [getattr(full, f.name) for f in fields] == list(everything.values())
    assert dataclasses.replace(full) == full
    if cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(full, fields[0].name, fields[0].default)


def generator() -> Any:
    """infra/generate_inits.py, loaded from its file (infra/ is not a package)."""
    path = SERVICES.parent / "infra" / "generate_inits.py"
    spec = importlib.util.spec_from_file_location("_generate_inits", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_generate_inits"] = mod  # its dataclass resolves its annotations through it
    spec.loader.exec_module(mod)
    return mod


SAMPLE = '''from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True, slots=True, init=False)
class Point:
    NAME: ClassVar[str] = "point"
    x: int
    label: str | None = None
    tags: dict[str, int] = field(default_factory=dict)

    def norm(self) -> int:
        return self.x
'''


def test_the_generator_writes_the_init_the_fields_give_and_rewrites_it_when_they_change() -> None:
    gen = generator()
    once = gen.with_generated(SAMPLE, "Point")
    assert gen.with_generated(once, "Point") == once  # idempotent: `--check` passes on its own output
    namespace: dict[str, Any] = {}
    exec(compile(once, "<sample>", "exec"), namespace)  # the generated text runs
    point = namespace["Point"](3)
    assert (point.x, point.label, point.tags) == (3, None, {})
    assert namespace["Point"](3, tags=None).tags == {}
    assert "NAME" not in once.split(gen.BEGIN)[1]  # class variables are no fields
    moved = once.replace("    label: str | None = None\n", "    label: str | None = None\n    size: float = 1.0\n")
    again = gen.with_generated(moved, "Point")
    assert again != moved
    assert "        size: float = 1.0,\n" in again
    assert 'object.__setattr__(self, "size", size)' in again
    assert again.count(gen.BEGIN) == 1


@pytest.mark.parametrize(("source", "problem"), [
    (SAMPLE.replace(", init=False", ""), "init=False"),
    (SAMPLE.replace("    tags: dict", "    first: int\n    tags: dict"), "follows one with a default"),
    (SAMPLE.replace("field(default_factory=dict)", "field(default=None)"), "only field\\(default_factory"),
])
def test_the_generator_refuses_a_declaration_it_cannot_write(source: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        generator().with_generated(source, "Point")


def test_the_committed_inits_are_what_the_fields_give() -> None:
    """What `make lint` checks (`infra/generate_inits.py --check`)."""
    gen = generator()
    for module, name in GENERATED_INITS:
        source = SERVICES.joinpath(*module.split(".")).with_suffix(".py").read_text()
        assert gen.with_generated(source, name) == source, f"{module}.{name}: run `make compile`"
