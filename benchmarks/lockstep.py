"""Core-level differential check: the reference and the fast core driven in lock step, cycle by cycle.

Independent of the simulator's scenario format: two snapshots (``REFERENCE`` and the fast paths) and two
queue managers are built from the same Kueue objects and fed the same random stream of changes — new
pending workloads (several shapes and priorities, some with minCount for partial admission), finished
workloads, quota changes (nominal, borrowingLimit, lendingLimit) — with cycles run after each batch as the
simulator runs them (heads, cycle, commit, requeue; preemption victims evicted and requeued; cohort events
for what changed). Every cycle's decisions (admissions, preemptions, every head's outcome with its reason
words) must be identical.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fairshare.manifests import parse_manifests
from fairshare.models import FlavorResource, PodSet, ResourceQuota, Workload
from fairshare.queues import QueueManager
from fairshare.scheduler import SchedulerConfig, apply_cycle, schedule_cycle
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo

from .decisions import cycle_repr

GPU = "nvidia.com/gpu"


@dataclass
class _Side:
    snapshot: Snapshot
    queues: QueueManager


def _side(objects: list[dict[str, object]], config: SchedulerConfig, core: FastPaths) -> _Side:
    snap = Snapshot.from_state(parse_manifests(objects), paths=core)
    return _Side(snap, QueueManager.from_snapshot(snap, config, pending=()))


def lockstep_difference(
    objects: list[dict[str, object]], *, fair_sharing: bool, seed: int, steps: int = 60,
    core: FastPaths = FAST,
) -> str | None:
    """None when both cores decide every cycle of the run identically; else the first difference."""
    rng = random.Random(seed)
    config = SchedulerConfig(fair_sharing=fair_sharing)
    sides = [_side(objects, config, REFERENCE), _side(objects, config, core)]
    state = parse_manifests(objects)
    lqs = sorted(state.local_queues)
    classes = sorted(pc.value for pc in state.priority_classes.values()) or [0]
    cq_names = sorted(state.cluster_queues)
    workloads: dict[str, Workload] = {}
    now = 0.0
    serial = 0
    for step in range(steps):
        now += rng.choice([1.0, 30.0, 600.0])
        changed: set[str] = set()
        for _ in range(rng.randint(0, 4)):  # arrivals
            lq = state.local_queues[rng.choice(lqs)]
            serial += 1
            count = rng.choice([1, 1, 2, 3])
            requests: tuple[tuple[str, int], ...] = ((GPU, 1000 * rng.choice([1, 1, 2, 4])),)
            if rng.random() < 0.3:
                requests = (("cpu", rng.choice([500, 1000])), *requests)
            wl = Workload(
                namespace=lq.namespace, name=f"w{serial:05d}", queue_name=lq.name,
                pod_sets=(PodSet("main", count, requests, min_count=1 if count > 1 and rng.random() < 0.3
                                 else None),),
                priority=rng.choice(classes), creation_timestamp=now, uid=f"{serial:010d}",
            )
            workloads[wl.key] = wl
            for s in sides:
                s.queues.push(WorkloadInfo.pending(wl, lq.cluster_queue))
        admitted = sorted(sides[0].snapshot.workloads)
        for key in rng.sample(admitted, min(len(admitted), rng.randint(0, 2))):  # finishes
            for s in sides:
                info = s.snapshot.remove_workload(key)
                changed.add(info.cluster_queue)
        if rng.random() < 0.15:  # a quota change
            cq = rng.choice(cq_names)
            node = sides[0].snapshot.cluster_queues[cq].node
            frs = sorted(node.quotas)
            if frs:
                fr: FlavorResource = rng.choice(frs)
                old = node.quotas[fr]
                has_parent = node.parent is not None
                quota = ResourceQuota(
                    rng.choice([0, 1000, 2000, 4000, 8000]),
                    rng.choice([None, 0, 2000]) if has_parent else None,
                    rng.choice([None, 0, 1000]) if has_parent else old.lending_limit,
                )
                for s in sides:
                    s.snapshot.set_quota(s.snapshot.cluster_queue(cq).node, fr, quota)
                changed.add(cq)
        for s in sides:
            for cq in sorted(changed):
                s.queues.notify_cohort_event(cq)
        for cycle in range(50):  # cycles at this instant, as the simulator runs them
            heads = [s.queues.heads(now) for s in sides]
            if [h.key for h in heads[0]] != [h.key for h in heads[1]]:
                return f"seed {seed} step {step} cycle {cycle}: different heads"
            if not heads[0]:
                break
            results = [schedule_cycle(s.snapshot, now=now, config=config, heads=h)
                       for s, h in zip(sides, heads, strict=True)]
            a, b = cycle_repr(results[0]), cycle_repr(results[1])
            if a != b:
                diff = next((f"{x!r} vs {y!r}" for x, y in zip(a, b, strict=False) if x != y), "lengths")
                return f"seed {seed} step {step} cycle {cycle}: {diff}"
            for s, h, r in zip(sides, heads, results, strict=True):
                apply_cycle(s.snapshot, r)
                s.queues.requeue_after_cycle(h, r)
                for p in r.preemptions:  # evicted: requeued with its creation time (Kueue)
                    s.queues.push(WorkloadInfo.pending(workloads[p.victim], p.victim_cluster_queue))
                    s.queues.notify_cohort_event(p.victim_cluster_queue)
            if not results[0].admissions and not results[0].preemptions:
                break
    return None
