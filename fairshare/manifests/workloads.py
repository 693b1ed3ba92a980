"""A Workload manifest into its model: pod sets with per-pod requests as Kubernetes computes them,
priority, conditions, admission, reclaimable pods, owner and eviction counts."""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.models import (
    Admission,
    ClusterQueueName,
    Condition,
    PodSet,
    PodSetAssignment,
    Toleration,
    Workload,
)

from .fields import (
    Ctx,
    field_int,
    field_list,
    field_map,
    field_name,
    field_qty,
    field_str,
    field_str_map,
    field_time,
    item_map,
    join,
)

PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"

def tolerations(ctx: Ctx, parent: Mapping[str, object], prefix: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(field_list(ctx, parent, "tolerations", prefix)):
        path = f"{join(prefix, 'tolerations')}[{i}]"
        raw = item_map(ctx, item, path)
        op = field_str(ctx, raw, "operator", path, default="Equal") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ctx.err("must be Equal or Exists", join(path, "operator"), op)
        out.append(
            Toleration(
                key=field_str(ctx, raw, "key", path, default="") or "",
                operator=op,
                value=field_str(ctx, raw, "value", path, default="") or "",
                effect=field_str(ctx, raw, "effect", path, default="") or "",
            )
        )
    return tuple(out)


_TOPOLOGY_CONSTRAINTS = ("podSetGroupName", "podSetSliceRequiredTopology", "podSetSliceSize",
                         "preferred", "required", "unconstrained")


def pod_requests(ctx: Ctx, pod_spec: Mapping[str, object], path: str) -> dict[str, int]:
    """Per-pod requests as Kubernetes computes them (k8s.io/component-helpers resource.PodRequests).

    Regular containers are summed; restartable init containers (sidecars) add to that sum;
    a plain init container needs its own request plus the sidecars started before it; the
    pod needs the larger of the two, plus ``spec.overhead``. A container with a limit and no
    request requests its limit (API defaulting).
    """

    def container_requests(i: int, c: object, field: str) -> tuple[dict[str, int], bool]:
        cpath = f"{path}.{field}[{i}]"
        craw = item_map(ctx, c, cpath)
        res = field_map(ctx, craw, "resources", cpath)
        rpath = join(cpath, "resources")
        lim_raw = field_map(ctx, res, "limits", rpath)
        req_raw = field_map(ctx, res, "requests", rpath)
        limits = {str(k): field_qty(ctx, lim_raw, str(k), join(rpath, "limits")) or 0 for k in lim_raw}
        reqs = {str(k): field_qty(ctx, req_raw, str(k), join(rpath, "requests")) or 0 for k in req_raw}
        for k, v in limits.items():
            reqs.setdefault(k, v)
        return reqs, craw.get("restartPolicy") == "Always"

    total: dict[str, int] = {}
    for i, c in enumerate(field_list(ctx, pod_spec, "containers", path)):
        for k, v in container_requests(i, c, "containers")[0].items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, c in enumerate(field_list(ctx, pod_spec, "initContainers", path)):
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
    overhead = field_map(ctx, pod_spec, "overhead", path)
    for k in overhead:
        total[str(k)] = total.get(str(k), 0) + (field_qty(ctx, overhead, str(k), join(path, "overhead")) or 0)
    return {k: v for k, v in total.items() if v}


def _pod_set(ctx: Ctx, raw: Mapping[str, object], path: str) -> PodSet:
    topology = raw.get("topologyRequest")
    if topology is not None:
        if not isinstance(topology, Mapping):
            raise ctx.err("must be a mapping", join(path, "topologyRequest"), topology)
        for key in _TOPOLOGY_CONSTRAINTS:
            if topology.get(key) is not None:
                raise ctx.unsupported(join(join(path, "topologyRequest"), key))
    count = field_int(ctx, raw, "count", path, default=1)
    if count is None or count < 0:
        raise ctx.err("must be a non-negative integer", join(path, "count"), raw.get("count"))
    min_count = field_int(ctx, raw, "minCount", path)
    if min_count is not None and not 0 < min_count <= count:
        raise ctx.err("must be between 1 and count", join(path, "minCount"), min_count)
    template = field_map(ctx, raw, "template", path, required=True)
    tpath = join(path, "template")
    pod_spec = field_map(ctx, template, "spec", tpath, required=True)
    spath = join(tpath, "spec")
    affinity = field_map(ctx, pod_spec, "affinity", spath)
    node_aff = field_map(ctx, affinity, "nodeAffinity", join(spath, "affinity"))
    if node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        raise ctx.unsupported(
            join(spath, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
        )
    requests = pod_requests(ctx, pod_spec, spath)
    selector = field_str_map(ctx, pod_spec, "nodeSelector", spath)
    return PodSet(
        name=field_str(ctx, raw, "name", path, default="main") or "main",
        count=count,
        requests=tuple(sorted(requests.items())),
        node_selector=tuple(sorted(selector.items())),
        tolerations=tolerations(ctx, pod_spec, spath),
        min_count=min_count,
    )


def parse_workload(ctx: Ctx, doc: Mapping[str, object]) -> Workload:
    meta = field_map(ctx, doc, "metadata", required=True)
    spec = field_map(ctx, doc, "spec", required=True)
    status = field_map(ctx, doc, "status")
    ns = field_str(ctx, meta, "namespace", "metadata", default="default") or "default"
    pod_sets = []
    names: set[str] = set()
    raw_sets = field_list(ctx, spec, "podSets", "spec", required=True)
    if not raw_sets:
        raise ctx.err("must list at least one pod set", "spec.podSets")
    for i, ps in enumerate(raw_sets):
        p = _pod_set(ctx, item_map(ctx, ps, f"spec.podSets[{i}]"), f"spec.podSets[{i}]")
        if p.name in names:
            raise ctx.err("duplicate pod set name", f"spec.podSets[{i}].name", p.name)
        names.add(p.name)
        pod_sets.append(p)
    pcr = field_map(ctx, spec, "priorityClassRef", "spec")
    pc_name = field_str(ctx, pcr, "name", "spec.priorityClassRef") if pcr else None
    pc_kind = (
        field_str(ctx, pcr, "kind", "spec.priorityClassRef", default="WorkloadPriorityClass") if pcr else None
    )
    priority = field_int(ctx, spec, "priority", "spec")
    conditions = []
    for i, c in enumerate(field_list(ctx, status, "conditions", "status")):
        cpath = f"status.conditions[{i}]"
        craw = item_map(ctx, c, cpath)
        st = craw.get("status")
        if st not in ("True", "False", "Unknown", True, False):
            raise ctx.err("must be True, False or Unknown", join(cpath, "status"), st)
        conditions.append(
            Condition(
                type=field_str(ctx, craw, "type", cpath, required=True) or "",
                status=st in ("True", True),
                reason=field_str(ctx, craw, "reason", cpath, default="") or "",
                message=field_str(ctx, craw, "message", cpath, default="") or "",
                last_transition_time=field_time(ctx, craw, "lastTransitionTime", cpath) or 0.0,
            )
        )
    admission = None
    adm = field_map(ctx, status, "admission", "status")
    if adm:
        psas = []
        for i, a in enumerate(field_list(ctx, adm, "podSetAssignments", "status.admission", required=True)):
            apath = f"status.admission.podSetAssignments[{i}]"
            araw = item_map(ctx, a, apath)
            flavors = field_str_map(ctx, araw, "flavors", apath)
            usage_raw = field_map(ctx, araw, "resourceUsage", apath)
            upath = join(apath, "resourceUsage")
            usage = {str(r): field_qty(ctx, usage_raw, str(r), upath) or 0 for r in usage_raw}
            psname = field_str(ctx, araw, "name", apath, default="main") or "main"
            count = field_int(ctx, araw, "count", apath)
            if not usage_raw:
                # resourceUsage omitted: charge the pod set's full request (what Kueue would have written).
                match = next((p for p in pod_sets if p.name == psname), None)
                if match is None:
                    raise ctx.err("no pod set of that name in spec.podSets", join(apath, "name"), psname)
                usage = match.total(count)
            missing = sorted(set(usage) - set(flavors))
            if missing:
                raise ctx.err(
                    f"resource {missing[0]} has usage but no flavor", join(apath, "flavors"), flavors
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
            cluster_queue=ClusterQueueName(
                field_str(ctx, adm, "clusterQueue", "status.admission", required=True) or ""
            ),
            pod_set_assignments=tuple(psas),
        )
    created = field_time(ctx, meta, "creationTimestamp", "metadata")
    reclaimable: dict[str, int] = {}
    for i, r in enumerate(field_list(ctx, status, "reclaimablePods", "status")):
        rpath = f"status.reclaimablePods[{i}]"
        rraw = item_map(ctx, r, rpath)
        rname = field_str(ctx, rraw, "name", rpath, required=True) or ""
        rcount = field_int(ctx, rraw, "count", rpath, default=0) or 0
        if rname not in names or rcount < 0:
            raise ctx.err("must name a pod set of spec.podSets with a non-negative count", rpath, r)
        reclaimable[rname] = rcount
    annotations = field_str_map(ctx, meta, "annotations", "metadata")
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
        name=field_name(ctx, meta, "metadata"),
        queue_name=field_str(ctx, spec, "queueName", "spec", default="") or "",
        pod_sets=tuple(pod_sets),
        priority=priority if priority is not None else 0,
        creation_timestamp=created if created is not None else 0.0,
        uid=field_str(ctx, meta, "uid", "metadata", default="") or "",
        priority_class=pc_name,
        priority_class_kind=pc_kind,
        active=spec.get("active") is not False,
        labels=tuple(sorted(field_str_map(ctx, meta, "labels", "metadata").items())),
        admission=admission,
        conditions=tuple(conditions),
        requeue_at=field_time(
            ctx, field_map(ctx, status, "requeueState", "status"), "requeueAt", "status.requeueState"
        ),
        explicit_priority=priority is not None,
        priority_boost=boost,
        reclaimable_pods=tuple(sorted(reclaimable.items())),
        owner_kind=owner[0] if owner else None,
        owner_name=owner[1] if owner else None,
        deletion_timestamp=field_time(ctx, meta, "deletionTimestamp", "metadata"),
        accumulated_past_execution_seconds=field_int(
            ctx, status, "accumulatedPastExecutionTimeSeconds", "status"
        ),
        eviction_stats=_eviction_stats(ctx, status),
    )


def _owner(ctx: Ctx, meta: Mapping[str, object]) -> tuple[str, str] | None:
    """The controller owner reference (the Job Kueue made the Workload for), else the first one."""
    refs = [
        (i, item_map(ctx, r, f"metadata.ownerReferences[{i}]"))
        for i, r in enumerate(field_list(ctx, meta, "ownerReferences", "metadata"))
    ]
    chosen = next(((i, r) for i, r in refs if r.get("controller") is True), refs[0] if refs else None)
    if chosen is None:
        return None
    i, ref = chosen
    path = f"metadata.ownerReferences[{i}]"
    kind = field_str(ctx, ref, "kind", path, required=True) or ""
    return kind, field_str(ctx, ref, "name", path, required=True) or ""


def _eviction_stats(ctx: Ctx, status: Mapping[str, object]) -> tuple[tuple[str, str, int], ...]:
    """status.schedulingStats.evictions (Kueue pkg/workload workloadEvictionStateInc counts each eviction)."""
    stats = field_map(ctx, status, "schedulingStats", "status")
    out: list[tuple[str, str, int]] = []
    for i, e in enumerate(field_list(ctx, stats, "evictions", "status.schedulingStats")):
        path = f"status.schedulingStats.evictions[{i}]"
        raw = item_map(ctx, e, path)
        count = field_int(ctx, raw, "count", path, default=0) or 0
        if count < 0:
            raise ctx.err("must be a non-negative integer", join(path, "count"), count)
        out.append((
            field_str(ctx, raw, "reason", path, default="") or "",
            field_str(ctx, raw, "underlyingCause", path, default="") or "",
            count,
        ))
    return tuple(sorted(out))
