"""Where things sit in the history graph: paths of ClusterQueues and workloads, weights from Kueue.

The graph mirrors Kueue's tree: root -> cohorts (nested) -> ClusterQueues -> LocalQueues -> optionally one
node per value of a workload label (a project or user; which label is the caller's choice). Weights are
Kueue's ``fairSharing.weight`` of each Cohort, ClusterQueue and LocalQueue (milli-units).
"""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.history.graph import UsageHistoryGraph
from fairshare.history.paths import NodeKind, NodePath
from fairshare.models import ClusterQueueName
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo

UNLABELLED = "unlabelled"  # the project node of workloads without the label


def cluster_queue_paths(snapshot: Snapshot) -> dict[ClusterQueueName, NodePath]:
    """The path of every ClusterQueue, through its cohort chain (root first)."""
    out: dict[ClusterQueueName, NodePath] = {}
    for name in sorted(snapshot.cluster_queues):
        chain: list[str] = []
        node = snapshot.cluster_queues[name].node.parent
        while node is not None:
            chain.append(node.name)
            node = node.parent
        path = NodePath.root()
        for cohort in reversed(chain):
            path = path.child(NodeKind.COHORT, cohort)
        out[name] = path.child(NodeKind.CLUSTER_QUEUE, name)
    return out


def workload_path(info: WorkloadInfo, cq_paths: Mapping[ClusterQueueName, NodePath],
                  project_label: str | None = None) -> NodePath:
    """The node a workload's usage is charged to: its LocalQueue, or the label value's node under it."""
    path = cq_paths[info.cluster_queue].child(NodeKind.LOCAL_QUEUE, info.local_queue)
    if project_label is None:
        return path
    value = dict(info.workload.labels).get(project_label) or UNLABELLED
    return path.child(NodeKind.PROJECT, value)


def sync_structure(graph: UsageHistoryGraph, snapshot: Snapshot) -> dict[ClusterQueueName, NodePath]:
    """Add every cohort, ClusterQueue and LocalQueue of ``snapshot`` to ``graph`` with Kueue's weights.

    Nodes are never removed (their history stays until it decays); returns the ClusterQueue paths.
    """
    cq_paths = cluster_queue_paths(snapshot)
    for name, path in cq_paths.items():
        node = snapshot.cluster_queues[name].node
        graph.add_node(path, weight=node.weight)
        ancestor, up = path.parent, node.parent
        while ancestor is not None and up is not None:
            graph.add_node(ancestor, weight=up.weight)
            ancestor, up = ancestor.parent, up.parent
    for key in sorted(snapshot.local_queues):
        lq = snapshot.local_queues[key]
        if lq.cluster_queue in cq_paths:
            graph.add_node(cq_paths[lq.cluster_queue].child(NodeKind.LOCAL_QUEUE, key),
                           weight=lq.fair_sharing_weight)
    return cq_paths
