"""The usage history graph of one policy: where usage is charged (the one layout rule) and how the observed
cluster is kept in it, for both shells; and the history-adjusted Kueue weights.

Layout (DESIGN.md "Usage history graph"): root -> the team's cohort path (root first) -> the team's
ClusterQueue -> the LocalQueue "namespace/name" -> with `spec.fairShare.projectLabel`, one node per value of
that workload label. A workload without the label (or with a value that is not a valid node name) is
charged to the project node `unlabelled`, so that with a project label every charge sits on a leaf and a
LocalQueue's usage is the sum of its projects. Shares: a ClusterQueue's is the team's `fairShareWeight`
(never the weight pushed to Kueue, which is derived from this history); cohorts, LocalQueues and projects
weigh 1.

Two ways to keep it current, same charges: the simulator reports each admission and release as it
happens (`start`/`stop`); the operator, whose watch may miss events, compares the workloads holding quota
with the open intervals on every reconcile (`sync`), so a restart or a lost event never double-counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fairshare.errors import InputError, Location
from fairshare.history import HalfLife, NodeKind, NodePath, UsageHistoryGraph, fair_tree, from_dict, to_dict
from fairshare.models import ClusterQueueName, LocalQueueKey, Milli, WorkloadKey
from fairshare.policy import QuotaPolicy, format_milli, half_life_seconds
from fairshare.policy.units import to_milli
from fairshare.workload import WorkloadInfo

UNLABELLED = "unlabelled"


def _valid_segment(name: str) -> bool:
    return bool(name) and "/" not in name and ":" not in name


@dataclass(frozen=True, slots=True)
class HistoryLayout:
    """Where each team's usage goes in the graph, and the shares of the nodes (from the policy)."""

    cluster_queues: Mapping[ClusterQueueName, NodePath]
    weights: Mapping[NodePath, Milli]
    project_label: str | None
    # Each (ClusterQueue, LocalQueue)'s node once made (a path is validated as it is made, interpreted:
    # ~2% of a simulated run made it again for every admission).
    _local_queues: dict[tuple[ClusterQueueName, LocalQueueKey], NodePath] = field(
        default_factory=dict, compare=False, repr=False
    )

    @staticmethod
    def of(policy: QuotaPolicy) -> HistoryLayout:
        paths: dict[ClusterQueueName, NodePath] = {}
        weights: dict[NodePath, Milli] = {}
        for team in policy.spec.teams:
            path = NodePath.root()
            for cohort in team.cohort.split("/") if team.cohort else []:
                path = path.child(NodeKind.COHORT, cohort)
                weights.setdefault(path, 1000)
            cq = ClusterQueueName(team.name)
            paths[cq] = path.child(NodeKind.CLUSTER_QUEUE, team.name)
            weights[paths[cq]] = to_milli(team.fair_share_weight)
        return HistoryLayout(paths, weights, policy.spec.fair_share.project_label)

    def path_of(
        self, cluster_queue: ClusterQueueName, local_queue: LocalQueueKey, labels: Mapping[str, str]
    ) -> NodePath | None:
        """The node a workload's usage is charged to (None: not a ClusterQueue of the policy)."""
        path = self._local_queues.get((cluster_queue, local_queue))
        if path is None:
            cq = self.cluster_queues.get(cluster_queue)
            if cq is None:
                return None
            path = cq.child(NodeKind.LOCAL_QUEUE, local_queue)
            self._local_queues[(cluster_queue, local_queue)] = path
        if self.project_label is None:
            return path
        value = labels.get(self.project_label, "")
        return path.child(NodeKind.PROJECT, value if _valid_segment(value) else UNLABELLED)


class HistoryBook:
    """A policy's history graph with its layout; the shells feed it, the controller reads `graph`."""

    def __init__(self, graph: UsageHistoryGraph, layout: HistoryLayout) -> None:
        self.graph = graph
        self.layout = layout
        self._ensure_nodes()

    @staticmethod
    def new(policy: QuotaPolicy, now: float) -> HistoryBook:
        graph = UsageHistoryGraph(HalfLife.of_seconds(half_life_seconds(policy)), created_at=now)
        return HistoryBook(graph, HistoryLayout.of(policy))

    @staticmethod
    def restore(
        policy: QuotaPolicy,
        stored: Mapping[str, object] | None,
        now: float,
    ) -> tuple[HistoryBook, str | None]:
        """From `status.history`; a new graph (and the reason, to log) if it is unreadable or was kept
        with another half-life (decayed values cannot be converted)."""
        if not stored:
            return HistoryBook.new(policy, now), None
        try:
            graph = from_dict(
                dict(stored), location=Location(document=f"QuotaPolicy {policy.name}", field="status.history")
            )
        except InputError as err:
            why = f"usage history not restored, starting empty: {err.one_line()}"
            return HistoryBook.new(policy, now), why
        if abs(graph.half_life.seconds - half_life_seconds(policy)) >= 1e-3:
            return HistoryBook.new(policy, now), "the half-life changed: usage history restarts"
        return HistoryBook(graph, HistoryLayout.of(policy)), None

    def relayout(self, policy: QuotaPolicy) -> None:
        """A new policy generation (weights, project label): nodes are added, history is kept."""
        self.layout = HistoryLayout.of(policy)
        self._ensure_nodes()

    def follow(self, policy: QuotaPolicy, now: float) -> HistoryBook:
        """This book laid out for `policy` (`relayout`), or a new one from `now` when the policy's half-life
        changed: decayed values cannot be converted from one half-life to another."""
        if abs(self.graph.half_life.seconds - half_life_seconds(policy)) >= 1e-3:
            return HistoryBook.new(policy, now)
        self.relayout(policy)
        return self

    def _ensure_nodes(self) -> None:
        for path in sorted(self.layout.weights):
            self.graph.add_node(path, weight=self.layout.weights[path])

    def clamp(self, t: float) -> float:
        """Reads and writes never go before what the graph has seen (it refuses the past)."""
        return max(t, self.graph.watermark_tick / 1000)

    # --- feeding --------------------------------------------------------------------------------------

    def start(self, info: WorkloadInfo, at: float) -> bool:
        """An admitted workload (its usage and ClusterQueue in `info`) starts holding quota at `at`;
        False if it is not in a ClusterQueue of the policy (nothing is charged)."""
        path = self.layout.path_of(info.cluster_queue, info.local_queue, dict(info.workload.labels))
        if path is None:
            return False
        self.graph.start(info.key, path, dict(info.usage), self.clamp(at))
        return True

    def stop(self, key: WorkloadKey, at: float) -> None:
        if self.graph.is_open(key):
            self.graph.stop(key, self.clamp(at))

    def sync(
        self,
        holding: Mapping[WorkloadKey, WorkloadInfo],
        ended_at: Callable[[WorkloadKey], float | None],
        now: float,
    ) -> tuple[int, int]:
        """Level-triggered: open intervals == `holding` after the call. A workload that stopped holding is
        closed at its end time when known (`ended_at`: e.g. its Finished condition), else at `now`;
        one that holds is opened at its QuotaReserved time. Returns (started, stopped)."""
        now = self.clamp(now)
        open_now = {i.key: i for i in self.graph.running()}
        stopped = 0
        for key in sorted(open_now):
            if key in holding:
                continue
            end = ended_at(key)
            start = open_now[key].start_tick / 1000
            self.graph.stop(key, min(now, max(start, end if end is not None else now)))
            stopped += 1
        started = 0
        for key in sorted(holding):
            if key in open_now:
                continue
            info = holding[key]
            # Condition times have 1 s resolution and may predate the graph's watermark.
            reserved = info.quota_reserved_time
            at = min(now, self.clamp(reserved if reserved is not None else now))
            started += self.start(info, at)
        return started, stopped

    def serialize(self) -> dict[str, object]:
        return to_dict(self.graph)


# --- history-adjusted Kueue weights ------------------------------------------------------------------

# History-adjusted Kueue weights move within [w/4, 4w], in steps of 2^(1/8) so that usage creeping along
# does not rewrite the ClusterQueues every tick.
MAX_BOOST = 4.0
STEPS_PER_DOUBLING = 8


def history_weights(policy: QuotaPolicy, book: HistoryBook, now: float) -> dict[str, str]:
    """fairSharing.weight per team for Kueue: the policy's weight divided by how far the team is over its
    historical fair share (Fair Tree global usage / global share), bounded and quantized. A team that used
    half its share gets twice its weight, so Kueue's DRS (current usage) leans toward the teams history
    says are owed."""
    at = book.clamp(now)
    result = fair_tree(book.graph, at)
    root = result.nodes.get(NodePath.root())
    out: dict[str, str] = {}
    for team in sorted(policy.spec.teams, key=lambda t: t.name):
        base = to_milli(team.fair_share_weight)
        node = result.nodes.get(book.layout.cluster_queues[ClusterQueueName(team.name)])
        multiplier = 1.0
        if node is not None and root is not None and root.usage > 0:
            over = node.over_share
            if over is not None:
                multiplier = MAX_BOOST if over == 0 else min(MAX_BOOST, max(1 / MAX_BOOST, 1 / float(over)))
                multiplier = 2 ** (round(math.log2(multiplier) * STEPS_PER_DOUBLING) / STEPS_PER_DOUBLING)
        out[team.name] = format_milli(max(1, round(base * multiplier)) if base else 0)
    return out
