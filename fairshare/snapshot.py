"""A mutable, undoable snapshot of Kueue's quota tree and admitted workloads.

Built once from a :class:`~fairshare.models.ClusterState` (``Snapshot.from_state``) and
then mutated incrementally, each change in O(tree depth):

- ``add_workload`` / ``remove_workload``: charge / release an admitted workload's usage;
- ``set_quota``: change a ClusterQueue's or Cohort's nominal/borrowing/lending quota for
  one flavor-resource; ``set_fair_sharing_weight``;
- what-ifs undo themselves: ``with snap.simulate_removal(keys): ...``,
  ``with snap.simulate_addition(infos): ...``, or generally ``with snap.transaction(): ...``
  (an undo log of the values changed; rolled back on exit unless ``commit()`` is called).

The scheduling cycle (``fairshare.scheduler.schedule_cycle``) works on the snapshot and
leaves it exactly as it found it; the caller commits a cycle's decisions with
``fairshare.scheduler.apply_cycle(snap, result)`` (admissions added, preempted victims removed).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .errors import InputError
from .models import (
    ClusterQueue,
    ClusterQueueName,
    ClusterState,
    CohortName,
    FlavorResource,
    LabelSelector,
    LocalQueue,
    LocalQueueKey,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
    ResourceQuota,
    StopPolicy,
    Workload,
    WorkloadKey,
    cohort_cycle,
    quotas_of,
)
from .quota_tree import QuotaNode
from .workload import WorkloadInfo

_UndoEntry = tuple[Any, Any, Any] | Callable[[], None]
_MISSING = object()  # undo-log marker: the key did not exist before


@dataclass(frozen=True, slots=True)
class FastPaths:
    """Which exact shortcuts the scheduling code takes on a snapshot (chosen when it is built).

    Every shortcut decides exactly what the reference does (all off, ``REFERENCE``): the same
    admissions, preemptions (victims, reasons), outcomes and requeue decisions. That is checked
    by ``python -m benchmarks.differential`` (reference vs fast over the conformance corpus and
    random scenarios) and its small set in ``tests/differential_fast``.
    """

    # One preemption search per head evaluation: the targets found by the flavor assigner's
    # preemption oracle (preemption_oracle.go SimulatePreemption) are reused by the nomination's
    # final search when it asks the same question (same flavor-resource and quantity, same
    # snapshot state), instead of searching again (Kueue runs both searches); the same for the experiment
    # planner's assign + preemption_targets (scheduler.assignments.assign_with_targets).
    single_search: bool = False
    # In a borrowing attempt of the classical search, a source CQ whose every candidate is
    # classified ReclaimWithoutBorrowing (no hierarchical advantage, borrowWithinCohort Never)
    # is skipped whole instead of candidate by candidate (candidate_generator.go: those are
    # never valid while borrowing).
    skip_unborrowable: bool = False
    # A head's nomination (flavor assignment and preemption targets, get_assignments) is carried
    # to its next evaluation when nothing it reads has changed: the same WorkloadInfo, scan start
    # and config, and the same content of its CQ's root cohort tree (Snapshot.tree_token: usage,
    # quotas, weights and admitted workloads of every node of the tree; the flavor assigner and
    # the preemption search read nothing outside it: preemption.go candidates come from the CQ's
    # cohort tree only). Kueue re-evaluates such a head from scratch and finds the same answer.
    carry_nominations: bool = False
    # The oracle's classical preemption search is not run when a bound proves it finds nothing: the
    # request exceeds Available plus the usage of every workload it could remove (Available rises by
    # at most what is removed; the proof is in fairshare/scheduler/bound.py).
    bound_search: bool = False
    # The policy controller's experiment gate re-plans the starved work of the quota trees whose inputs
    # changed and keeps the blocked decisions of the others (fairshare.control.experiments.PlanMemo); it
    # needs the trees' content ids (tree_token), kept for it too.
    plan_by_tree: bool = False
    # The policy controller returns its last transitions outcome again while nothing it read has changed
    # (fairshare.control.transitions.TransitionMemo: the same stored records, live quotas, the usage its
    # result reads, and no step, window or deadline passed), and with it the quotas in force that differ
    # from the live ones (the same outcome is returned only while the live quotas are equal).
    memo_transitions: bool = False
    # The experiment gate reads which experiments are past minRuntime, and when the next one will be,
    # from each ClusterQueue's experiments sorted by reservation time, rebuilt when its workloads change
    # (fairshare.control.eligible.ExperimentIndex), instead of scanning every admitted workload; the
    # experiment planner classifies each quota tree's experiments from its ClusterQueues' workloads below
    # the priority by key (Snapshot.below_priority, rebuilt when they change) merged by key, instead of
    # every admitted workload sorted by key.
    index_experiments: bool = False
    # The experiment planner orders candidates by their queues' Fair Tree over-share: computed for those
    # queues alone (fairshare.history.fair_tree.OverShares: the same billed usage and exact products of
    # weights along the path) instead of ranking the whole tree first (fair_tree); and only once removing
    # every candidate would let the beneficiary fit (the order chooses the set; whether one exists is the
    # same what-if in any order).
    lazy_over_shares: bool = False
    # The policy controller reads the quota held per key from the team's ClusterQueue when asked
    # (fairshare.control.decide.HeldQuota) instead of building every team's map, and the live quotas again
    # from its last decision when the snapshot has the same quotas (Snapshot.quota_id: changed by every
    # quota change, restored by rollback, never reused for other content).
    quota_reads: bool = False
    # The policy controller reads the eviction records the last decision stored through their book: each
    # record's time, kind, whether it is real and its state, kept from that decision for the list it stored
    # (fairshare.control.record_book), instead of reading every record's fields again.
    records_memo: bool = False
    # The experiment planner reuses a beneficiary's victim search (the shortest prefix of its candidates in
    # rule 2's order, fill back, the reclaim check) from an earlier plan when every input of it is the same:
    # the beneficiary, the candidates in the same order and its quota tree's content (token, quotas,
    # weights, specs), with every workload of the tree admitted before the search's time
    # (fairshare.planners.experiments.VictimSearches).
    memo_victim_search: bool = False
    # The policy controller returns its last decision again (fairshare.control.replay) when it was quiet
    # (no action but a wake-up, no eviction open, no hold, no budget, no pushed weights, starved work
    # decided from the gate's memories alone) and every input it read is the same: the status it returned,
    # the rules and generation, the transitions memo returning the same outcome, the same protected work
    # waiting, the victim budget used, trim keeping every record, `now` before its wake-up, and with starved
    # work the same snapshot in the same state with the same experiments past minRuntime.
    replay_quiet: bool = False

    @property
    def tracks_trees(self) -> bool:
        return self.carry_nominations or self.plan_by_tree

    def __reduce__(self) -> tuple[type[FastPaths], tuple[bool, ...]]:
        # By value (pickled into worker processes): the compiled core's frozen class cannot be unpickled
        # attribute by attribute (fairshare/compiled.py).
        fields = (
            self.single_search,
            self.skip_unborrowable,
            self.carry_nominations,
            self.bound_search,
            self.plan_by_tree,
            self.memo_transitions,
            self.index_experiments,
            self.lazy_over_shares,
            self.quota_reads,
            self.records_memo,
            self.memo_victim_search,
            self.replay_quiet,
        )
        return FastPaths, fields


REFERENCE = FastPaths()
# carry_nominations is exact (tests/differential_fast) but off: ~5% of evaluations carried in (a)/(b), and
# the carried entries of every evaluated workload cost more than that in (c)/(d) (bench sim, 2026-12-01).
FAST = FastPaths(
    single_search=True,
    skip_unborrowable=True,
    bound_search=True,
    plan_by_tree=True,
    memo_transitions=True,
    index_experiments=True,
    lazy_over_shares=True,
    quota_reads=True,
    records_memo=True,
    memo_victim_search=True,
    replay_quiet=True,
)


class ClusterQueueSnapshot:
    """A ClusterQueue in the snapshot: its spec, its tree node and its admitted workloads."""

    __slots__ = ("inactive_reason", "node", "rg_by_resource", "spec", "wl_version", "workloads")

    def __init__(self, spec: ClusterQueue, node: QuotaNode) -> None:
        self.spec = spec
        self.node = node
        self.workloads: dict[WorkloadKey, WorkloadInfo] = {}
        self.rg_by_resource: dict[ResourceName, ResourceGroup] = {
            r: g for g in spec.resource_groups for r in g.covered_resources
        }
        self.inactive_reason: str | None = None
        self.wl_version = 0  # identifies the content of ``workloads`` (restored by undo)

    @property
    def name(self) -> ClusterQueueName:
        return self.spec.name

    @property
    def active(self) -> bool:
        return self.inactive_reason is None

    # Convenience wrappers over the node (Kueue ClusterQueueSnapshot methods).
    def available(self, fr: FlavorResource) -> int:
        """Available(fr): never negative."""
        return max(0, self.node.available(fr))

    def potential_available(self, fr: FlavorResource) -> int:
        return self.node.potential_available(fr)

    def quota(self, fr: FlavorResource) -> ResourceQuota:
        return self.node.quota(fr)

    def usage(self, fr: FlavorResource) -> int:
        return self.node.usage.get(fr, 0)

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        return self.node.borrowing_with(fr, value)

    def fits(self, usage: Mapping[FlavorResource, int]) -> bool:
        """Fits: every fr's request is within Available(fr)."""
        node = self.node
        return all(node.available(fr) >= q for fr, q in usage.items())

    def namespace_matches(self, labels: Mapping[str, str]) -> bool:
        sel: LabelSelector | None = self.spec.namespace_selector
        return sel is not None and sel.matches(labels)


def workload_key(w: WorkloadInfo) -> str:
    """A workload's key: the order workloads are listed in by key (keys are unique)."""
    return w.key



def placement(
    wl: Workload,
    local_queues: Mapping[str, LocalQueue],
    cluster_queues: Container[ClusterQueueName],
    known: WorkloadInfo | None = None,
) -> tuple[bool, WorkloadInfo | None]:
    """Where Snapshot.from_state puts a workload: (True, info) charged to its ClusterQueue, (False, info)
    queued in it; no info: nowhere (finished, holding quota in a ClusterQueue not among `cluster_queues`,
    inactive, or without its LocalQueue). ``known``: the workload's info in an earlier snapshot, as in
    from_state (taken again if made from this very object, while its ClusterQueue is the same). The
    operator's observation kept by delta (fairshare.control.standing) places each changed Workload with
    it, as from_state places them all."""
    if known is not None:
        info = known
        if info.workload is wl:
            # Of this object: not finished, and admitted (a reservation time) or queued, as it was.
            if info.quota_reserved_time is not None:
                return True, (info if info.cluster_queue in cluster_queues else None)
            lq = local_queues.get(wl.local_queue_key)
            if lq is not None and lq.cluster_queue == info.cluster_queue:
                return False, info
    if wl.is_finished:
        return False, None
    if wl.has_quota_reservation and wl.admission is not None:
        if wl.admission.cluster_queue in cluster_queues:
            return True, WorkloadInfo.admitted(wl)
        return True, None
    lq = local_queues.get(wl.local_queue_key)
    if wl.active and lq is not None:
        return False, WorkloadInfo.pending(wl, lq.cluster_queue)
    return False, None

class Snapshot:
    """The quota tree, the ClusterQueues' admitted workloads and an undo log."""

    def __init__(self, *, paths: FastPaths = REFERENCE) -> None:
        # FastPaths.carry_nominations: a content id per root of the quota tree (absent: the content
        # when tracking started), read outside what-ifs only (tree_token); and the carried
        # nominations (fairshare/scheduler/cycle.py, _Cycle._carried).
        self._tree_ids: dict[QuotaNode, int] = {}
        self._epoch = 0
        self.nominations: dict[WorkloadKey, tuple[Any, ...]] = {}
        self._track = False
        # Candidate ordering reads `now` for an admitted workload without quota_reserved_time
        # (preemption.candidate_order_key): once one is admitted, carried nominations key on now too.
        self.now_sensitive = False
        self._ids = itertools.count(1)  # ids of states and trees: never reused
        self.paths = paths  # the scheduling code's shortcuts on this snapshot (exact; see FastPaths)
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[ClusterQueueName, ClusterQueueSnapshot] = {}
        self.cohorts: dict[CohortName, QuotaNode] = {}
        self.workloads: dict[WorkloadKey, WorkloadInfo] = {}  # admitted, by key
        # Pending workloads of the state it was built from (for heads() when no queue
        # manager is driving the cycle); not updated by the cycle.
        self.pending: dict[WorkloadKey, WorkloadInfo] = {}
        self.local_queues: dict[LocalQueueKey, LocalQueue] = {}
        self.namespace_labels: dict[str, Mapping[str, str]] = {}
        # Interned FlavorResource pairs (flavor_resource): the flavor assigner names one per flavor and
        # resource it tries, and building a NamedTuple is a Python-level call even in the compiled core.
        self._frs: dict[tuple[str, str], FlavorResource] = {}
        self._log: list[_UndoEntry] | None = None
        self._depth = 0
        # An id of the accounting state: changed by every mutation, restored by rollback,
        # so that derived values can be cached per state (see over_nominal_children).
        self.state_id = 0
        self._id_stack: list[int] = []
        # An id of the quotas alone (set_quota), kept and restored like state_id: equal ids, equal quotas
        # at every node (what the policy controller reads as the live quotas, FastPaths.quota_reads).
        self.quota_id = 0
        self._quota_stack: list[int] = []
        self._index_cache: dict[
            tuple[str, frozenset[FlavorResource]],
            tuple[int, list[tuple[tuple[bool, int, float, str], WorkloadInfo]]],
        ] = {}
        self._borrowing_cache: dict[tuple[int, frozenset[FlavorResource]], tuple[int, list[QuotaNode]]] = {}
        self._below_cache: dict[tuple[str, int], tuple[int, list[WorkloadInfo]]] = {}
        self._cache: dict[
            tuple[int, frozenset[FlavorResource]], tuple[int, list[QuotaNode], list[QuotaNode]]
        ] = {}

    @property
    def paths(self) -> FastPaths:
        return self._paths

    @paths.setter
    def paths(self, paths: FastPaths) -> None:
        """Set outside a transaction: tree ids restart (absent = the content now), nothing carried."""
        self._paths = paths
        self._track = paths.tracks_trees
        self._tree_ids.clear()
        self._epoch = next(self._ids)  # a token read before names other content: none matches again
        self.nominations.clear()

    @property
    def tracks_trees(self) -> bool:
        """Whether tree_token names content (FastPaths.carry_nominations, plan_by_tree); without it every
        token is equal."""
        return self._track

    def flavor_resource(self, flavor: str, resource: str) -> FlavorResource:
        """FlavorResource(flavor, resource), the same object for equal pairs (equal either way)."""
        fr = self._frs.get((flavor, resource))
        if fr is None:
            fr = self._frs[(flavor, resource)] = FlavorResource(flavor, resource)
        return fr

    @property
    def transaction_depth(self) -> int:
        """Open checkpoints (0: no what-if in progress)."""
        return self._depth

    def tree_token(self, node: QuotaNode) -> tuple[int, int]:
        """The content id of ``node``'s root tree (FastPaths.carry_nominations): equal tokens, equal
        content (usage, quotas, weights, admitted workloads of every node of the tree).

        Valid when read with no what-if open, or inside what-ifs that have undone all their changes:
        a mutation outside any transaction takes a fresh id for its tree (ids are never reused); one
        inside a transaction does not, because the transaction either rolls back (the content is
        again the one the id names) or, kept by its outermost level, changes every token (epoch)."""
        while node.parent is not None:
            node = node.parent
        return self._epoch, self._tree_ids.get(node, 0)

    def _touch(self, node: QuotaNode) -> None:
        while node.parent is not None:
            node = node.parent
        self._tree_ids[node] = next(self._ids)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_state(
        cls,
        state: ClusterState,
        *,
        paths: FastPaths = REFERENCE,
        known: Mapping[WorkloadKey, WorkloadInfo] | None = None,
    ) -> Snapshot:
        """Build the tree (implicit cohorts included) and charge every admitted workload.

        ``paths``: the exact shortcuts the scheduling code takes on it (default: the reference). ``known``:
        the workloads (admitted and queued) of an earlier snapshot built here, as built; one made from the
        very Workload object the state holds now is taken again, while its ClusterQueue is the same (an
        info is a function of the two, and the operator's watch cache replaces a Workload that changed)."""
        snap = cls(paths=paths)
        snap.flavors = dict(state.flavors)
        snap.namespace_labels = {k: dict(v) for k, v in state.namespace_labels.items()}
        for name in sorted(state.cohorts):
            c = state.cohorts[name]
            snap.cohorts[name] = QuotaNode(
                name,
                is_cluster_queue=False,
                quotas=quotas_of(c.resource_groups),
                weight=c.fair_sharing_weight,
            )
        for name in sorted(state.cohorts):
            parent = state.cohorts[name].parent
            if parent:
                snap._link(snap.cohorts[name], snap._cohort_node(parent))
        for cq_name in sorted(state.cluster_queues):
            spec = state.cluster_queues[cq_name]
            node = QuotaNode(
                cq_name, is_cluster_queue=True, quotas=spec.quotas(), weight=spec.fair_sharing_weight
            )
            cq = ClusterQueueSnapshot(spec, node)
            if spec.stop_policy != StopPolicy.NONE:
                cq.inactive_reason = f"ClusterQueue {cq_name} is stopped (stopPolicy {spec.stop_policy})"
            missing = [f.name for g in spec.resource_groups for f in g.flavors if f.name not in state.flavors]
            if missing:
                cq.inactive_reason = f"ClusterQueue {cq_name} is inactive: flavor {missing[0]} not found"
            snap.cluster_queues[cq_name] = cq
            if spec.cohort:
                snap._link(node, snap._cohort_node(spec.cohort))
        snap._check_cycles()
        for root in [c for c in snap.cohorts.values() if c.parent is None]:
            _recompute_subtree(root)
        for cq in snap.cluster_queues.values():
            if cq.node.parent is None:
                _recompute_subtree(cq.node)
        snap.local_queues = dict(state.local_queues)
        for key in sorted(state.workloads):
            held, info = placement(state.workloads[key], state.local_queues, snap.cluster_queues,
                                   known.get(key) if known is not None else None)
            if info is None:
                continue
            if held:
                snap.add_workload(info)
            else:
                snap.pending[key] = info
        return snap

    def _cohort_node(self, name: CohortName) -> QuotaNode:
        node = self.cohorts.get(name)
        if node is None:  # an implicit cohort: only named by a CQ or as a parent
            node = QuotaNode(name, is_cluster_queue=False, quotas={})
            self.cohorts[name] = node
        return node

    @staticmethod
    def _link(child: QuotaNode, parent: QuotaNode) -> None:
        child.parent = parent
        (parent.child_cqs if child.is_cluster_queue else parent.child_cohorts).append(child)

    def _check_cycles(self) -> None:
        parents = {
            n: CohortName(c.parent.name) if c.parent is not None else None for n, c in self.cohorts.items()
        }
        cycle = cohort_cycle(parents)
        if cycle is not None:
            raise InputError("cohort parents form a cycle: " + " -> ".join(cycle), value=cycle[0])

    # -- lookups -------------------------------------------------------------------------

    def cluster_queue(self, name: ClusterQueueName) -> ClusterQueueSnapshot:
        try:
            return self.cluster_queues[name]
        except KeyError:
            raise InputError(f"ClusterQueue {name!r} does not exist", value=name) from None

    def cohort(self, name: CohortName) -> QuotaNode:
        try:
            return self.cohorts[name]
        except KeyError:
            raise InputError(f"Cohort {name!r} does not exist", value=name) from None

    # -- undo log --------------------------------------------------------------------------

    def checkpoint(self) -> int:
        """Start (or nest) recording changes; returns a mark for ``rollback``."""
        if self._log is None:
            self._log = []
        self._depth += 1
        self._id_stack.append(self.state_id)
        self._quota_stack.append(self.quota_id)
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Undo every change recorded since ``mark`` and close that level."""
        log = self._log
        if log is None:
            raise RuntimeError("rollback without checkpoint")
        tail = log[mark:]
        del log[mark:]
        for entry in reversed(tail):
            if type(entry) is tuple:
                container, k, old = entry
                if type(container) is QuotaNode:  # a usage change (add_usage/remove_usage)
                    container.usage[k] = old
                    container.version += 1
                elif type(container) is ClusterQueueSnapshot:  # a workload admitted / released
                    info, version = old
                    if info is _MISSING:
                        del container.workloads[k]
                    else:
                        container.workloads[k] = info
                    # The content is exactly as it was: so is its version (versions are
                    # unique ids, never reused for different content).
                    container.wl_version = version
                elif old is _MISSING:
                    del container[k]
                else:
                    container[k] = old
            else:
                entry()  # type: ignore[operator]
        self.state_id = self._id_stack.pop()
        self.quota_id = self._quota_stack.pop()
        self._close()

    def release(self, mark: int) -> None:
        """Keep the changes since ``mark`` (they stay undoable by an outer level)."""
        if self._log is None:
            raise RuntimeError("release without checkpoint")
        self._id_stack.pop()
        self._quota_stack.pop()
        if self._depth == 1:
            self._epoch = next(self._ids)  # kept changes: every tree token changes (tree_token)
        self._close()

    def _close(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._log = None

    def transaction(self, *, commit: bool = False) -> Transaction:
        """Changes inside are undone on exit (kept when ``commit`` is True)."""
        return Transaction(self, commit)

    def simulate_removal(self, workloads: Iterable[WorkloadKey | WorkloadInfo]) -> Transaction:
        """What-if: these admitted workloads are gone (undone on exit)."""
        return Transaction(self, False, removed=workloads)

    def simulate_usage_removal(self, workloads: Iterable[WorkloadInfo]) -> Transaction:
        """What-if: only these workloads' usage is released (SimulateWorkloadUsageRemoval);
        cheaper than simulate_removal, the CQs still list them."""
        return Transaction(self, False, usage_removed=workloads)

    def simulate_addition(self, workloads: Iterable[WorkloadInfo]) -> Transaction:
        """What-if: these workloads are admitted with their ``usage`` (undone on exit)."""
        return Transaction(self, False, added=workloads)

    # -- usage -------------------------------------------------------------------------------

    def add_usage(self, cq: ClusterQueueName | QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        """addUsage: charge usage to a CQ; what exceeds its local quota flows to the parent."""
        start = self.cluster_queue(cq).node if isinstance(cq, str) else cq
        if self._track and self._log is None:
            self._touch(start)
        log = self._log
        self.state_id = next(self._ids)
        for fr, val in usage.items():
            node = start
            while True:
                u = node.usage.get(fr, 0)
                lq = node.local_quota.get(fr, 0)
                local_avail = lq - u if lq > u else 0
                if log is not None:
                    log.append((node, fr, u))
                node.usage[fr] = u + val
                node.version += 1
                parent = node.parent
                if parent is None or val <= local_avail:
                    break
                val -= local_avail
                node = parent

    def remove_usage(self, cq: ClusterQueueName | QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        """removeUsage: the exact inverse of add_usage."""
        start = self.cluster_queue(cq).node if isinstance(cq, str) else cq
        if self._track and self._log is None:
            self._touch(start)
        log = self._log
        self.state_id = next(self._ids)
        for fr, val in usage.items():
            node = start
            while True:
                u = node.usage.get(fr, 0)
                stored_in_parent = u - node.local_quota.get(fr, 0)
                if log is not None:
                    log.append((node, fr, u))
                node.usage[fr] = u - val
                node.version += 1
                parent = node.parent
                if stored_in_parent <= 0 or parent is None:
                    break
                if stored_in_parent < val:
                    val = stored_in_parent
                node = parent

    def add_workload(self, info: WorkloadInfo) -> None:
        """Admit ``info`` (its ``usage`` charged to ``info.cluster_queue``)."""
        if info.key in self.workloads:
            raise InputError(f"workload {info.key} is already admitted", value=info.key)
        cq = self.cluster_queue(info.cluster_queue)
        log = self._log
        if log is not None:
            log.append((cq, info.key, (_MISSING, cq.wl_version)))
            log.append((self.workloads, info.key, _MISSING))
        if info.quota_reserved_time is None:
            self.now_sensitive = True
        cq.workloads[info.key] = info
        cq.wl_version = next(self._ids)
        self.workloads[info.key] = info
        self.add_usage(cq.node, info.usage)

    def remove_workload(self, key: WorkloadKey) -> WorkloadInfo:
        """Release an admitted workload's usage (finished, evicted or preempted)."""
        info = self._unlist(key)
        self.remove_usage(self.cluster_queues[info.cluster_queue].node, info.usage)
        return info

    def _unlist(self, key: WorkloadKey) -> WorkloadInfo:
        """remove_workload's first half: the workload off its ClusterQueue's list and the snapshot's."""
        info = self.workloads.get(key)
        if info is None:
            raise InputError(f"workload {key} is not admitted", value=key)
        cq = self.cluster_queues[info.cluster_queue]
        log = self._log
        if log is not None:
            log.append((cq, key, (info, cq.wl_version)))
            log.append((self.workloads, key, info))
        del cq.workloads[key]
        cq.wl_version = next(self._ids)
        del self.workloads[key]
        return info

    def _remove_usages(self, infos: Iterable[WorkloadInfo]) -> None:
        """remove_usage of each workload's usage from its ClusterQueue, summed per ClusterQueue first: the
        same usage at every node as one removal after another. A removal of ``val`` at a node holding ``u``
        with local quota ``lq`` passes ``min(val, u - lq)`` (none when that is not positive) to the parent;
        two in turn pass ``min(a, s) + min(b, s - a)`` with ``s = u - lq``, which is ``min(a + b, s)``, what
        their sum passes (whole numbers, no rounding); the parent then receives the same total and the same
        holds there, up to the root. One walk up the tree per ClusterQueue and flavor-resource instead of
        one per workload (the experiment planner removes dozens of candidates per what-if)."""
        by_cq: dict[ClusterQueueName, dict[FlavorResource, int]] = {}
        for info in infos:
            total = by_cq.get(info.cluster_queue)
            if total is None:
                total = by_cq[info.cluster_queue] = {}
            for fr, val in info.usage.items():
                total[fr] = total.get(fr, 0) + val
        for name, usage in by_cq.items():
            self.remove_usage(self.cluster_queues[name].node, usage)

    # -- quota changes --------------------------------------------------------------------------

    def set_quota(self, node: QuotaNode, fr: FlavorResource, quota: ResourceQuota) -> None:
        """Change one flavor-resource's nominal/borrowingLimit/lendingLimit of a ClusterQueue's or a Cohort's
        node (`cluster_queue(name).node`, `cohort(name)`); O(depth)."""
        if self._track and self._log is None:
            self._touch(node)
        if self._log is not None:
            self._log.append(self._clear_caches)  # undone last: caches derived from quotas go
        old = node.quotas.get(fr)
        self.quota_id = next(self._ids)
        old_sq = node.subtree_quota.get(fr, 0)
        old_lq = node.local_quota.get(fr, 0)
        self._set(node.quotas, fr, quota)
        self._set(node.subtree_quota, fr, old_sq + quota.nominal - (old.nominal if old else 0))
        self._refresh_up(node, fr, old_sq, old_lq, node.usage.get(fr, 0))
        self._clear_caches()

    def _clear_caches(self) -> None:
        for n in [*self.cohorts.values(), *(cq.node for cq in self.cluster_queues.values())]:
            n.cached_lendable = None
            n.cached_drs = None

    def set_fair_sharing_weight(self, node: QuotaNode, weight_milli: int) -> None:
        if self._track and self._log is None:
            self._touch(node)
        old = node.weight
        if self._log is not None:

            def undo() -> None:
                node.weight = old
                node.cached_drs = None

            self._log.append(undo)
        node.weight = weight_milli
        node.cached_drs = None

    def _set(self, d: dict[FlavorResource, Any], k: FlavorResource, v: object) -> None:
        self.state_id = next(self._ids)
        if self._log is not None:
            if k in d:
                self._log.append((d, k, d[k]))
            else:
                self._log.append(lambda: d.pop(k, None))
        d[k] = v

    def _refresh_up(self, node: QuotaNode, fr: FlavorResource, old_sq: int, old_lq: int, old_u: int) -> None:
        """After node's subtree quota / usage for fr changed: recompute localQuota, push deltas up.

        A child contributes ``subtree_quota - local_quota`` to its parent's subtree quota and
        ``max(0, usage - local_quota)`` to its parent's usage (accumulateFromChild).
        """
        while True:
            sq = node.subtree_quota.get(fr, 0)
            u = node.usage.get(fr, 0)
            q = node.quotas.get(fr)
            new_lq = max(0, sq - q.lending_limit) if q is not None and q.lending_limit is not None else 0
            if new_lq != node.local_quota.get(fr, 0) or (new_lq == 0 and fr in node.local_quota):
                self._set(node.local_quota, fr, new_lq)
            parent = node.parent
            if parent is None:
                return
            d_sq = (sq - new_lq) - (old_sq - old_lq)
            d_u = max(0, u - new_lq) - max(0, old_u - old_lq)
            # A new flavor-resource appears in every ancestor's subtree quota (even as 0):
            # calculateLendable iterates the root's keys.
            created = fr not in parent.subtree_quota
            if not d_sq and not d_u and not created:
                return
            p_old_sq = parent.subtree_quota.get(fr, 0)
            p_old_lq = parent.local_quota.get(fr, 0)
            p_old_u = parent.usage.get(fr, 0)
            if d_sq or created:
                self._set(parent.subtree_quota, fr, p_old_sq + d_sq)
            if d_u:
                self._set(parent.usage, fr, p_old_u + d_u)
                parent.version += 1
            node, old_sq, old_lq, old_u = parent, p_old_sq, p_old_lq, p_old_u

    def over_nominal_children(
        self, node: QuotaNode, frs: frozenset[FlavorResource]
    ) -> tuple[list[QuotaNode], list[QuotaNode]]:
        """(child cohorts, child CQs) of ``node`` using more than their subtree quota on some fr
        (not IsWithinNominalInResources); cached per accounting state."""
        key = (id(node), frs)
        hit = self._cache.get(key)
        if hit is not None and hit[0] == self.state_id:
            return hit[1], hit[2]
        cohorts = [c for c in node.child_cohorts if not c.within_nominal_in(frs)]
        cqs = [c for c in node.child_cqs if not c.within_nominal_in(frs)]
        self._cache[key] = (self.state_id, cohorts, cqs)
        return cohorts, cqs

    def candidate_index(
        self, cq: ClusterQueueSnapshot, frs: frozenset[FlavorResource]
    ) -> list[tuple[tuple[bool, int, float, str], WorkloadInfo]]:
        """The CQ's admitted workloads using any of ``frs``, sorted by Kueue's candidate order
        within a CQ (evicted first, lower priority, most recently admitted, UID), each with
        its sort key. Cached until the CQ's workloads change."""
        key = (cq.name, frs)
        hit = self._index_cache.get(key)
        if hit is not None and hit[0] == cq.wl_version:
            return hit[1]
        out = [
            ((not w.evicted, w.priority, -(w.quota_reserved_time or 0.0), w.uid), w)
            for w in cq.workloads.values()
            if w.uses_any(frs)
        ]
        out.sort(key=lambda e: e[0])
        self._index_cache[key] = (cq.wl_version, out)
        return out

    def below_priority(self, cq: ClusterQueueSnapshot, below: int) -> list[WorkloadInfo]:
        """The CQ's admitted workloads, not evicted, with priority below ``below``, by key. Cached until
        the CQ's workloads change (``wl_version``)."""
        key = (cq.name, below)
        hit = self._below_cache.get(key)
        if hit is not None and hit[0] == cq.wl_version:
            return hit[1]
        out = sorted(
            (w for w in cq.workloads.values() if not w.evicted and w.priority < below), key=workload_key
        )
        self._below_cache[key] = (cq.wl_version, out)
        return out

    def borrowing_cluster_queues(self, root: QuotaNode, frs: frozenset[FlavorResource]) -> list[QuotaNode]:
        """CQs of ``root``'s tree borrowing (usage over nominal) on some fr; cached per state."""
        key = (id(root), frs)
        hit = self._borrowing_cache.get(key)
        if hit is not None and hit[0] == self.state_id:
            return hit[1]
        out = [
            cq
            for cq in root.subtree_cluster_queues()
            if cq.parent is not None and any(cq.borrowing(fr) for fr in frs)
        ]
        self._borrowing_cache[key] = (self.state_id, out)
        return out

    # -- queries ------------------------------------------------------------------------------

    def usage(self, node: QuotaNode) -> dict[FlavorResource, int]:
        return {fr: v for fr, v in sorted(node.usage.items()) if v}

    def subtree_quota(self, node: QuotaNode) -> dict[FlavorResource, int]:
        return dict(sorted(node.subtree_quota.items()))

    def borrowing(self, node: QuotaNode) -> dict[FlavorResource, int]:
        """How much a CQ (over nominal) or a cohort (over its subtree quota) borrows, per fr."""
        out = {}
        for fr, u in sorted(node.usage.items()):
            base = node.quota(fr).nominal if node.is_cluster_queue else node.subtree_quota.get(fr, 0)
            if u > base:
                out[fr] = u - base
        return out

    def cluster_queue_names(self) -> list[ClusterQueueName]:
        return sorted(self.cluster_queues)


def _recompute_subtree(node: QuotaNode) -> None:
    """updateCohortResourceNode: subtree quotas bottom-up (usage is charged afterwards)."""
    node.subtree_quota = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in [*node.child_cohorts, *node.child_cqs]:
        _recompute_subtree(child)
        for fr, sq in child.subtree_quota.items():
            node.subtree_quota[fr] = node.subtree_quota.get(fr, 0) + sq - child.local_quota.get(fr, 0)
    node.local_quota = {}
    for fr, q in node.quotas.items():
        if q.lending_limit is not None:
            node.local_quota[fr] = max(0, node.subtree_quota.get(fr, 0) - q.lending_limit)


class Transaction:
    """``with snapshot.transaction():`` (and the what-ifs): a checkpoint on entry, then the what-if's own
    changes; on exit the changes are undone, or kept (``commit``) when the body raised nothing. A class, not
    a @contextmanager: contextlib drives a generator through four interpreted calls per ``with``, even in
    the compiled core (the controller's experiment planner enters 34,000 of them in one plan run)."""

    def __init__(
        self,
        snapshot: Snapshot,
        commit: bool,
        *,
        removed: Iterable[WorkloadKey | WorkloadInfo] | None = None,
        usage_removed: Iterable[WorkloadInfo] | None = None,
        added: Iterable[WorkloadInfo] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.commit = commit
        self.mark = -1
        self.removed = removed
        self.usage_removed = usage_removed
        self.added = added

    def __enter__(self) -> Snapshot:
        snap = self.snapshot
        self.mark = snap.checkpoint()
        try:
            if self.removed is not None:
                snap._remove_usages([snap._unlist(w if isinstance(w, str) else w.key) for w in self.removed])
            if self.usage_removed is not None:
                snap._remove_usages(self.usage_removed)
            if self.added is not None:
                for info in self.added:
                    snap.add_workload(info)
        except BaseException:
            snap.rollback(self.mark)
            raise
        return snap

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.commit and exc_type is None:
            self.snapshot.release(self.mark)
        else:
            self.snapshot.rollback(self.mark)
