"""Hypothesis strategies for random quota trees and workloads (built with tests.builders)."""

from __future__ import annotations

from hypothesis import strategies as st

from fairshare.models import ClusterState
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, CohortBuilder, StateBuilder, WorkloadBuilder

FLAVORS = ("f1", "f2")


@st.composite
def cluster_states(
    draw: st.DrawFn, *, fair_sharing: bool = False, max_cqs: int = 5, admitted: bool = True
) -> ClusterState:
    """A random tree: root cohort, optional sub-cohorts, CQs with cpu quotas on 1-2 flavors,
    admitted workloads charged only while they fit, pending workloads one per CQ or more."""
    sb = StateBuilder().flavors(*FLAVORS)
    n_sub = draw(st.integers(0, 2))
    cohorts = ["root"] + [f"sub{i}" for i in range(n_sub)]
    root = CohortBuilder("root")
    if draw(st.booleans()):
        root.quota("f1", "cpu", draw(st.integers(0, 4)))
    sb.cohort(root)
    for c in cohorts[1:]:
        cb = CohortBuilder(c).parent("root")
        cb.quota("f1", "cpu", draw(st.integers(0, 3)), lending_limit=draw(st.none() | st.integers(0, 3)))
        sb.cohort(cb)
    n_cqs = draw(st.integers(1, max_cqs))
    reclaim_choices = ["Never", "LowerPriority", "Any"]
    for i in range(n_cqs):
        name = f"cq{i}"
        cb = ClusterQueueBuilder(name).cohort(draw(st.sampled_from(cohorts)))
        n_flavors = draw(st.integers(1, 2))
        for f in FLAVORS[:n_flavors]:
            cb.quota(
                f,
                "cpu",
                draw(st.integers(0, 6)),
                borrowing_limit=draw(st.none() | st.integers(0, 4)),
                lending_limit=draw(st.none() | st.integers(0, 4)),
            )
        reclaim = draw(st.sampled_from(reclaim_choices))
        borrow = (
            "Never"
            if reclaim == "Never" or fair_sharing
            else draw(st.sampled_from(["Never", "LowerPriority"]))
        )
        cb.preemption(
            within=draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
            reclaim=reclaim,
            borrow=borrow,
            max_priority_threshold=draw(st.none() | st.integers(0, 3)) if borrow != "Never" else None,
        )
        if draw(st.booleans()):
            cb.fungibility(
                when_can_borrow=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
                when_can_preempt=draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"])),
            )
        if fair_sharing:
            cb.weight(draw(st.sampled_from(["1", "2", "0.5"])))
        if draw(st.integers(0, 4)) == 0:
            cb.strict_fifo()
        sb.cq(cb, local_queue="main")
    state = sb.build()
    if admitted:
        snap = Snapshot.from_state(state)
        t = 0.0
        for j in range(draw(st.integers(0, 10))):
            cq = f"cq{draw(st.integers(0, n_cqs - 1))}"
            flavors = [fq.name for g in state.cluster_queues[cq].resource_groups for fq in g.flavors]
            flavor = draw(st.sampled_from(flavors))
            cpu = draw(st.integers(1, 3))
            t += 1
            wb = WorkloadBuilder(cq, f"a{j}").priority(draw(st.integers(0, 3))).request("cpu", cpu).created(t)
            wl = wb.admitted(cq, flavor, at=t).build()
            from fairshare.workload import WorkloadInfo

            info = WorkloadInfo.admitted(wl)
            if snap.cluster_queues[cq].fits(info.usage):
                snap.add_workload(info)
                sb.wl(wl)
    for j in range(draw(st.integers(1, 8))):
        cq = f"cq{draw(st.integers(0, n_cqs - 1))}"
        sb.wl(
            WorkloadBuilder(cq, f"p{j}")
            .priority(draw(st.integers(0, 4)))
            .request("cpu", draw(st.integers(1, 5)))
            .created(100.0 + j)
        )
    return sb.build()


@st.composite
def preemption_states(draw: st.DrawFn) -> ClusterState:
    """A cohort filled with low-priority admitted work and high-priority pending heads."""
    from fairshare.workload import WorkloadInfo

    sb = StateBuilder().flavors(*FLAVORS)
    n_cqs = draw(st.integers(1, 3))
    cohort = draw(st.sampled_from(["all", None]))
    for i in range(n_cqs):
        cb = ClusterQueueBuilder(f"cq{i}")
        if cohort:
            cb.cohort(cohort)
        for f in FLAVORS[: draw(st.integers(1, 2))]:
            cb.quota(
                f,
                "cpu",
                draw(st.integers(1, 6)),
                borrowing_limit=draw(st.none() | st.integers(0, 4)) if cohort else None,
                lending_limit=draw(st.none() | st.integers(0, 4)) if cohort else None,
            )
        reclaim = draw(st.sampled_from(["LowerPriority", "Any", "Never"])) if cohort else "Never"
        borrow = draw(st.sampled_from(["Never", "LowerPriority"])) if reclaim != "Never" else "Never"
        cb.preemption(
            within=draw(st.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority", "Never"])),
            reclaim=reclaim,
            borrow=borrow,
            max_priority_threshold=draw(st.none() | st.integers(0, 2)) if borrow != "Never" else None,
        )
        sb.cq(cb, local_queue="main")
    state = sb.build()
    snap = Snapshot.from_state(state)
    for j in range(draw(st.integers(2, 14))):
        cq = f"cq{draw(st.integers(0, n_cqs - 1))}"
        flavors = [fq.name for g in state.cluster_queues[cq].resource_groups for fq in g.flavors]
        wl = (
            WorkloadBuilder(cq, f"a{j}")
            .priority(draw(st.integers(0, 2)))
            .request("cpu", draw(st.integers(1, 3)))
            .created(float(j))
            .admitted(cq, draw(st.sampled_from(flavors)), at=float(j))
            .build()
        )
        info = WorkloadInfo.admitted(wl)
        if snap.cluster_queues[cq].fits(info.usage):
            snap.add_workload(info)
            sb.wl(wl)
    for i in range(n_cqs):
        sb.wl(
            WorkloadBuilder(f"cq{i}", "head")
            .priority(draw(st.integers(1, 4)))
            .request("cpu", draw(st.integers(1, 6)))
            .created(100.0)
        )
    return sb.build()
