"""Manifests into a `ClusterState`: YAML files (multi-document, lists, `kind: List`) or in-memory dicts,
each object parsed (kinds.py), then the state checked as a whole (`StateBuilder.build`: duplicates, every
reference, priority classes, cohort parent cycles)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import cast

from fairshare import yamlfile
from fairshare.errors import InputError, Location
from fairshare.models import (
    ClusterQueue,
    ClusterState,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    Workload,
    WorkloadPriorityClass,
    cohort_cycle,
)

from .kinds import KueueObject, NamespaceObject, parse_object


def load_yaml_documents(path: str | Path) -> list[dict[str, object]]:
    """All documents of a YAML file as dicts (lists and ``kind: List`` are flattened)."""
    file = str(path)
    return parse_yaml_text(yamlfile.read_text_file(path), file=file)


def parse_yaml_text(text: str, *, file: str | None = None) -> list[dict[str, object]]:
    return flatten_documents(yamlfile.load_yaml_text(text, file=file), file=file)


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
            # (keyed by each object's own typed name: the tables hold it under the same text)
            cohorts={c.name: c for c in self.cohorts.values()},
            cluster_queues={cq.name: cq for cq in self.cluster_queues.values()},
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
