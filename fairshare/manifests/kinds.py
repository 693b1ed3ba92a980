"""One manifest dict into its model: the quota and queue kinds (ResourceFlavor, Cohort, ClusterQueue,
LocalQueue, WorkloadPriorityClass) here, Workloads in `workloads.py`, a Namespace's labels."""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.errors import InputError
from fairshare.models import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ClusterQueueName,
    ClusterQueuePreemption,
    Cohort,
    CohortName,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    FungibilityPreference,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    QueueingStrategy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    WithinClusterQueue,
    Workload,
    WorkloadPriorityClass,
)

from .fields import (
    Ctx,
    field_enum,
    field_int,
    field_list,
    field_map,
    field_name,
    field_qty,
    field_str,
    field_str_map,
    field_time,
    field_weight,
    item_map,
    join,
)
from .workloads import parse_workload, tolerations

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_KINDS = ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Workload")
KueueObject = ResourceFlavor | Cohort | ClusterQueue | LocalQueue | WorkloadPriorityClass | Workload
NamespaceObject = tuple[str, dict[str, str]]  # a core/v1 Namespace: name and labels


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
    ctx = Ctx(file, label)
    api = doc.get("apiVersion")
    if kind == "Namespace" and api == "v1":
        m = field_map(ctx, doc, "metadata", required=True)
        return (field_name(ctx, m, "metadata"), field_str_map(ctx, m, "labels", "metadata"))
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
        return parse_workload(ctx, doc)
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as err:  # defensive: never a traceback
        raise ctx.err(f"invalid object: {err}", "") from None


def _flavor(ctx: Ctx, doc: Mapping[str, object]) -> ResourceFlavor:
    meta = field_map(ctx, doc, "metadata", required=True)
    spec = field_map(ctx, doc, "spec")
    if spec.get("topologyName") is not None:
        raise ctx.unsupported("spec.topologyName")
    taints = tuple(
        _taint(ctx, item_map(ctx, t, f"spec.nodeTaints[{i}]"), f"spec.nodeTaints[{i}]")
        for i, t in enumerate(field_list(ctx, spec, "nodeTaints", "spec"))
    )
    labels = field_str_map(ctx, spec, "nodeLabels", "spec")
    return ResourceFlavor(
        name=field_name(ctx, meta, "metadata"),
        node_labels=tuple(sorted(labels.items())),
        node_taints=taints,
        tolerations=tolerations(ctx, spec, "spec"),
    )


def _taint(ctx: Ctx, raw: Mapping[str, object], path: str) -> Taint:
    key = field_str(ctx, raw, "key", path, required=True) or ""
    return Taint(
        key=key,
        value=field_str(ctx, raw, "value", path, default="") or "",
        effect=field_str(ctx, raw, "effect", path, default="NoSchedule") or "NoSchedule",
    )


def _resource_groups(
    ctx: Ctx, spec: Mapping[str, object], *, allow_limits: bool, key: str = "resourceGroups",
    parent: str = "spec",
) -> tuple[ResourceGroup, ...]:
    groups = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for gi, g in enumerate(field_list(ctx, spec, key, parent)):
        gpath = f"{parent}.{key}[{gi}]"
        graw = item_map(ctx, g, gpath)
        covered: list[str] = []
        for ri, r in enumerate(field_list(ctx, graw, "coveredResources", gpath, required=True)):
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
        for fi, f in enumerate(field_list(ctx, graw, "flavors", gpath, required=True)):
            fpath = f"{gpath}.flavors[{fi}]"
            fraw = item_map(ctx, f, fpath)
            fname = field_str(ctx, fraw, "name", fpath, required=True) or ""
            if fname in seen_flavors:
                raise ctx.err("flavor appears more than once", join(fpath, "name"), fname)
            seen_flavors.add(fname)
            quotas: dict[str, ResourceQuota] = {}
            for ri, r in enumerate(field_list(ctx, fraw, "resources", fpath, required=True)):
                rpath = f"{fpath}.resources[{ri}]"
                rraw = item_map(ctx, r, rpath)
                rname = field_str(ctx, rraw, "name", rpath, required=True) or ""
                if rname not in covered:
                    raise ctx.err("resource is not in coveredResources", join(rpath, "name"), rname)
                if rname in quotas:
                    raise ctx.err("resource appears more than once", join(rpath, "name"), rname)
                nominal = field_qty(ctx, rraw, "nominalQuota", rpath)
                if nominal is None:
                    raise ctx.err("required field is missing", join(rpath, "nominalQuota"))
                bl = field_qty(ctx, rraw, "borrowingLimit", rpath)
                ll = field_qty(ctx, rraw, "lendingLimit", rpath)
                if not allow_limits and (bl is not None or ll is not None):
                    # Kueue's CEL/webhook: limits only make sense with a parent cohort.
                    which = "borrowingLimit" if bl is not None else "lendingLimit"
                    raise ctx.err(
                        f"{which} may only be set when the object has a parent cohort",
                        join(rpath, which),
                        rraw.get(which),
                    )
                quotas[rname] = ResourceQuota(nominal=nominal, borrowing_limit=bl, lending_limit=ll)
            missing = [r for r in covered if r not in quotas]
            if missing:
                raise ctx.err(
                    f"flavor must list every covered resource; missing {', '.join(missing)}",
                    join(fpath, "resources"),
                )
            flavors.append(FlavorQuotas(name=fname, resources=tuple((r, quotas[r]) for r in covered)))
        groups.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    return tuple(groups)


def _cohort(ctx: Ctx, doc: Mapping[str, object]) -> Cohort:
    meta = field_map(ctx, doc, "metadata", required=True)
    spec = field_map(ctx, doc, "spec")
    parent_name = field_str(ctx, spec, "parentName", "spec")
    parent = CohortName(parent_name) if parent_name else None
    return Cohort(
        name=CohortName(field_name(ctx, meta, "metadata")),
        parent=parent,
        resource_groups=_resource_groups(ctx, spec, allow_limits=parent is not None),
        fair_sharing_weight=field_weight(ctx, spec, "spec"),
    )


def _selector(ctx: Ctx, raw: Mapping[str, object], path: str) -> LabelSelector:
    labels = field_str_map(ctx, raw, "matchLabels", path)
    exprs = []
    for i, e in enumerate(field_list(ctx, raw, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        eraw = item_map(ctx, e, epath)
        op = field_str(ctx, eraw, "operator", epath, required=True) or ""
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ctx.err("must be In, NotIn, Exists or DoesNotExist", join(epath, "operator"), op)
        values = [str(v) for v in field_list(ctx, eraw, "values", epath)]
        exprs.append(
            LabelSelectorRequirement(
                key=field_str(ctx, eraw, "key", epath, required=True) or "", operator=op, values=tuple(values)
            )
        )
    return LabelSelector(match_labels=tuple(sorted(labels.items())), match_expressions=tuple(exprs))


def _effective_quota(
    ctx: Ctx, doc: Mapping[str, object], *, allow_limits: bool
) -> tuple[ResourceGroup, ...] | None:
    """`status.effectiveQuota` (Kueue v0.20, Dynamic Quota Orchestration, KEP-12382: a complete ResourceGroup
    list that the scheduler uses instead of the spec's quotas when set), as resource groups; None when absent
    or empty. Also read as `{resourceGroups: [...]}` in case the status wraps the list."""
    status = field_map(ctx, doc, "status")
    raw = status.get("effectiveQuota")
    if raw is None or raw == [] or raw == {}:
        return None
    if isinstance(raw, Mapping):
        wrapped = field_map(ctx, status, "effectiveQuota", "status")
        groups = _resource_groups(ctx, wrapped, allow_limits=allow_limits, parent="status.effectiveQuota")
    else:
        groups = _resource_groups(ctx, status, allow_limits=allow_limits, key="effectiveQuota",
                                  parent="status")
    return groups or None


def _cluster_queue(ctx: Ctx, doc: Mapping[str, object]) -> ClusterQueue:
    meta = field_map(ctx, doc, "metadata", required=True)
    spec = field_map(ctx, doc, "spec")
    if "cohort" in spec:
        raise ctx.err("v1beta1 field; v1beta2 calls it cohortName", "spec.cohort", spec["cohort"])
    if spec.get("concurrentAdmissionPolicy") is not None:
        raise ctx.unsupported("spec.concurrentAdmissionPolicy")
    cohort_name = field_str(ctx, spec, "cohortName", "spec")
    cohort = CohortName(cohort_name) if cohort_name else None
    ns_sel: LabelSelector | None = None
    if spec.get("namespaceSelector") is not None:
        ns_sel = _selector(ctx, field_map(ctx, spec, "namespaceSelector", "spec"), "spec.namespaceSelector")
    ff = field_map(ctx, spec, "flavorFungibility", "spec")
    fpath = "spec.flavorFungibility"
    pref = ff.get("preference")
    fungibility = FlavorFungibility(
        when_can_borrow=field_enum(
            ctx, ff, "whenCanBorrow", fpath, FungibilityPolicy, FungibilityPolicy.MAY_STOP_SEARCH
        ),
        when_can_preempt=field_enum(
            ctx, ff, "whenCanPreempt", fpath, FungibilityPolicy, FungibilityPolicy.TRY_NEXT_FLAVOR
        ),
        preference=None
        if pref is None
        else field_enum(
            ctx,
            ff,
            "preference",
            fpath,
            FungibilityPreference,
            FungibilityPreference.BORROWING_OVER_PREEMPTION,
        ),
    )
    pr = field_map(ctx, spec, "preemption", "spec")
    ppath = "spec.preemption"
    bwc = field_map(ctx, pr, "borrowWithinCohort", ppath)
    preemption = ClusterQueuePreemption(
        within_cluster_queue=field_enum(
            ctx, pr, "withinClusterQueue", ppath, WithinClusterQueue, WithinClusterQueue.NEVER
        ),
        reclaim_within_cohort=field_enum(
            ctx, pr, "reclaimWithinCohort", ppath, ReclaimWithinCohort, ReclaimWithinCohort.NEVER
        ),
        borrow_within_cohort=field_enum(
            ctx,
            bwc,
            "policy",
            join(ppath, "borrowWithinCohort"),
            BorrowWithinCohortPolicy,
            BorrowWithinCohortPolicy.NEVER,
        ),
        max_priority_threshold=field_int(ctx, bwc, "maxPriorityThreshold", join(ppath, "borrowWithinCohort")),
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
    scope = field_map(ctx, spec, "admissionScope", "spec")
    mode = scope.get("admissionMode")
    declared = _resource_groups(ctx, spec, allow_limits=cohort is not None)
    effective = _effective_quota(ctx, doc, allow_limits=cohort is not None)
    return ClusterQueue(
        name=ClusterQueueName(field_name(ctx, meta, "metadata")),
        resource_groups=declared if effective is None else effective,
        spec_resource_groups=None if effective is None else declared,
        cohort=cohort,
        queueing_strategy=field_enum(
            ctx, spec, "queueingStrategy", "spec", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO
        ),
        namespace_selector=ns_sel,
        flavor_fungibility=fungibility,
        preemption=preemption,
        fair_sharing_weight=field_weight(ctx, spec, "spec"),
        admission_mode=None
        if mode is None
        else field_enum(
            ctx, scope, "admissionMode", "spec.admissionScope", AdmissionMode, AdmissionMode.NO_AFS
        ),
        stop_policy=field_enum(ctx, spec, "stopPolicy", "spec", StopPolicy, StopPolicy.NONE),
    )


def _local_queue(ctx: Ctx, doc: Mapping[str, object]) -> LocalQueue:
    meta = field_map(ctx, doc, "metadata", required=True)
    spec = field_map(ctx, doc, "spec", required=True)
    ns = field_str(ctx, meta, "namespace", "metadata", default="default") or "default"
    status = field_map(ctx, doc, "status")
    fs = field_map(ctx, status, "fairSharing", "status")
    afs = field_map(ctx, fs, "admissionFairSharingStatus", "status.fairSharing")
    apath = "status.fairSharing.admissionFairSharingStatus"
    consumed = field_map(ctx, afs, "consumedResources", apath)
    consumed_q = tuple(
        sorted(
            (str(r), field_qty(ctx, consumed, str(r), join(apath, "consumedResources")) or 0)
            for r in consumed
        )
    )
    return LocalQueue(
        namespace=ns,
        name=field_name(ctx, meta, "metadata"),
        cluster_queue=ClusterQueueName(field_str(ctx, spec, "clusterQueue", "spec", required=True) or ""),
        stop_policy=field_enum(ctx, spec, "stopPolicy", "spec", StopPolicy, StopPolicy.NONE),
        fair_sharing_weight=field_weight(ctx, spec, "spec"),
        afs_consumed=consumed_q,
        afs_last_update=field_time(ctx, afs, "lastUpdate", apath),
    )


def _priority_class(ctx: Ctx, doc: Mapping[str, object]) -> WorkloadPriorityClass:
    meta = field_map(ctx, doc, "metadata", required=True)
    value = field_int(ctx, doc, "value")
    if value is None:
        raise ctx.err("required field is missing", "value")
    return WorkloadPriorityClass(name=field_name(ctx, meta, "metadata"), value=value)


# topologyRequest keys that constrain placement (Kueue TAS, apis/kueue/v1beta2/workload_types.go
# PodSetTopologyRequest). Kueue's batch/job integration sets `podIndexLabel` (and the subGroup
# labels) on EVERY Workload it creates, TAS or not: those only name pod labels and do not change
