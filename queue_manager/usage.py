"""Usage accounting: Workloads holding quota -> intervals in the policy's history graph.

Level-triggered: each reconcile compares the Workload cache with the graph's open
intervals (start what holds quota now, stop what no longer does), so a missed watch
event or a restart never double-counts. The graph lives in QuotaPolicy status.history
(written periodically and on shutdown) and is restored from it on start.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from fairshare.errors import InputError, Location
from fairshare.history import HalfLife, NodeKind, NodePath, UsageHistoryGraph, fair_tree, from_dict, to_dict
from fairshare.models import Workload
from fairshare.policy import QuotaPolicy, format_milli, half_life_seconds
from fairshare.policy.units import to_milli

from .metrics import Metrics

log = logging.getLogger("queue_manager.usage")


def cluster_queue_paths(policy: QuotaPolicy) -> dict[str, NodePath]:
    """History path of each team's ClusterQueue: root -> cohorts (path order) -> cq."""
    out: dict[str, NodePath] = {}
    for team in policy.spec.teams:
        path = NodePath.root()
        for cohort in (team.cohort.split("/") if team.cohort else []):
            path = path.child(NodeKind.COHORT, cohort)
        out[team.name] = path.child(NodeKind.CLUSTER_QUEUE, team.name)
    return out


def _valid_segment(name: str) -> bool:
    return bool(name) and "/" not in name and ":" not in name


def workload_path(wl: Workload, cq_path: NodePath, project_label: str | None) -> NodePath:
    """cq -> lq:namespace/queue -> project:<label value> (when the policy names a label)."""
    path = cq_path.child(NodeKind.LOCAL_QUEUE, f"{wl.namespace}/{wl.queue_name}")
    if project_label:
        value = dict(wl.labels).get(project_label)
        if value and _valid_segment(value):
            path = path.child(NodeKind.PROJECT, value)
    return path


def _finish_time(wl: Workload) -> float | None:
    cond = wl.condition("Finished")
    return cond.last_transition_time if cond is not None and cond.status else None


@dataclass
class PolicyHistory:
    """The history graph of one policy and how it is kept in step with the cluster."""

    graph: UsageHistoryGraph
    half_life_s: float

    @staticmethod
    def restore_or_new(policy: QuotaPolicy, stored: object, now: float) -> PolicyHistory:
        half_life = half_life_seconds(policy)
        if isinstance(stored, Mapping) and stored:
            try:
                graph = from_dict(dict(stored), location=Location(document=f"QuotaPolicy {policy.name}",
                                                                  field="status.history"))
            except InputError as err:
                log.warning("usage history of %s not restored, starting empty: %s", policy.name,
                            err.one_line())
            else:
                if abs(graph.half_life.seconds - half_life) < 1e-3:
                    return PolicyHistory(graph, half_life)
                log.info("half-life of %s changed: usage history restarts", policy.name)
        return PolicyHistory(UsageHistoryGraph(HalfLife.of_seconds(half_life), created_at=now), half_life)

    def clamp(self, t: float) -> float:
        """Reads and writes never go before what the graph has seen (it refuses the past)."""
        return max(t, self.graph.watermark_tick / 1000)

    def sync(self, policy: QuotaPolicy, workloads: Mapping[str, Workload], now: float) -> tuple[int, int]:
        """Start/stop intervals so that open intervals == workloads holding quota in this
        policy's ClusterQueues. Returns (started, stopped)."""
        now = self.clamp(now)
        cq_paths = cluster_queue_paths(policy)
        for team in policy.spec.teams:
            self.graph.add_node(cq_paths[team.name], weight=to_milli(team.fair_share_weight))
        project_label = policy.spec.fair_share.project_label
        holding: dict[str, Workload] = {}
        for key, wl in workloads.items():
            adm = wl.admission
            if adm is None or adm.cluster_queue not in cq_paths or not wl.has_quota_reservation \
                    or wl.is_finished:
                continue
            holding[key] = wl
        open_now = {i.key: i for i in self.graph.running()}
        stopped = 0
        for key in sorted(open_now):
            if key in holding:
                continue
            wl_gone = workloads.get(key)
            end = _finish_time(wl_gone) if wl_gone is not None else None
            start = open_now[key].start_tick / 1000
            self.graph.stop(key, min(now, max(start, end if end is not None else now)))
            stopped += 1
        started = 0
        for key in sorted(holding):
            if key in open_now:
                continue
            wl = holding[key]
            adm = wl.admission
            if adm is None:
                continue
            path = workload_path(wl, cq_paths[adm.cluster_queue], project_label)
            # Condition times have 1 s resolution and may predate the graph's watermark.
            at = min(now, self.clamp(wl.quota_reserved_time))
            self.graph.start(key, path, adm.usage(), at)
            started += 1
        return started, stopped

    def serialize(self) -> dict[str, object]:
        return to_dict(self.graph)


# Prometheus has no exact infinity for a gauge that dashboards divide by; LF = inf (no usage)
# is exported as this large finite number.
LF_INFINITE = 1e9


def export_metrics(history: PolicyHistory, policy: str, metrics: Metrics, now: float) -> None:
    """Fair Tree factor, level fair share and decayed usage of every node (see metrics.py)."""
    at = history.clamp(now)
    usage = history.graph.usage_all(at)
    result = fair_tree(history.graph, at, usage=usage)
    for path, node in result.nodes.items():
        if path.is_root:
            continue
        name = str(path)
        metrics.fair_share.labels(policy, name).set(float(node.factor))
        lf = node.level_fs
        metrics.level_fair_share.labels(policy, name).set(LF_INFINITE if lf is None else float(lf))
        for fr, milli in usage.get(path, {}).items():
            metrics.decayed_usage.labels(policy, name, fr.flavor, fr.resource).set(milli / 1000)


# History-adjusted Kueue weights move within [w/4, 4w], in steps of 2^(1/8) so that usage
# creeping along does not rewrite the ClusterQueues every tick.
MAX_BOOST = 4.0
STEPS_PER_DOUBLING = 8


def history_weights(policy: QuotaPolicy, history: PolicyHistory, now: float) -> dict[str, str]:
    """fairSharing.weight per team for Kueue: the policy's weight divided by how far the team
    is over its historical fair share (Fair Tree global usage / global share), bounded.
    A team that used half its share gets twice its weight, so Kueue's DRS (current usage)
    leans toward the teams history says are owed."""
    at = history.clamp(now)
    result = fair_tree(history.graph, at)
    paths = cluster_queue_paths(policy)
    root = result.nodes.get(NodePath.root())
    out: dict[str, str] = {}
    for team in sorted(policy.spec.teams, key=lambda t: t.name):
        base = to_milli(team.fair_share_weight)
        node = result.nodes.get(paths[team.name])
        multiplier = 1.0
        if node is not None and root is not None and root.usage > 0:
            over = node.over_share
            if over is not None:
                multiplier = MAX_BOOST if over == 0 else min(MAX_BOOST, max(1 / MAX_BOOST, 1 / float(over)))
                multiplier = 2 ** (round(math.log2(multiplier) * STEPS_PER_DOUBLING) / STEPS_PER_DOUBLING)
        out[team.name] = format_milli(max(1, round(base * multiplier)) if base else 0)
    return out
