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
from fairshare.models import (
    Admission,
    Condition,
    PodSet,
    PodSetAssignment,
    PreemptionReason,
    ResourceQuota,
    Toleration,
    Workload,
)
from fairshare.scheduler.entry import Entry
from fairshare.scheduler.flavor_assigner import GranularMode, PreemptionMode
from fairshare.scheduler.preemption.classical import Variant, _Candidate, _Source
from fairshare.scheduler.preemption.common import PreemptionContext
from fairshare.scheduler.types import (
    AdmissionDecision,
    Assignment,
    CycleResult,
    EntryOutcome,
    EntryStatus,
    FlavorChoice,
    Mode,
    PodSetAssignmentResult,
    PreemptionDecision,
    Target,
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
    (PodSet, "models.py"),
    (Target, "scheduler/types.py"),
    (AdmissionDecision, "scheduler/types.py"),
    (PreemptionDecision, "scheduler/types.py"),
    (CycleResult, "scheduler/types.py"),
    (PreemptionContext, "scheduler/preemption/common.py"),
    (_Candidate, "scheduler/preemption/classical.py"),
    (_Source, "scheduler/preemption/classical.py"),
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
        PodSet("main", 2, (("gpu", 1000),)),
        Target(WorkloadInfo.pending(wl, "cq"), PreemptionReason.IN_CLUSTER_QUEUE),
        AdmissionDecision("ns/a", "cq", Assignment((), 0, {}), WorkloadInfo.pending(wl, "cq")),
        PreemptionDecision("ns/a", "cq", PreemptionReason.IN_CLUSTER_QUEUE, "ns/b", "cq"),
        CycleResult((), (), ()),
        _Candidate(WorkloadInfo.pending(wl, "cq"), None, Variant.WITHIN_CQ),
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


@pytest.mark.parametrize(("cls", "path"), [(Entry, "scheduler/entry.py"),
                                         (PreemptionContext, "scheduler/preemption/common.py")],
                         ids=lambda c: getattr(c, "__name__", ""))
def test_a_mutable_class_constructor_assigns_every_field(cls: type[Any], path: str) -> None:
    init = _written_init(cls.__name__, path)
    targets = [t for s in init.body if isinstance(s, ast.Assign) for t in s.targets]
    assigned = {t.attr for t in targets if isinstance(t, ast.Attribute)}
    assert assigned == {f.name for f in dataclasses.fields(cls)}


def test_a_source_constructor_sets_every_field() -> None:
    init = _written_init("_Source", "scheduler/preemption/classical.py")
    calls = [s.value for s in init.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)]
    set_names = {c.args[1].value for c in calls if isinstance(c.args[1], ast.Constant)}
    assert set_names == {f.name for f in dataclasses.fields(_Source)}


def _every_field_set() -> Workload:
    """A workload with no field at its default, so a field the copy forgets shows."""
    defaults = {f.name: f.default for f in dataclasses.fields(Workload)}
    wl = Workload(
        "ns", "a", "lq", (PodSet("main", 2, (("gpu", 1000),), (("zone", "a"),), (Toleration("k"),), 1),),
        priority=7, creation_timestamp=12.5, uid="u-1", priority_class="high",
        priority_class_kind="WorkloadPriorityClass", active=False, labels=(("team", "r"),),
        admission=Admission("cq", (PodSetAssignment("main", (("gpu", "a100"),), (("gpu", 2000),), 2),)),
        conditions=(Condition("QuotaReserved", True, "", "", 3.0),), requeue_at=40.0, explicit_priority=False,
        priority_boost=2, reclaimable_pods=(("main", 1),), owner_kind="Job", owner_name="j",
        deletion_timestamp=99.0, accumulated_past_execution_seconds=30,
        eviction_stats=(("Preempted", "InClusterQueue", 1),),
    )
    assert all(getattr(wl, name) != default for name, default in defaults.items()), "a field at its default"
    return wl


def test_a_workload_without_admission_is_the_dataclass_replace_of_it() -> None:
    wl = _every_field_set()
    conditions = (Condition("Evicted", True, "Preempted", "", 5.0),)
    stats = (("Preempted", "InCohortReclamation", 2),)
    assert wl.without_admission(conditions, stats) == dataclasses.replace(
        wl, admission=None, conditions=conditions, eviction_stats=stats)
    assert wl.after_eviction("Preempted", "InClusterQueue") == dataclasses.replace(
        wl, admission=None, eviction_stats=(("Preempted", "InClusterQueue", 2),))


def test_a_quota_compares_and_hashes_by_its_three_fields_as_the_dataclass_did() -> None:
    a = ResourceQuota(1000, None, 5)
    others = [ResourceQuota(1000, None, 5), ResourceQuota(1000, 0, 5), ResourceQuota(1000, None, None),
              ResourceQuota(2000, None, 5), (1000, None, 5)]
    assert [a == o for o in others] == [True, False, False, False, False]
    assert [a != o for o in others] == [False, True, True, True, True]
    assert hash(a) == hash((1000, None, 5)) == hash(ResourceQuota(1000, None, 5))  # the dataclass's formula
    assert len({a, ResourceQuota(1000, None, 5)}) == 1
