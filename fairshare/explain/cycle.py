"""What the next scheduling cycle does and why, as a table (``qm explain``).

It also runs the cycles after that one until nothing changes (:mod:`fairshare.settle`): when they
preempt and re-admit the same workloads in a loop (a preemption livelock, which the real Kueue
spins on as well), the explanation says so, with the workloads and reasons, instead of spinning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fairshare.conformance import CASE_KIND, load_case_documents
from fairshare.errors import InputError, Location
from fairshare.livelock import Livelock
from fairshare.manifests import StateBuilder, load_yaml_documents, parse_yaml_text
from fairshare.models import ClusterQueueName, ClusterState
from fairshare.quantity import format_human
from fairshare.scheduler import CycleResult, EntryStatus, SchedulerConfig, schedule_cycle
from fairshare.settle import KueueModel
from fairshare.snapshot import Snapshot

# Cycles looked at after the first for a livelock (a loop shows within a few dozen).
LIVELOCK_CYCLES = 500


@dataclass(frozen=True)
class Explanation:
    now: float
    result: CycleResult
    snapshot: Snapshot
    queued: dict[ClusterQueueName, int]  # CQ -> pending workloads behind the head
    livelock: Livelock | None = None  # the cycles from this state preempt and re-admit in a loop
    state: ClusterState | None = None  # what it was made from (to explain one workload or queue of it)
    config: SchedulerConfig = field(default_factory=SchedulerConfig)


def explain_state(
    state: ClusterState, *, now: float, config: SchedulerConfig, parked: Sequence[str] = ()
) -> Explanation:
    """The next cycle from ``state`` (``parked``: pending workloads Kueue holds as inadmissible),
    and whether the cycles after it end in a preemption livelock."""
    model = KueueModel.from_state(state, config, parked=parked)
    snap = Snapshot.from_state(state)
    heads = model.queues.heads(now)
    result = schedule_cycle(snap, now=now, config=config, heads=heads)
    queued = {name: model.queues.pending_count(name)[0] for name in snap.cluster_queues}
    settle = KueueModel.from_state(state, config, parked=parked).run(now, max_cycles=LIVELOCK_CYCLES)
    return Explanation(now, result, snap, queued, settle.livelock, state, config)


def explain_file(path: str | Path, *, now: float | None = None) -> Explanation:
    """A case file (its header gives ``now`` and config) or plain Kueue manifests (``now`` required,
    else the latest timestamp found in the file)."""
    return explain_documents(load_yaml_documents(path), file=str(path), now=now)


def explain_text(text: str, *, file: str = "<stdin>", now: float | None = None) -> Explanation:
    """The same from YAML text (``qm explain -`` reads it from stdin); ``file`` names it in errors."""
    return explain_documents(parse_yaml_text(text, file=file), file=file, now=now)


def explain_documents(docs: Sequence[dict[str, object]], *, file: str,
                      now: float | None = None) -> Explanation:
    if not docs:
        raise InputError(
            "no documents: expected Kueue objects or a CycleCase", location=Location(file=file)
        )
    if any(d.get("kind") == CASE_KIND for d in docs):
        case = load_case_documents(docs, file=file)
        return explain_state(
            case.state, now=case.now if now is None else now, config=case.config, parked=case.parked
        )
    builder = StateBuilder()
    builder.add_documents(docs, file=file)
    state = builder.build()
    if now is None:
        times = [w.creation_timestamp for w in state.workloads.values()] + [
            c.last_transition_time for w in state.workloads.values() for c in w.conditions
        ]
        if not times:
            raise InputError("no time to explain at: pass --now", location=Location(file=file))
        now = max(times)
    return explain_state(state, now=now, config=SchedulerConfig())


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def render(ex: Explanation) -> list[str]:
    rows: list[list[str]] = [["WORKLOAD", "CLUSTERQUEUE", "PRIORITY", "DECISION", "WHY"]]
    snap = ex.snapshot
    for o in ex.result.outcomes:
        head = snap.pending.get(o.key)
        prio = str(head.priority) if head is not None else ""
        decision = o.status.value
        if o.status == EntryStatus.ADMITTED and o.assignment is not None:
            decision = "admitted on " + ", ".join(
                sorted({c.flavor for ps in o.assignment.pod_sets for c in ps.flavors.values()})
            )
        elif o.status == EntryStatus.PREEMPTING:
            decision = "preempting " + ", ".join(t.key for t in o.targets)
        elif o.status != EntryStatus.ADMITTED:
            decision = "pending (" + o.status.value + ")"
        why = o.reason
        if o.reserved:
            why += "; reserving " + ", ".join(
                f"{fr} {format_human(v, fr.resource)}" for fr, v in sorted(o.reserved.items())
            )
        rows.append([o.key, o.cluster_queue, prio, decision, why])
    lines = []
    if ex.livelock is not None:
        lines += [f"WARNING: {ex.livelock.message()}", ""]
    lines += [f"Next scheduling cycle ({len(ex.result.outcomes)} head(s)):", *_table(rows)]
    if ex.result.preemptions:
        lines.append("")
        lines.append("Preemptions:")
        prow = [["VICTIM", "CLUSTERQUEUE", "REASON", "PREEMPTOR"]]
        prow += [
            [p.victim, p.victim_cluster_queue, p.reason.value, p.preemptor] for p in ex.result.preemptions
        ]
        lines.extend(_table(prow))
    lines.append("")
    lines.append("ClusterQueues:")
    crow = [["CLUSTERQUEUE", "COHORT", "USAGE", "BORROWING", "QUEUED BEHIND HEAD"]]
    for name in snap.cluster_queue_names():
        cq = snap.cluster_queues[name]
        usage = ", ".join(f"{fr} {format_human(v, fr.resource)}" for fr, v in snap.usage(cq.node).items())
        lent = snap.borrowing(cq.node)
        borrow = ", ".join(f"{fr} {format_human(v, fr.resource)}" for fr, v in lent.items())
        usage, borrow = usage or "-", borrow or "-"
        cohort = cq.node.parent.name if cq.node.parent is not None else "-"
        crow.append([name, cohort, usage, borrow, str(ex.queued.get(name, 0))])
    lines.extend(_table(crow))
    return lines
