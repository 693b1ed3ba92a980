from __future__ import annotations

from dataclasses import replace

from fairshare.history.layout import cluster_queue_paths, sync_structure, workload_path
from fairshare.models import LocalQueue
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, CohortBuilder, StateBuilder, WorkloadBuilder

from .helpers import graph, path


def state_snapshot() -> Snapshot:
    state = (StateBuilder().flavors("a100")
             .cohort(CohortBuilder("research").parent("all").weight("2"))
             .cq(ClusterQueueBuilder("frontier").cohort("research").quota("a100", "nvidia.com/gpu", "4")
                 .weight("3"), local_queue="main")
             .cq(ClusterQueueBuilder("solo").quota("a100", "nvidia.com/gpu", "1"), local_queue="main")
             .build())
    snap = Snapshot.from_state(state)
    snap.local_queues["frontier/main"] = LocalQueue("frontier", "main", "frontier", fair_sharing_weight=500)
    return snap


def test_cluster_queue_paths_follow_the_cohort_chain_from_the_root() -> None:
    assert {k: str(v) for k, v in cluster_queue_paths(state_snapshot()).items()} == {
        "frontier": "/cohort:all/cohort:research/cq:frontier", "solo": "/cq:solo"}


def test_sync_structure_adds_every_queue_with_kueue_weights() -> None:
    g = graph()
    sync_structure(g, state_snapshot())
    assert {str(p): g.weight(p) for p in g.nodes()} == {
        "/": 1000, "/cohort:all": 1000, "/cohort:all/cohort:research": 2000,
        "/cohort:all/cohort:research/cq:frontier": 3000,
        "/cohort:all/cohort:research/cq:frontier/lq:frontier/main": 500,
        "/cq:solo": 1000, "/cq:solo/lq:solo/main": 1000}


def test_a_workload_is_charged_to_its_local_queue_or_its_project_label_value() -> None:
    snap = state_snapshot()
    cq_paths = cluster_queue_paths(snap)
    wl = WorkloadBuilder("frontier", "exp-1").queue("main").request("nvidia.com/gpu", "1").build()
    labelled = WorkloadInfo.pending(replace(wl, labels=(("team.example/project", "llm"),)), "frontier")
    plain = WorkloadInfo.pending(wl, "frontier")
    assert workload_path(plain, cq_paths) == path("/cohort:all/cohort:research/cq:frontier/lq:frontier/main")
    assert workload_path(labelled, cq_paths, "team.example/project") == path(
        "/cohort:all/cohort:research/cq:frontier/lq:frontier/main/project:llm")
    assert workload_path(plain, cq_paths, "team.example/project") == path(
        "/cohort:all/cohort:research/cq:frontier/lq:frontier/main/project:unlabelled")
