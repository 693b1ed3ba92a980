"""Carry out the controller's actions against the cluster (through the one writer) and report each as an
audit record (log line + Event) and metrics. Nothing is decided here: the actions are
`fairshare.control`'s, the bodies are built by the pure builders of this package."""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, assert_never

from kubernetes.client.exceptions import ApiException

from fairshare.control import (
    Action,
    AdvanceTransition,
    ApplyQuota,
    AuditAction,
    BlockTransition,
    BudgetCrossed,
    BudgetLifted,
    CancelTransition,
    FinishTransition,
    HoldPending,
    HoldQueues,
    MarkIdle,
    PushWeights,
    Reactivate,
    RecordAudit,
    RequestEviction,
    StartTransition,
    StormDetected,
    Target,
    UnmarkIdle,
    WaitForDrain,
    WakeAt,
)
from fairshare.control.experiments import block_kind
from fairshare.control.idle import RECLAIM_ANNOTATION
from fairshare.policy.status import (
    EvictionKind,
    PendingReport,
    PreemptionRecord,
    TransitionStatus,
    VictimState,
)
from fairshare.quantity import describe_quantity
from fairshare.timestamps import rfc3339

from .audit import AuditRecord, Fact, log_audit
from .eviction import EvictionMechanism, EvictionRequest
from .fanout import fan_out
from .metrics import Metrics
from .refs import ObjectRef
from .writer import Writer

if TYPE_CHECKING:
    from ledger.records import QuotaChange

    from .ledger_feed import LedgerFeed

log = logging.getLogger("queue_manager")


class Actuator:
    """Audits and writes for one policy reconcile (`policy`, `generation`, the policy's own ref)."""

    def __init__(self, writer: Writer, metrics: Metrics, policy: str, generation: int | None,
                 policy_ref: ObjectRef, *, ledger: LedgerFeed | None = None,
                 editor: str | None = None) -> None:
        self.writer = writer
        self.metrics = metrics
        self.policy = policy
        self.generation = generation
        self.policy_ref = policy_ref
        self.ledger = ledger  # every audit record is also a ledger row (docs/ledger.md)
        self.editor = editor  # who last edited the policy (its managedFields), for the ledger
        self._asked: dict[str, float] = {}  # victim -> when its eviction was requested (apply_rest)

    def ref(self, target: Target) -> ObjectRef:
        if target.kind == "QuotaPolicy" and target.name == self.policy:
            return self.policy_ref
        return ObjectRef(kind=target.kind, name=target.name, namespace=target.namespace)

    def audit(self, action: AuditAction, target: ObjectRef, what: str, why: str,
              also_on: ObjectRef | None = None, *, team: str | None = None,
              once: str | None = None, quotas: Sequence[QuotaChange] = (),
              generation: int | None = None) -> bool:
        """One log line, one ledger row (`team`: the team it concerns, for `qm audit --team`), one Event on
        the target (and optionally on a second object).

        `once`: the identity of the fact reported (e.g. "step|research/gpu/nvidia.com/gpu|2/3|3000->2000").
        The ledger row and the Events are then named after it, so reporting the fact again (after a crash,
        a retried reconcile, a second watch event) adds nothing, and a failed Event post raises
        (Writer.event): the caller stops before it records the fact as reported, and the next reconcile
        reports it. True if this call reported it (always True without `once`). `generation`: the policy
        generation that decided it, when not this reconcile's (a fact reported after its write).

        `quotas`: the quota changes the fact puts in force (an apply of a ClusterQueue), recorded with it.
        The Event carries the fact's ledger rows (events.LEDGER_ANNOTATION), so that a new leader finds
        them even if this replica's spool is lost before the database has them (LedgerFeed.recover)."""
        record = AuditRecord(action, target, what, why, self.policy,
                             self.generation if generation is None else generation)
        name = self._event_name(target, once) if once is not None else None
        if name is not None and self.writer.posted(name):
            return False
        rows = self._ledger_rows(record, team, name, quotas)
        created = self._post_event(record, name, rows)
        if created or name is None:  # a fact an earlier process reported is not logged or counted twice
            self._logged(record)
        if also_on is not None and also_on != record.target:
            self.writer.event(also_on, reason=record.event_reason, message=record.message(),
                              event_type=record.event_type,
                              name=self._event_name(also_on, f"{once}|on {target.describe()}")
                              if once is not None else None)
        return created or name is None

    def audit_all(self, facts: Sequence[Fact]) -> list[Exception | None]:
        """audit() of each fact, with its Event posted several at a time (fanout.py: a new 500-team
        policy's 1,500 apply Events took most of its first reconcile one after the other). The ledger rows
        are recorded first and the log lines follow, both in order. Per fact, why its Event could not be
        posted (None: reported, now or before): the caller reports it again (named: never twice)."""
        todo: list[tuple[int, AuditRecord, str, str | None]] = []
        for i, f in enumerate(facts):
            record = AuditRecord(f.action, f.target, f.what, f.why, self.policy, self.generation)
            name = self._event_name(f.target, f.once)
            if not self.writer.posted(name):
                todo.append((i, record, name, self._ledger_rows(record, None, name, f.quotas)))
        posted = fan_out(lambda t: self._post_event(t[1], t[2], t[3]), todo)
        out: list[Exception | None] = [None] * len(facts)
        for (i, record, _, _), created in zip(todo, posted, strict=True):
            if isinstance(created, Exception):
                out[i] = created
            elif created:
                self._logged(record)
        return out

    def _ledger_rows(self, record: AuditRecord, team: str | None, name: str | None,
                     quotas: Sequence[QuotaChange]) -> str | None:
        """The record's ledger row, with the quota changes it puts in force, recorded before its Event (an
        API error there must not lose the row); the Event's annotation of them."""
        if self.ledger is None:
            return None
        entry = self.ledger.audit_entry(record, editor=self.editor, team=team, fact=name)
        self.ledger.record([entry, *quotas])
        return self.ledger.annotation([entry, *quotas])

    def _post_event(self, record: AuditRecord, name: str | None, rows: str | None) -> bool:
        return self.writer.event(record.target, reason=record.event_reason, message=record.message(),
                                 event_type=record.event_type, name=name, ledger_records=rows)

    def _logged(self, record: AuditRecord) -> None:
        log_audit(log, record)
        self.metrics.audit_records.labels(str(record.action)).inc()

    def _event_name(self, target: ObjectRef, once: str) -> str:
        """A valid Event name (DNS subdomain) unique to this policy and fact."""
        digest = hashlib.sha256(f"{self.policy_ref.uid or self.policy}|{once}".encode()).hexdigest()[:20]
        return f"{target.name[:200]}.qm{digest}"

    # --- transitions -------------------------------------------------------------------------------
    # What waits or is blocked is reported before the status that records it (named after the fact: after a
    # crash in between, the same fact is decided again and posted once). What says the quota changed (a
    # transition started, stepped, was cancelled or finished) is a fact about a ClusterQueue write: it is
    # recorded in status with the decision (`transition_facts`), and reported once that write is in place
    # (`post_reports`), never before and never lost (issue 33: Events told of steps Kueue's webhook refused).

    def _facts(self, actions: Sequence[Action],
               records: Sequence[TransitionStatus]) -> list[tuple[bool, PendingReport]]:
        """Every transition fact of the decision: (about a write?, the fact)."""
        started = {(t.team, t.flavor, t.resource): t.policy_generation for t in records}

        def gen(a: Any) -> object:
            return started.get((a.key.team, a.key.flavor, a.key.resource), self.generation)

        def fact(write: bool, action: AuditAction, kind: str, name: str, what: str, why: str, team: str,
                 once: str, also_on_policy: bool = False) -> tuple[bool, PendingReport]:
            return write, PendingReport(fact=once, action=str(action), kind=kind, name=name, what=what,
                                        why=why, team=team, cluster_queue=team, generation=self.generation,
                                        also_on_policy=also_on_policy)

        out: list[tuple[bool, PendingReport]] = []
        policy = self.policy_ref.name
        for a in actions:
            if isinstance(a, StartTransition):
                r = a.key.resource
                out.append(fact(True, AuditAction.TRANSITION_START, "QuotaPolicy", policy,
                                f"transition of {a.key.team} {a.key.flavor_resource} from "
                                f"{describe_quantity(a.before, r)} to {describe_quantity(a.target, r)} in "
                                f"{a.steps} step(s)", a.why, a.key.team,
                                f"start|{self.generation}|{a.key}|{a.before}->{a.target}"))
            elif isinstance(a, CancelTransition):
                r = a.key.resource
                out.append(fact(True, AuditAction.TRANSITION_CANCEL, "QuotaPolicy", policy,
                                f"transition of {a.key.team} {a.key.flavor_resource} to "
                                f"{describe_quantity(a.old_target, r)} cancelled at "
                                f"{describe_quantity(a.at_value, r)}",
                                f"the policy now asks for {describe_quantity(a.new_target, r)}", a.key.team,
                                f"cancel|{self.generation}|{a.key}|{a.old_target}->{a.new_target}|{a.at_value}"))
            elif isinstance(a, AdvanceTransition):
                r = a.key.resource
                out.append(fact(True, AuditAction.TRANSITION_STEP, "ClusterQueue", a.key.team,
                                f"nominalQuota {a.key.flavor_resource} {describe_quantity(a.before, r)} -> "
                                f"{describe_quantity(a.after, r)} ({a.progress()})", a.why,
                                a.key.team, f"step|{gen(a)}|{a.key}|{a.step}/{a.total}|{a.before}->{a.after}",
                                also_on_policy=True))
            elif isinstance(a, WaitForDrain):
                out.append(fact(False, AuditAction.TRANSITION_WAIT, "ClusterQueue", a.key.team,
                                f"next step of {a.key.flavor_resource} waits", a.why, a.key.team,
                                f"wait|{gen(a)}|{a.key}|{a.why}", also_on_policy=True))
            elif isinstance(a, FinishTransition):
                out.append(fact(True, AuditAction.TRANSITION_DONE, "QuotaPolicy", policy,
                                f"transition of {a.key.team} {a.key.flavor_resource} finished",
                                "target quota reached", a.key.team, f"finish|{gen(a)}|{a.key}"))
            elif isinstance(a, BlockTransition):
                out.append(fact(False, AuditAction.TRANSITION_BLOCKED, "QuotaPolicy", policy,
                                f"transition of {a.key.team} {a.key.flavor_resource} blocked", a.why,
                                a.key.team, f"block|{self.generation}|{a.key}|{a.why}"))
        return out

    def report_transitions(self, actions: Sequence[Action], records: Sequence[TransitionStatus] = ()) -> None:
        """The facts of the decision that claim no write (a step waits, a transition is blocked, a deadline
        passed): reported now, before the status that records them. `records`: the transitions of the
        decision's status; a fact is named after the generation that started its transition (a later,
        unrelated edit of the policy does not make a repeated report look new)."""
        for write, f in self._facts(actions, records):
            if not write:
                self._post(f)
        for a in actions:
            if isinstance(a, RecordAudit) and a.action == AuditAction.TRANSITION_DEADLINE:
                self._record(a, once=f"deadline|{self.generation}|{a.what}")

    def transition_facts(self, actions: Sequence[Action],
                         records: Sequence[TransitionStatus] = ()) -> list[PendingReport]:
        """The facts of the decision about ClusterQueue writes, to record in status before the write and
        to report after it (`post_reports`)."""
        return [f for write, f in self._facts(actions, records) if write]

    def post_reports(self, pending: Sequence[PendingReport],
                     in_place: Callable[[str], bool]) -> list[PendingReport]:
        """Report each fact whose ClusterQueue write is in place (`in_place(name)`); the others are
        returned, still to report."""
        left: list[PendingReport] = []
        for f in pending:
            if in_place(f.cluster_queue):
                self._post(f)
            else:
                left.append(f)
        return left

    def _post(self, f: PendingReport) -> None:
        target = self.policy_ref if f.kind == "QuotaPolicy" and f.name == self.policy else \
            ObjectRef(f.kind, f.name)
        if self.audit(AuditAction(f.action), target, f.what, f.why,
                      also_on=self.policy_ref if f.also_on_policy else None, team=f.team, once=f.fact,
                      generation=f.generation) and f.action == AuditAction.TRANSITION_STEP:
            self.metrics.transition_steps.labels(self.policy, f.cluster_queue).inc()

    # --- weights, evictions, records ---------------------------------------------------------------

    def apply_rest(self, actions: Sequence[Action], records: Sequence[PreemptionRecord] = ()) -> list[str]:
        """Evictions, reactivations, pushed weights and audit records. An API error on one eviction (e.g.
        a missing RBAC verb) is logged, counted and returned (for the Degraded condition); it does not
        stop the others nor the quota transitions. There is no retry here: the next reconcile (the
        policy's timer) decides again from what it then observes. `records`: the status just written (the
        request times name the Events of each eviction, so a repeated one is reported once)."""
        self._asked = {r.victim: r.at for r in records if not r.dry_run and r.at is not None}
        errors: list[str] = []
        for a in actions:
            match a:
                case RequestEviction():
                    errors += _isolated(self.metrics, "preemption", functools.partial(self._evict, a))
                case Reactivate():
                    errors += _isolated(self.metrics, "preemption", functools.partial(self._reactivate, a))
                case HoldPending():
                    errors += _isolated(self.metrics, "preemption", functools.partial(self._hold, a))
                case MarkIdle():
                    errors += _isolated(self.metrics, "idle", functools.partial(self._mark_idle, a))
                case UnmarkIdle():
                    errors += _isolated(self.metrics, "idle", functools.partial(self._unmark_idle, a))
                case PushWeights():
                    # The weights are in the ClusterQueues applied (fairshare.control.objects); its record:
                    shown = ", ".join(f"{t}={w}" for t, w in sorted(a.weights.items()))
                    self.audit(AuditAction.WEIGHTS_PUSHED, self.policy_ref, f"fairSharing weights {shown}",
                               a.why)
                case HoldQueues():
                    # The stopPolicy is in the LocalQueues applied (fairshare.control.objects); its record:
                    held = "held (stopPolicy Hold)" if a.hold else "released (stopPolicy None)"
                    self.audit(AuditAction.QUEUES_HELD if a.hold else AuditAction.QUEUES_RELEASED,
                               self.ref(Target.cluster_queue(a.team)),
                               f"LocalQueues {', '.join(a.local_queues)} of {a.team} {held}", a.why)
                case StormDetected():
                    self._storm(a)
                case BudgetCrossed():
                    target = ObjectRef("ClusterQueue", a.team) if a.team else self.policy_ref
                    dry = " (dry-run)" if a.dry_run and a.action != "alert" else ""
                    self.audit(AuditAction.BUDGET_CROSSED, target,
                               f"budget {a.budget} reached {a.percent}% ({a.used} of {a.limit} {a.unit}): "
                               f"{a.action}{dry}", a.why, also_on=self.policy_ref, team=a.team)
                case BudgetLifted():
                    target = ObjectRef("ClusterQueue", a.team) if a.team else self.policy_ref
                    self.audit(AuditAction.BUDGET_LIFTED, target, f"budget {a.budget}: {a.action} lifted",
                               a.why, also_on=self.policy_ref, team=a.team)
                case RecordAudit():
                    if a.action != AuditAction.TRANSITION_DEADLINE:  # (reported with the transitions)
                        on_workload = a.target.kind == "Workload"
                        victim = f"{a.target.namespace}/{a.target.name}" if on_workload else None
                        at = self._asked.get(victim) if victim is not None else None
                        self._record(a, once=f"{a.action}|{victim}|{at}" if at is not None else None)
                case ApplyQuota():
                    pass  # in the ClusterQueue applied (fairshare.control.objects), reported with its step
                case (StartTransition() | AdvanceTransition() | WaitForDrain() | FinishTransition()
                      | CancelTransition() | BlockTransition()):
                    pass  # reported with the status that records them (report_transitions, post_reports)
                case WakeAt():
                    pass  # the policy's timer ticks anyway
                case _:
                    assert_never(a)
        return errors

    def ensure_reported(self, records: Sequence[PreemptionRecord]) -> None:
        """Every eviction recorded in status has its Events: asked for, carried out by Kueue, reactivated.
        The record is written before the eviction and its Event (a crash in between would otherwise lose
        the Event); the names are the ones `apply_rest` uses, so what was posted is not posted again."""
        for r in records:
            if r.dry_run or r.at is None or r.state is None:
                continue
            victim = self.ref(Target.workload(r.victim))
            beneficiary = self.ref(Target.workload(r.beneficiary)) if r.beneficiary else self.policy_ref
            self.audit(AuditAction.PREEMPT, victim,
                       f"asked Kueue to evict {r.victim} for {_for_whom(r.beneficiary, r.eviction_kind)}",
                       r.reason, also_on=beneficiary, once=f"preempt|{r.victim}|{r.at}")
            if r.state in (VictimState.EVICTED, VictimState.REACTIVATED, VictimState.REQUEUED,
                           VictimState.RECLAIMED):
                self.audit(AuditAction.PREEMPT_VERIFIED, victim, f"Kueue evicted {r.victim}", r.reason,
                           once=f"{AuditAction.PREEMPT_VERIFIED}|{r.victim}|{r.at}")
            if r.state in (VictimState.REACTIVATED, VictimState.REQUEUED):
                self.audit(AuditAction.REACTIVATED, victim, f"reactivated {r.victim}: Kueue requeues it",
                           "its hold ended", once=f"reactivated|{r.victim}|{r.at}")

    def _evict(self, a: RequestEviction) -> None:
        victim = self.ref(Target.workload(a.victim))
        beneficiary = self.ref(Target.workload(a.beneficiary)) if a.beneficiary else self.policy_ref
        kind = str(a.kind)
        if a.dry_run:
            self.metrics.preemptions.labels(self.policy, kind, "dry-run").inc()
            self.audit(AuditAction.PREEMPT_DRY_RUN, victim, f"would preempt {a.victim}", a.reason,
                       also_on=beneficiary)
            return
        req = EvictionRequest(victim.namespace or "", victim.name, a.reason, None)
        self.writer.request_eviction(req, EvictionMechanism.DEACTIVATE)
        if a.repeat:  # recorded, not carried out (a crash in between): carried out now, reported once
            log.info("eviction of %s repeated: recorded but not carried out yet", a.victim)
        try:
            self.writer.explain_preemption(req)
        except ApiException as err:  # the eviction stands; the Event still carries the reason
            log.warning("could not set the preemption condition on %s: %s", a.victim, err.reason)
        at = self._asked.get(a.victim)
        if self.audit(AuditAction.PREEMPT, victim,
                      f"asked Kueue to evict {a.victim} for {_for_whom(a.beneficiary, a.kind)}",
                      a.reason, also_on=beneficiary,
                      once=f"preempt|{a.victim}|{at}" if at is not None else None):
            self.metrics.preemptions.labels(self.policy, kind, "enforced").inc()

    def _mark_idle(self, a: MarkIdle) -> None:
        """spec.idle's warning: the annotation (not in dry-run), then the Event on the Workload and on its
        Job, named after the warning's reclamation time (a repeated decision posts nothing new)."""
        wl = self.ref(Target.workload(a.workload))
        if not a.dry_run:
            self.writer.annotate_workload(wl.namespace or "", wl.name,
                                          {RECLAIM_ANNOTATION: rfc3339(a.reclaim_at)})
        owner = self.ref(a.owner) if a.owner is not None else None
        if self.audit(AuditAction.IDLE_WARNED, wl, a.what, a.why, also_on=owner,
                      once=f"idle|{a.workload}|{a.reclaim_at:.0f}"):
            self.metrics.idle_warnings.labels(self.policy, "dry-run" if a.dry_run else "enforced").inc()

    def _unmark_idle(self, a: UnmarkIdle) -> None:
        wl = self.ref(Target.workload(a.workload))
        if not a.dry_run:
            self.writer.annotate_workload(wl.namespace or "", wl.name, {RECLAIM_ANNOTATION: None})
        owner = self.ref(a.owner) if a.owner is not None else None
        self.audit(AuditAction.IDLE_CLEARED, wl, f"{a.workload} is no longer warned for idle GPUs", a.why,
                   also_on=owner)

    def _hold(self, a: HoldPending) -> None:
        held = self.ref(Target.workload(a.workload))
        # spec.active=false on a pending workload: Kueue takes it out of its queues; nothing is evicted.
        self.writer.request_eviction(EvictionRequest(held.namespace or "", held.name, a.why, None),
                                     EvictionMechanism.DEACTIVATE)
        self.audit(AuditAction.WORKLOAD_HELD, held,
                   f"held {a.workload} (spec.active=false) for {a.beneficiary}",
                   a.why, also_on=self.ref(Target.workload(a.beneficiary)))

    def _storm(self, a: StormDetected) -> None:
        """A Warning Event on the policy (and on the preemptor), counted once per storm seen."""
        about = self.ref(Target.workload(a.preemptor)) if a.preemptor else self.policy_ref
        what = (f"eviction storm: {', '.join(a.victims)} evicted {a.evictions} times"
                + (f" for {a.preemptor}" if a.preemptor else "")
                + f" ({a.per_minute:g} a minute): {a.response}")
        if self.audit(AuditAction.STORM, self.policy_ref, what, a.why, also_on=about,
                      once=f"storm|{a.preemptor or a.victims[0]}|{a.why}"):
            self.metrics.eviction_storms.labels(self.policy, str(a.response)).inc()

    def _reactivate(self, a: Reactivate) -> None:
        victim = self.ref(Target.workload(a.victim))
        self.writer.reactivate(victim.namespace or "", victim.name)
        at = self._asked.get(a.victim)
        self.audit(AuditAction.REACTIVATED, victim, f"reactivated {a.victim}: Kueue requeues it", a.why,
                   once=f"reactivated|{a.victim}|{at}" if at is not None else None)

    def _record(self, a: RecordAudit, *, once: str | None = None) -> None:
        if not self.audit(a.action, self.ref(a.target), a.what, a.why,
                          also_on=self.ref(a.also_on) if a.also_on is not None else None, once=once):
            return  # reported before: counted then
        if a.action == AuditAction.PREEMPT_VERIFIED:
            self.metrics.preemptions_verified.labels(self.policy).inc()
        elif a.action == AuditAction.PREEMPT_BLOCKED:
            self.metrics.preemption_blocked.labels(self.policy, block_kind(a.why)).inc()


def _for_whom(beneficiary: str | None, kind: EvictionKind | None) -> str:
    if beneficiary:
        return beneficiary
    return "idle GPUs" if kind == EvictionKind.IDLE else "a quota transition"


def _isolated(metrics: Metrics, what: str, fn: Callable[[], None]) -> list[str]:
    try:
        fn()
    except ApiException as err:
        metrics.reconcile_errors.labels(what).inc()
        body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
        message = f"{what}: API error {err.status} {err.reason}: {body[:300]}"
        log.error("%s", message)
        return [message]
    return []
