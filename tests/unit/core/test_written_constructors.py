"""The hot dataclasses write their own __init__ (init=False: a dataclass-generated __init__ is
interpreted even in the compiled core, fairshare/scheduler/types.py). Each must take exactly the
dataclass's init fields, in order, with the same defaults (a default_factory=dict field: None, for a
new empty dict), and set every field.

The signatures are read from the source (a compiled __init__ does not show its parameters to inspect)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

import fairshare
from fairshare.models import Workload
from fairshare.scheduler.cycle import _Entry
from fairshare.scheduler.flavor_assigner import GranularMode, PreemptionMode
from fairshare.scheduler.types import (
    Assignment,
    EntryOutcome,
    EntryStatus,
    FlavorChoice,
    Mode,
    PodSetAssignmentResult,
)
from fairshare.workload import WorkloadInfo

SOURCE = Path(fairshare.__file__).parent
WRITTEN: list[tuple[type[Any], str]] = [
    (FlavorChoice, "scheduler/types.py"),
    (PodSetAssignmentResult, "scheduler/types.py"),
    (Assignment, "scheduler/types.py"),
    (EntryOutcome, "scheduler/types.py"),
    (GranularMode, "scheduler/flavor_assigner.py"),
    (Workload, "models.py"),
    (WorkloadInfo, "workload.py"),
]
NO_DEFAULT = object()


def _written_init(class_name: str, path: str) -> ast.FunctionDef:
    """The source of class ``class_name``'s own __init__ in ``path`` (below fairshare/)."""
    tree = ast.parse((SOURCE / path).read_text())
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    [init] = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    return init


def _written_parameters(cls: type[Any], path: str) -> list[tuple[str, object]]:
    init = _written_init(cls.__name__, path)
    args = init.args.args[1:]
    defaults = [NO_DEFAULT] * (len(args) - len(init.args.defaults)) + [
        ast.literal_eval(d) for d in init.args.defaults
    ]
    return [(a.arg, d) for a, d in zip(args, defaults, strict=True)]


def _dataclass_parameters(cls: type[Any]) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            out.append((f.name, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            out.append((f.name, None))
        else:
            out.append((f.name, NO_DEFAULT))
    return out


@pytest.mark.parametrize(("cls", "path"), WRITTEN, ids=lambda c: getattr(c, "__name__", ""))
def test_a_written_constructor_takes_the_dataclass_fields_in_order_with_their_defaults(
    cls: type[Any], path: str
) -> None:
    assert _written_parameters(cls, path) == _dataclass_parameters(cls)


def _examples() -> list[object]:
    wl = Workload("ns", "a", "lq", (), priority=3)
    return [
        FlavorChoice("f", Mode.FIT, 1),
        PodSetAssignmentResult("main", 1, {}, {}),
        Assignment((), 0, {}),
        EntryOutcome("ns/a", "cq", EntryStatus.ADMITTED, ""),
        GranularMode(PreemptionMode.FIT, 0),
        wl,
        WorkloadInfo.pending(wl, "cq"),
    ]


@pytest.mark.parametrize("obj", _examples(), ids=lambda o: type(o).__name__)
def test_a_written_constructor_sets_every_field_and_the_instance_stays_frozen(obj: object) -> None:
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        getattr(obj, f.name)  # set (a missing slot raises AttributeError)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, dataclasses.fields(obj)[0].name, None)  # type: ignore[arg-type]
    assert dataclasses.replace(obj) == obj  # type: ignore[type-var]


def test_a_default_factory_field_gets_a_new_empty_dict_per_instance() -> None:
    a = EntryOutcome("ns/a", "cq", EntryStatus.ADMITTED, "")
    b = EntryOutcome("ns/b", "cq", EntryStatus.ADMITTED, "")
    assert a.reserved == {} and a.reserved is not b.reserved
    wl = Workload("ns", "a", "lq", ())
    assert WorkloadInfo.pending(wl, "cq").usage == {}


def test_an_assignment_computes_its_representative_mode_once_built() -> None:
    fit = PodSetAssignmentResult("main", 1, {"gpu": FlavorChoice("f", Mode.FIT, 0)}, {"gpu": 1000})
    preempt = PodSetAssignmentResult("b", 1, {"gpu": FlavorChoice("f", Mode.PREEMPT, 0)}, {"gpu": 1000})
    assert Assignment((fit,), 0, {}).mode == Mode.FIT
    assert Assignment((fit, preempt), 0, {}).mode == Mode.PREEMPT
    assert Assignment((), 0, {}).mode == Mode.NO_FIT
    assert Assignment((fit,), 0, {}, mode_override=Mode.DEFERRED_FIT).mode == Mode.DEFERRED_FIT


def test_the_cycle_entry_constructor_sets_every_field() -> None:
    init = _written_init("_Entry", "scheduler/cycle.py")
    targets = [t for s in init.body if isinstance(s, ast.Assign) for t in s.targets]
    assigned = {t.attr for t in targets if isinstance(t, ast.Attribute)}
    assert assigned == {f.name for f in dataclasses.fields(_Entry)}
