"""Parse real ``kueue.x-k8s.io/v1beta2`` manifests into a :class:`ClusterState`.

Accepts YAML files (multi-document, or documents that are lists / ``kind: List``) and
plain dicts (the operator and the simulator render manifests in memory). Any bad value
raises :class:`InputError` naming the file, the document (index, kind, name), the field
path and the value; a field that changes admission but is not modelled raises
:class:`UnsupportedError` ("unsupported: <field>").
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from . import yamlfile as _yamlfile
from .errors import InputError, Location, UnsupportedError
from .models import (
    Admission,
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ClusterQueuePreemption,
    ClusterState,
    Cohort,
    Condition,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    FungibilityPreference,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    QueueingStrategy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    Toleration,
    WithinClusterQueue,
    Workload,
    WorkloadPriorityClass,
    cohort_cycle,
)
from .quantity import parse_quantity

KUEUE_API = "kueue.x-k8s.io/v1beta2"
PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Workload")
KueueObject = ResourceFlavor | Cohort | ClusterQueue | LocalQueue | WorkloadPriorityClass | Workload
NamespaceObject = tuple[str, dict[str, str]]  # a core/v1 Namespace: name and labels
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


# --- loading ----------------------------------------------------------------------


def load_yaml_documents(path: str | Path) -> list[dict[str, object]]:
    """All documents of a YAML file as dicts (lists and ``kind: List`` are flattened)."""
    file = str(path)
    return parse_yaml_text(read_text_file(path), file=file)


# One reader for every file (size, binary, UTF-8, depth, alias and duplicate-key checks): yamlfile.py.
read_text_file = _yamlfile.read_text_file
load_yaml_all = _yamlfile.load_yaml_text


def parse_yaml_text(text: str, *, file: str | None = None) -> list[dict[str, object]]:
    return flatten_documents(load_yaml_all(text, file=file), file=file)


def flatten_documents(raw: Iterable[object], *, file: str | None = None) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i, doc in enumerate(raw):
        if doc is None:
            continue
        items: list[object]
        if isinstance(doc, list):
            items = list(doc)
        elif isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            items = list(cast(list[object], doc["items"]))
        else:
            items = [doc]
        for item in items:
            if not isinstance(item, dict):
                raise InputError(
                    "a document must be a mapping (an object)",
                    location=Location(file=file, document=f"document {i + 1}"),
                    value=type(item).__name__,
                )
            out.append(cast(dict[str, object], item))
    return out


def load_manifests(paths: Sequence[str | Path]) -> ClusterState:
    """Parse every Kueue object of the given files into one state (references checked)."""
    builder = StateBuilder()
    for path in paths:
        builder.add_documents(load_yaml_documents(path), file=str(path))
    return builder.build()


def parse_manifests(
    docs: Iterable[Mapping[str, object]], *, file: str | None = None, check_references: bool = True
) -> ClusterState:
    """Parse in-memory manifests (dicts) into a state."""
    builder = StateBuilder()
    builder.add_documents(docs, file=file)
    return builder.build(check_references=check_references)


class StateBuilder:
    """Accumulates parsed objects from several files; ``build()`` checks duplicates and references."""

    def __init__(self) -> None:
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.priority_classes: dict[str, WorkloadPriorityClass] = {}
        self.workloads: dict[str, Workload] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self._where: dict[tuple[str, str], Location] = {}

    def add_documents(
        self, docs: Iterable[Mapping[str, object]], *, file: str | None = None, skip_kinds: Iterable[str] = ()
    ) -> None:
        skip = set(skip_kinds)
        for index, doc in enumerate(docs):
            kind = doc.get("kind")
            # A list or map `kind` is unhashable: let parse_object reject it with its location.
            if isinstance(kind, str) and kind in skip:
                continue
            self.add(parse_object(doc, file=file, index=index), file=file, index=index)

    def add(self, obj: KueueObject | NamespaceObject, *, file: str | None = None, index: int = 0) -> None:
        if isinstance(obj, tuple):
            self.namespace_labels[obj[0]] = obj[1]
            return
        kind = type(obj).__name__
        key = obj.key if isinstance(obj, (LocalQueue, Workload)) else obj.name
        loc = Location(file=file, document=f"document {index + 1} ({kind} {key})")
        table = cast(dict[str, KueueObject], self._table(obj))
        if key in table:
            first = self._where[(kind, key)]
            raise InputError(f"duplicate {kind} {key!r} (first defined in {first.describe()})", location=loc)
        table[key] = obj
        self._where[(kind, key)] = loc

    def _table(self, obj: KueueObject) -> Mapping[str, KueueObject]:
        if isinstance(obj, ResourceFlavor):
            return self.flavors
        if isinstance(obj, Cohort):
            return self.cohorts
        if isinstance(obj, ClusterQueue):
            return self.cluster_queues
        if isinstance(obj, LocalQueue):
            return self.local_queues
        if isinstance(obj, WorkloadPriorityClass):
            return self.priority_classes
        return self.workloads

    def build(self, *, check_references: bool = True) -> ClusterState:
        workloads = dict(self.workloads)
        for key, wl in workloads.items():
            workloads[key] = self._resolve_priority(wl)
        ns_labels: dict[str, dict[str, str]] = {}
        namespaces = (
            {lq.namespace for lq in self.local_queues.values()}
            | {wl.namespace for wl in workloads.values()}
            | set(self.namespace_labels)
        )
        for ns in sorted(namespaces):
            # Kubernetes labels every namespace with its name (NamespaceDefaultLabelName).
            labels = {"kubernetes.io/metadata.name": ns}
            labels.update(self.namespace_labels.get(ns, {}))
            ns_labels[ns] = labels
        state = ClusterState(
            flavors=dict(self.flavors),
            cohorts=dict(self.cohorts),
            cluster_queues=dict(self.cluster_queues),
            local_queues=dict(self.local_queues),
            priority_classes=dict(self.priority_classes),
            workloads=workloads,
            namespace_labels=ns_labels,
        )
        if check_references:
            self._check_references(state)
        return state

    def _resolve_priority(self, wl: Workload) -> Workload:
        if wl.priority_class is None or wl.priority_class_kind != "WorkloadPriorityClass":
            return wl
        wpc = self.priority_classes.get(wl.priority_class)
        loc = self._where[("Workload", wl.key)]
        if wpc is None:
            raise InputError(
                f"WorkloadPriorityClass {wl.priority_class!r} does not exist",
                location=Location(loc.file, loc.document, "spec.priorityClassRef.name"),
            )
        if not wl.explicit_priority:
            return dataclasses.replace(wl, priority=wpc.value, explicit_priority=True)
        if wl.priority != wpc.value:
            raise InputError(
                f"spec.priority disagrees with WorkloadPriorityClass {wpc.name!r} (value {wpc.value})",
                value=wl.priority,
                location=Location(loc.file, loc.document, "spec.priority"),
            )
        return wl

    def _check_references(self, state: ClusterState) -> None:
        self._check_cohort_cycles(state)
        # ClusterQueues and Cohorts share the resourceGroups shape: every flavor they name must exist.
        quota_holders: list[tuple[str, str, tuple[ResourceGroup, ...]]] = [
            *(("ClusterQueue", name, cq.resource_groups) for name, cq in state.cluster_queues.items()),
            *(("Cohort", name, cohort.resource_groups) for name, cohort in state.cohorts.items()),
        ]
        for kind, name, groups in quota_holders:
            loc = self._where[(kind, name)]
            for gi, group in enumerate(groups):
                for fi, flavor in enumerate(group.flavors):
                    if flavor.name not in state.flavors:
                        raise InputError(
                            f"ResourceFlavor {flavor.name!r} does not exist",
                            location=Location(
                                loc.file, loc.document, f"spec.resourceGroups[{gi}].flavors[{fi}].name"
                            ),
                        )
        for key, lq in state.local_queues.items():
            if lq.cluster_queue not in state.cluster_queues:
                loc = self._where[("LocalQueue", key)]
                raise InputError(
                    f"ClusterQueue {lq.cluster_queue!r} does not exist",
                    location=Location(loc.file, loc.document, "spec.clusterQueue"),
                )
        for key, wl in state.workloads.items():
            loc = self._where[("Workload", key)]
            if wl.admission is not None:
                if wl.admission.cluster_queue not in state.cluster_queues:
                    raise InputError(
                        f"ClusterQueue {wl.admission.cluster_queue!r} does not exist",
                        location=Location(loc.file, loc.document, "status.admission.clusterQueue"),
                    )
                for pi, psa in enumerate(wl.admission.pod_set_assignments):
                    for resource, fname in psa.flavors:
                        if fname not in state.flavors:
                            raise InputError(
                                f"ResourceFlavor {fname!r} does not exist",
                                location=Location(
                                    loc.file,
                                    loc.document,
                                    f"status.admission.podSetAssignments[{pi}].flavors.{resource}",
                                ),
                            )
            elif not wl.queue_name and not wl.is_finished:
                # Without a queue Kueue never queues it (a typo such as `queuename:` is ignored as unknown).
                raise InputError(
                    "required field is missing: a pending Workload names its LocalQueue",
                    location=Location(loc.file, loc.document, "spec.queueName"),
                )
            elif wl.local_queue_key not in state.local_queues and not wl.is_finished:
                raise InputError(
                    f"LocalQueue {wl.local_queue_key!r} does not exist",
                    location=Location(loc.file, loc.document, "spec.queueName"),
                )


    def _check_cohort_cycles(self, state: ClusterState) -> None:
        # Kueue refuses a Cohort whose parent chain loops (pkg/cache/hierarchy: cycle => inactive); we name
        # the first Cohort (in name order) found on a loop, so the message is the same for any file order.
        cycle = cohort_cycle({name: c.parent for name, c in state.cohorts.items()})
        if cycle is not None:
            loc = self._where[("Cohort", cycle[0])]
            raise InputError("cohort parents form a cycle: " + " -> ".join(cycle),
                             location=Location(loc.file, loc.document, "spec.parentName"),
                             value=state.cohorts[cycle[0]].parent)


# --- one document ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Ctx:
    file: str | None
    document: str

    def err(self, message: str, path: str, value: object = None, *, has_value: bool = False) -> InputError:
        return InputError(
            message,
            location=Location(self.file, self.document, path or None),
            value=value,
            has_value=has_value,
        )

    def unsupported(self, path: str) -> UnsupportedError:
        return UnsupportedError(f"unsupported: {path}", location=Location(self.file, self.document, path))


def parse_object(
    doc: Mapping[str, object], *, file: str | None = None, index: int = 0
) -> KueueObject | NamespaceObject:
    """Parse one manifest dict into a model (or a Namespace's labels)."""
    kind = doc.get("kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    label = f"document {index + 1}"
    if isinstance(kind, str):
        label += f" ({kind}{' ' + str(name) if name else ''})"
    ctx = _Ctx(file, label)
    api = doc.get("apiVersion")
    if kind == "Namespace" and api == "v1":
        m = _mapping(ctx, doc, "metadata", required=True)
        return (_name(ctx, m, "metadata"), _str_map(ctx, m, "labels", "metadata"))
    if kind not in KUEUE_KINDS:
        raise ctx.err(
            f"unknown kind (expected one of {', '.join(KUEUE_KINDS)})", "kind", kind, has_value=True
        )
    if api != KUEUE_API:
        raise ctx.err(f"unsupported apiVersion (expected {KUEUE_API})", "apiVersion", api, has_value=True)
    try:
        if kind == "ResourceFlavor":
            return _flavor(ctx, doc)
        if kind == "Cohort":
            return _cohort(ctx, doc)
        if kind == "ClusterQueue":
            return _cluster_queue(ctx, doc)
        if kind == "LocalQueue":
            return _local_queue(ctx, doc)
        if kind == "WorkloadPriorityClass":
            return _priority_class(ctx, doc)
        return _workload(ctx, doc)
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as err:  # defensive: never a traceback
        raise ctx.err(f"invalid object: {err}", "") from None


# --- field helpers ------------------------------------------------------------------


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _mapping(
    ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, required: bool = False
) -> dict[str, object]:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", _join(prefix, key))
        return {}
    if not isinstance(value, dict):
        raise ctx.err("must be a mapping", _join(prefix, key), value)
    return cast(dict[str, object], value)


def _list(
    ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, required: bool = False
) -> list[object]:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", _join(prefix, key))
        return []
    if not isinstance(value, list):
        raise ctx.err("must be a list", _join(prefix, key), value)
    return cast(list[object], value)


def _item_map(ctx: _Ctx, item: object, path: str) -> dict[str, object]:
    if not isinstance(item, dict):
        raise ctx.err("must be a mapping", path, item)
    return cast(dict[str, object], item)


def _str(
    ctx: _Ctx,
    parent: Mapping[str, object],
    key: str,
    prefix: str = "",
    *,
    default: str | None = None,
    required: bool = False,
) -> str | None:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", _join(prefix, key))
        return default
    if not isinstance(value, str) or (required and not value):
        raise ctx.err(
            "must be a non-empty string" if required else "must be a string", _join(prefix, key), value
        )
    return value


def _name(ctx: _Ctx, meta: Mapping[str, object], prefix: str) -> str:
    value = _str(ctx, meta, "name", prefix, required=True)
    if value is None:  # pragma: no cover - required
        raise ctx.err("required field is missing", _join(prefix, "name"))
    return value


def _int(
    ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, default: int | None = None
) -> int | None:
    value = parent.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.err("must be an integer", _join(prefix, key), value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        # Every integer field Kueue reads here (priority, count, minCount, value, thresholds) is an int32.
        raise ctx.err("must be a 32-bit integer (-2147483648 to 2147483647)", _join(prefix, key), value)
    return value



def _qty(
    ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, nonnegative: bool = True
) -> int | None:
    value = parent.get(key)
    if value is None:
        return None
    path = _join(prefix, key)
    try:
        q = parse_quantity(cast(str, value))
    except InputError as err:
        raise ctx.err(err.message, path, value) from None
    if nonnegative and q < 0:
        raise ctx.err("must not be negative", path, value)
    return q


E = TypeVar(
    "E",
    QueueingStrategy,
    WithinClusterQueue,
    ReclaimWithinCohort,
    BorrowWithinCohortPolicy,
    FungibilityPolicy,
    FungibilityPreference,
    StopPolicy,
    AdmissionMode,
)


def _enum(ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str, enum: type[E], default: E) -> E:
    value = parent.get(key)
    if value is None:
        return default
    try:
        return enum(str(value))
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise ctx.err(f"must be one of {allowed}", _join(prefix, key), value) from None


def _str_map(ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "") -> dict[str, str]:
    raw = _mapping(ctx, parent, key, prefix)
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ctx.err("must be a string", _join(_join(prefix, key), str(k)), v)
        out[str(k)] = v
    return out


def _time(ctx: _Ctx, parent: Mapping[str, object], key: str, prefix: str = "") -> float | None:
    value = parent.get(key)
    if value is None:
        return None
    return parse_time(value, ctx=ctx, path=_join(prefix, key))


def parse_time(value: object, *, ctx: _Ctx | None = None, path: str = "") -> float:
    """RFC 3339 text (or a YAML timestamp) as float seconds since the epoch."""
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, _dt.date):  # YAML reads `2026-01-01` as a date: RFC 3339 needs a time of day
        shown = value.isoformat()
        if ctx is None:
            raise InputError("not an RFC 3339 time (a date without a time of day)", value=shown)
        raise ctx.err("not an RFC 3339 time (a date without a time of day)", path, shown)
    elif isinstance(value, str):
        try:
            moment = _dt.datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            if ctx is None:
                raise InputError("not an RFC 3339 time", value=value) from None
            raise ctx.err("not an RFC 3339 time", path, value) from None
    else:
        if ctx is None:
            raise InputError("not an RFC 3339 time", value=value)
        raise ctx.err("not an RFC 3339 time", path, value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


def _weight(ctx: _Ctx, spec: Mapping[str, object], prefix: str) -> int:
    fs = _mapping(ctx, spec, "fairSharing", prefix)
    w = _qty(ctx, fs, "weight", _join(prefix, "fairSharing"))
    return 1000 if w is None else w


# --- kinds ------------------------------------------------------------------------------


def _flavor(ctx: _Ctx, doc: Mapping[str, object]) -> ResourceFlavor:
    meta = _mapping(ctx, doc, "metadata", required=True)
    spec = _mapping(ctx, doc, "spec")
    if spec.get("topologyName") is not None:
        raise ctx.unsupported("spec.topologyName")
    taints = tuple(
        _taint(ctx, _item_map(ctx, t, f"spec.nodeTaints[{i}]"), f"spec.nodeTaints[{i}]")
        for i, t in enumerate(_list(ctx, spec, "nodeTaints", "spec"))
    )
    tolerations = _tolerations(ctx, spec, "spec")
    labels = _str_map(ctx, spec, "nodeLabels", "spec")
    return ResourceFlavor(
        name=_name(ctx, meta, "metadata"),
        node_labels=tuple(sorted(labels.items())),
        node_taints=taints,
        tolerations=tolerations,
    )


def _taint(ctx: _Ctx, raw: Mapping[str, object], path: str) -> Taint:
    key = _str(ctx, raw, "key", path, required=True) or ""
    return Taint(
        key=key,
        value=_str(ctx, raw, "value", path, default="") or "",
        effect=_str(ctx, raw, "effect", path, default="NoSchedule") or "NoSchedule",
    )


def _tolerations(ctx: _Ctx, parent: Mapping[str, object], prefix: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(_list(ctx, parent, "tolerations", prefix)):
        path = f"{_join(prefix, 'tolerations')}[{i}]"
        raw = _item_map(ctx, item, path)
        op = _str(ctx, raw, "operator", path, default="Equal") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ctx.err("must be Equal or Exists", _join(path, "operator"), op)
        out.append(
            Toleration(
                key=_str(ctx, raw, "key", path, default="") or "",
                operator=op,
                value=_str(ctx, raw, "value", path, default="") or "",
                effect=_str(ctx, raw, "effect", path, default="") or "",
            )
        )
    return tuple(out)


def _resource_groups(
    ctx: _Ctx, spec: Mapping[str, object], *, allow_limits: bool
) -> tuple[ResourceGroup, ...]:
    groups = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for gi, g in enumerate(_list(ctx, spec, "resourceGroups", "spec")):
        gpath = f"spec.resourceGroups[{gi}]"
        graw = _item_map(ctx, g, gpath)
        covered: list[str] = []
        for ri, r in enumerate(_list(ctx, graw, "coveredResources", gpath, required=True)):
            if not isinstance(r, str) or not r:
                raise ctx.err("must be a resource name", f"{gpath}.coveredResources[{ri}]", r)
            if r in seen_resources:
                raise ctx.err(
                    "resource is covered by more than one resource group",
                    f"{gpath}.coveredResources[{ri}]",
                    r,
                )
            seen_resources.add(r)
            covered.append(r)
        flavors = []
        for fi, f in enumerate(_list(ctx, graw, "flavors", gpath, required=True)):
            fpath = f"{gpath}.flavors[{fi}]"
            fraw = _item_map(ctx, f, fpath)
            fname = _str(ctx, fraw, "name", fpath, required=True) or ""
            if fname in seen_flavors:
                raise ctx.err("flavor appears more than once", _join(fpath, "name"), fname)
            seen_flavors.add(fname)
            quotas: dict[str, ResourceQuota] = {}
            for ri, r in enumerate(_list(ctx, fraw, "resources", fpath, required=True)):
                rpath = f"{fpath}.resources[{ri}]"
                rraw = _item_map(ctx, r, rpath)
                rname = _str(ctx, rraw, "name", rpath, required=True) or ""
                if rname not in covered:
                    raise ctx.err("resource is not in coveredResources", _join(rpath, "name"), rname)
                if rname in quotas:
                    raise ctx.err("resource appears more than once", _join(rpath, "name"), rname)
                nominal = _qty(ctx, rraw, "nominalQuota", rpath)
                if nominal is None:
                    raise ctx.err("required field is missing", _join(rpath, "nominalQuota"))
                bl = _qty(ctx, rraw, "borrowingLimit", rpath)
                ll = _qty(ctx, rraw, "lendingLimit", rpath)
                if not allow_limits and (bl is not None or ll is not None):
                    # Kueue's CEL/webhook: limits only make sense with a parent cohort.
                    which = "borrowingLimit" if bl is not None else "lendingLimit"
                    raise ctx.err(
                        f"{which} may only be set when the object has a parent cohort",
                        _join(rpath, which),
                        rraw.get(which),
                    )
                quotas[rname] = ResourceQuota(nominal=nominal, borrowing_limit=bl, lending_limit=ll)
            missing = [r for r in covered if r not in quotas]
            if missing:
                raise ctx.err(
                    f"flavor must list every covered resource; missing {', '.join(missing)}",
                    _join(fpath, "resources"),
                )
            flavors.append(FlavorQuotas(name=fname, resources=tuple((r, quotas[r]) for r in covered)))
        groups.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    return tuple(groups)


def _cohort(ctx: _Ctx, doc: Mapping[str, object]) -> Cohort:
    meta = _mapping(ctx, doc, "metadata", required=True)
    spec = _mapping(ctx, doc, "spec")
    parent = _str(ctx, spec, "parentName", "spec") or None
    return Cohort(
        name=_name(ctx, meta, "metadata"),
        parent=parent,
        resource_groups=_resource_groups(ctx, spec, allow_limits=parent is not None),
        fair_sharing_weight=_weight(ctx, spec, "spec"),
    )


def _selector(ctx: _Ctx, raw: Mapping[str, object], path: str) -> LabelSelector:
    labels = _str_map(ctx, raw, "matchLabels", path)
    exprs = []
    for i, e in enumerate(_list(ctx, raw, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        eraw = _item_map(ctx, e, epath)
        op = _str(ctx, eraw, "operator", epath, required=True) or ""
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ctx.err("must be In, NotIn, Exists or DoesNotExist", _join(epath, "operator"), op)
        values = [str(v) for v in _list(ctx, eraw, "values", epath)]
        exprs.append(
            LabelSelectorRequirement(
                key=_str(ctx, eraw, "key", epath, required=True) or "", operator=op, values=tuple(values)
            )
        )
    return LabelSelector(match_labels=tuple(sorted(labels.items())), match_expressions=tuple(exprs))


def _cluster_queue(ctx: _Ctx, doc: Mapping[str, object]) -> ClusterQueue:
    meta = _mapping(ctx, doc, "metadata", required=True)
    spec = _mapping(ctx, doc, "spec")
    if "cohort" in spec:
        raise ctx.err("v1beta1 field; v1beta2 calls it cohortName", "spec.cohort", spec["cohort"])
    if spec.get("concurrentAdmissionPolicy") is not None:
        raise ctx.unsupported("spec.concurrentAdmissionPolicy")
    cohort = _str(ctx, spec, "cohortName", "spec") or None
    ns_sel: LabelSelector | None = None
    if spec.get("namespaceSelector") is not None:
        ns_sel = _selector(ctx, _mapping(ctx, spec, "namespaceSelector", "spec"), "spec.namespaceSelector")
    ff = _mapping(ctx, spec, "flavorFungibility", "spec")
    fpath = "spec.flavorFungibility"
    pref = ff.get("preference")
    fungibility = FlavorFungibility(
        when_can_borrow=_enum(
            ctx, ff, "whenCanBorrow", fpath, FungibilityPolicy, FungibilityPolicy.MAY_STOP_SEARCH
        ),
        when_can_preempt=_enum(
            ctx, ff, "whenCanPreempt", fpath, FungibilityPolicy, FungibilityPolicy.TRY_NEXT_FLAVOR
        ),
        preference=None
        if pref is None
        else _enum(
            ctx,
            ff,
            "preference",
            fpath,
            FungibilityPreference,
            FungibilityPreference.BORROWING_OVER_PREEMPTION,
        ),
    )
    pr = _mapping(ctx, spec, "preemption", "spec")
    ppath = "spec.preemption"
    bwc = _mapping(ctx, pr, "borrowWithinCohort", ppath)
    preemption = ClusterQueuePreemption(
        within_cluster_queue=_enum(
            ctx, pr, "withinClusterQueue", ppath, WithinClusterQueue, WithinClusterQueue.NEVER
        ),
        reclaim_within_cohort=_enum(
            ctx, pr, "reclaimWithinCohort", ppath, ReclaimWithinCohort, ReclaimWithinCohort.NEVER
        ),
        borrow_within_cohort=_enum(
            ctx,
            bwc,
            "policy",
            _join(ppath, "borrowWithinCohort"),
            BorrowWithinCohortPolicy,
            BorrowWithinCohortPolicy.NEVER,
        ),
        max_priority_threshold=_int(ctx, bwc, "maxPriorityThreshold", _join(ppath, "borrowWithinCohort")),
    )
    if (
        preemption.reclaim_within_cohort == ReclaimWithinCohort.NEVER
        and preemption.borrow_within_cohort != BorrowWithinCohortPolicy.NEVER
    ):
        raise ctx.err(
            "borrowWithinCohort requires reclaimWithinCohort other than Never (Kueue CEL rule)",
            "spec.preemption.borrowWithinCohort.policy",
            preemption.borrow_within_cohort.value,
        )
    scope = _mapping(ctx, spec, "admissionScope", "spec")
    mode = scope.get("admissionMode")
    return ClusterQueue(
        name=_name(ctx, meta, "metadata"),
        resource_groups=_resource_groups(ctx, spec, allow_limits=cohort is not None),
        cohort=cohort,
        queueing_strategy=_enum(
            ctx, spec, "queueingStrategy", "spec", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO
        ),
        namespace_selector=ns_sel,
        flavor_fungibility=fungibility,
        preemption=preemption,
        fair_sharing_weight=_weight(ctx, spec, "spec"),
        admission_mode=None
        if mode is None
        else _enum(ctx, scope, "admissionMode", "spec.admissionScope", AdmissionMode, AdmissionMode.NO_AFS),
        stop_policy=_enum(ctx, spec, "stopPolicy", "spec", StopPolicy, StopPolicy.NONE),
    )


def _local_queue(ctx: _Ctx, doc: Mapping[str, object]) -> LocalQueue:
    meta = _mapping(ctx, doc, "metadata", required=True)
    spec = _mapping(ctx, doc, "spec", required=True)
    ns = _str(ctx, meta, "namespace", "metadata", default="default") or "default"
    status = _mapping(ctx, doc, "status")
    fs = _mapping(ctx, status, "fairSharing", "status")
    afs = _mapping(ctx, fs, "admissionFairSharingStatus", "status.fairSharing")
    apath = "status.fairSharing.admissionFairSharingStatus"
    consumed = _mapping(ctx, afs, "consumedResources", apath)
    consumed_q = tuple(
        sorted(
            (str(r), _qty(ctx, consumed, str(r), _join(apath, "consumedResources")) or 0) for r in consumed
        )
    )
    return LocalQueue(
        namespace=ns,
        name=_name(ctx, meta, "metadata"),
        cluster_queue=_str(ctx, spec, "clusterQueue", "spec", required=True) or "",
        stop_policy=_enum(ctx, spec, "stopPolicy", "spec", StopPolicy, StopPolicy.NONE),
        fair_sharing_weight=_weight(ctx, spec, "spec"),
        afs_consumed=consumed_q,
        afs_last_update=_time(ctx, afs, "lastUpdate", apath),
    )


def _priority_class(ctx: _Ctx, doc: Mapping[str, object]) -> WorkloadPriorityClass:
    meta = _mapping(ctx, doc, "metadata", required=True)
    value = _int(ctx, doc, "value")
    if value is None:
        raise ctx.err("required field is missing", "value")
    return WorkloadPriorityClass(name=_name(ctx, meta, "metadata"), value=value)


# topologyRequest keys that constrain placement (Kueue TAS, apis/kueue/v1beta2/workload_types.go
# PodSetTopologyRequest). Kueue's batch/job integration sets `podIndexLabel` (and the subGroup
# labels) on EVERY Workload it creates, TAS or not: those only name pod labels and do not change
# admission, so a topologyRequest without a constraint key is accepted and ignored.
_TOPOLOGY_CONSTRAINTS = ("podSetGroupName", "podSetSliceRequiredTopology", "podSetSliceSize",
                         "preferred", "required", "unconstrained")


def pod_requests(ctx: _Ctx, pod_spec: Mapping[str, object], path: str) -> dict[str, int]:
    """Per-pod requests as Kubernetes computes them (k8s.io/component-helpers resource.PodRequests).

    Regular containers are summed; restartable init containers (sidecars) add to that sum;
    a plain init container needs its own request plus the sidecars started before it; the
    pod needs the larger of the two, plus ``spec.overhead``. A container with a limit and no
    request requests its limit (API defaulting).
    """

    def container_requests(i: int, c: object, field: str) -> tuple[dict[str, int], bool]:
        cpath = f"{path}.{field}[{i}]"
        craw = _item_map(ctx, c, cpath)
        res = _mapping(ctx, craw, "resources", cpath)
        rpath = _join(cpath, "resources")
        lim_raw = _mapping(ctx, res, "limits", rpath)
        req_raw = _mapping(ctx, res, "requests", rpath)
        limits = {str(k): _qty(ctx, lim_raw, str(k), _join(rpath, "limits")) or 0 for k in lim_raw}
        reqs = {str(k): _qty(ctx, req_raw, str(k), _join(rpath, "requests")) or 0 for k in req_raw}
        for k, v in limits.items():
            reqs.setdefault(k, v)
        return reqs, craw.get("restartPolicy") == "Always"

    total: dict[str, int] = {}
    for i, c in enumerate(_list(ctx, pod_spec, "containers", path)):
        for k, v in container_requests(i, c, "containers")[0].items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(_list(ctx, pod_spec, "initContainers", path)):
        reqs, restartable = container_requests(i, c, "initContainers")
        for k, v in reqs.items():
            need = sidecars.get(k, 0) + v
            init_max[k] = max(init_max.get(k, 0), need)
            if restartable:
                total[k] = total.get(k, 0) + v
        if restartable:
            for k, v in reqs.items():
                sidecars[k] = sidecars.get(k, 0) + v
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    overhead = _mapping(ctx, pod_spec, "overhead", path)
    for k in overhead:
        total[str(k)] = total.get(str(k), 0) + (_qty(ctx, overhead, str(k), _join(path, "overhead")) or 0)
    return {k: v for k, v in total.items() if v}


def _pod_set(ctx: _Ctx, raw: Mapping[str, object], path: str) -> PodSet:
    topology = raw.get("topologyRequest")
    if topology is not None:
        if not isinstance(topology, Mapping):
            raise ctx.err("must be a mapping", _join(path, "topologyRequest"), topology)
        for key in _TOPOLOGY_CONSTRAINTS:
            if topology.get(key) is not None:
                raise ctx.unsupported(_join(_join(path, "topologyRequest"), key))
    count = _int(ctx, raw, "count", path, default=1)
    if count is None or count < 0:
        raise ctx.err("must be a non-negative integer", _join(path, "count"), raw.get("count"))
    min_count = _int(ctx, raw, "minCount", path)
    if min_count is not None and not 0 < min_count <= count:
        raise ctx.err("must be between 1 and count", _join(path, "minCount"), min_count)
    template = _mapping(ctx, raw, "template", path, required=True)
    tpath = _join(path, "template")
    pod_spec = _mapping(ctx, template, "spec", tpath, required=True)
    spath = _join(tpath, "spec")
    affinity = _mapping(ctx, pod_spec, "affinity", spath)
    node_aff = _mapping(ctx, affinity, "nodeAffinity", _join(spath, "affinity"))
    if node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        raise ctx.unsupported(
            _join(spath, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
        )
    requests = pod_requests(ctx, pod_spec, spath)
    selector = _str_map(ctx, pod_spec, "nodeSelector", spath)
    return PodSet(
        name=_str(ctx, raw, "name", path, default="main") or "main",
        count=count,
        requests=tuple(sorted(requests.items())),
        node_selector=tuple(sorted(selector.items())),
        tolerations=_tolerations(ctx, pod_spec, spath),
        min_count=min_count,
    )


def _workload(ctx: _Ctx, doc: Mapping[str, object]) -> Workload:
    meta = _mapping(ctx, doc, "metadata", required=True)
    spec = _mapping(ctx, doc, "spec", required=True)
    status = _mapping(ctx, doc, "status")
    ns = _str(ctx, meta, "namespace", "metadata", default="default") or "default"
    pod_sets = []
    names: set[str] = set()
    raw_sets = _list(ctx, spec, "podSets", "spec", required=True)
    if not raw_sets:
        raise ctx.err("must list at least one pod set", "spec.podSets")
    for i, ps in enumerate(raw_sets):
        p = _pod_set(ctx, _item_map(ctx, ps, f"spec.podSets[{i}]"), f"spec.podSets[{i}]")
        if p.name in names:
            raise ctx.err("duplicate pod set name", f"spec.podSets[{i}].name", p.name)
        names.add(p.name)
        pod_sets.append(p)
    pcr = _mapping(ctx, spec, "priorityClassRef", "spec")
    pc_name = _str(ctx, pcr, "name", "spec.priorityClassRef") if pcr else None
    pc_kind = (
        _str(ctx, pcr, "kind", "spec.priorityClassRef", default="WorkloadPriorityClass") if pcr else None
    )
    priority = _int(ctx, spec, "priority", "spec")
    conditions = []
    for i, c in enumerate(_list(ctx, status, "conditions", "status")):
        cpath = f"status.conditions[{i}]"
        craw = _item_map(ctx, c, cpath)
        st = craw.get("status")
        if st not in ("True", "False", "Unknown", True, False):
            raise ctx.err("must be True, False or Unknown", _join(cpath, "status"), st)
        conditions.append(
            Condition(
                type=_str(ctx, craw, "type", cpath, required=True) or "",
                status=st in ("True", True),
                reason=_str(ctx, craw, "reason", cpath, default="") or "",
                message=_str(ctx, craw, "message", cpath, default="") or "",
                last_transition_time=_time(ctx, craw, "lastTransitionTime", cpath) or 0.0,
            )
        )
    admission = None
    adm = _mapping(ctx, status, "admission", "status")
    if adm:
        psas = []
        for i, a in enumerate(_list(ctx, adm, "podSetAssignments", "status.admission", required=True)):
            apath = f"status.admission.podSetAssignments[{i}]"
            araw = _item_map(ctx, a, apath)
            flavors = _str_map(ctx, araw, "flavors", apath)
            usage_raw = _mapping(ctx, araw, "resourceUsage", apath)
            upath = _join(apath, "resourceUsage")
            usage = {str(r): _qty(ctx, usage_raw, str(r), upath) or 0 for r in usage_raw}
            psname = _str(ctx, araw, "name", apath, default="main") or "main"
            count = _int(ctx, araw, "count", apath)
            if not usage_raw:
                # resourceUsage omitted: charge the pod set's full request (what Kueue would have written).
                match = next((p for p in pod_sets if p.name == psname), None)
                if match is None:
                    raise ctx.err("no pod set of that name in spec.podSets", _join(apath, "name"), psname)
                usage = match.total(count)
            missing = sorted(set(usage) - set(flavors))
            if missing:
                raise ctx.err(
                    f"resource {missing[0]} has usage but no flavor", _join(apath, "flavors"), flavors
                )
            if count is None:  # Kueue: ptr.Deref(psa.Count, the pod set's count)
                count = next((p.count for p in pod_sets if p.name == psname), 0)
            psas.append(
                PodSetAssignment(
                    name=psname,
                    flavors=tuple(sorted(flavors.items())),
                    resource_usage=tuple(sorted(usage.items())),
                    count=count,
                )
            )
        admission = Admission(
            cluster_queue=_str(ctx, adm, "clusterQueue", "status.admission", required=True) or "",
            pod_set_assignments=tuple(psas),
        )
    created = _time(ctx, meta, "creationTimestamp", "metadata")
    reclaimable: dict[str, int] = {}
    for i, r in enumerate(_list(ctx, status, "reclaimablePods", "status")):
        rpath = f"status.reclaimablePods[{i}]"
        rraw = _item_map(ctx, r, rpath)
        rname = _str(ctx, rraw, "name", rpath, required=True) or ""
        rcount = _int(ctx, rraw, "count", rpath, default=0) or 0
        if rname not in names or rcount < 0:
            raise ctx.err("must name a pod set of spec.podSets with a non-negative count", rpath, r)
        reclaimable[rname] = rcount
    annotations = _str_map(ctx, meta, "annotations", "metadata")
    owner = _owner(ctx, meta)
    boost_text = annotations.get(PRIORITY_BOOST_ANNOTATION)
    boost = 0
    if boost_text is not None:
        try:
            boost = int(boost_text)
        except ValueError:
            raise ctx.err(
                "must be an integer (rejected by Kueue's webhook)",
                f"metadata.annotations.{PRIORITY_BOOST_ANNOTATION}",
                boost_text,
            ) from None
    return Workload(
        namespace=ns,
        name=_name(ctx, meta, "metadata"),
        queue_name=_str(ctx, spec, "queueName", "spec", default="") or "",
        pod_sets=tuple(pod_sets),
        priority=priority if priority is not None else 0,
        creation_timestamp=created if created is not None else 0.0,
        uid=_str(ctx, meta, "uid", "metadata", default="") or "",
        priority_class=pc_name,
        priority_class_kind=pc_kind,
        active=spec.get("active") is not False,
        labels=tuple(sorted(_str_map(ctx, meta, "labels", "metadata").items())),
        admission=admission,
        conditions=tuple(conditions),
        requeue_at=_time(
            ctx, _mapping(ctx, status, "requeueState", "status"), "requeueAt", "status.requeueState"
        ),
        explicit_priority=priority is not None,
        priority_boost=boost,
        reclaimable_pods=tuple(sorted(reclaimable.items())),
        owner_kind=owner[0] if owner else None,
        owner_name=owner[1] if owner else None,
        deletion_timestamp=_time(ctx, meta, "deletionTimestamp", "metadata"),
        accumulated_past_execution_seconds=_int(ctx, status, "accumulatedPastExecutionTimeSeconds", "status"),
        eviction_stats=_eviction_stats(ctx, status),
    )


def _owner(ctx: _Ctx, meta: Mapping[str, object]) -> tuple[str, str] | None:
    """The controller owner reference (the Job Kueue made the Workload for), else the first one."""
    refs = [
        (i, _item_map(ctx, r, f"metadata.ownerReferences[{i}]"))
        for i, r in enumerate(_list(ctx, meta, "ownerReferences", "metadata"))
    ]
    chosen = next(((i, r) for i, r in refs if r.get("controller") is True), refs[0] if refs else None)
    if chosen is None:
        return None
    i, ref = chosen
    path = f"metadata.ownerReferences[{i}]"
    kind = _str(ctx, ref, "kind", path, required=True) or ""
    return kind, _str(ctx, ref, "name", path, required=True) or ""


def _eviction_stats(ctx: _Ctx, status: Mapping[str, object]) -> tuple[tuple[str, str, int], ...]:
    """status.schedulingStats.evictions (Kueue pkg/workload workloadEvictionStateInc counts each eviction)."""
    stats = _mapping(ctx, status, "schedulingStats", "status")
    out: list[tuple[str, str, int]] = []
    for i, e in enumerate(_list(ctx, stats, "evictions", "status.schedulingStats")):
        path = f"status.schedulingStats.evictions[{i}]"
        raw = _item_map(ctx, e, path)
        count = _int(ctx, raw, "count", path, default=0) or 0
        if count < 0:
            raise ctx.err("must be a non-negative integer", _join(path, "count"), count)
        out.append((
            _str(ctx, raw, "reason", path, default="") or "",
            _str(ctx, raw, "underlyingCause", path, default="") or "",
            count,
        ))
    return tuple(sorted(out))
