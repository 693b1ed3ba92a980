"""Reconcile of one QuotaPolicy (every event and every tick; idempotent): observe, ask the controller,
persist its status, apply its actions. Like one of Kueue's reconcilers: it feeds, the core decides.

  1. Parse the policy (a policy the API server let through but the core rejects is reported, never
     partially applied).
  2-3. Read what the core observes (the policy's Kueue objects, the Workloads, the ledger's budget
     consumption, the GPUs' activity) and take one trip into the core (`fairshare.control.cluster`,
     `PolicyController.step`): it observes, syncs the usage history, decides, and derives the objects the
     decision's actions put in force.
  4. Persist the decision's status BEFORE anything changes in the cluster (a crash in between re-applies
     the same step from status: never skipped, never twice), with the facts of the ClusterQueue writes it
     implies (a transition started, a step, ...) still to report.
  5. Apply those objects (server-side apply of what differs; prune what the policy no longer implies).
     Each fact is reported (Event, audit row) once its write is in place, never before; an Event is named
     after the fact it reports, so reporting it again after a crash posts nothing. Carry out evictions,
     reactivations, holds and audit records (actuator.py: every action, by its type).
  6. Conditions, metrics, the history when due.

A policy the operator cannot serve is never shown Ready (issue 33): an exception while observing, deciding
or applying it, or an object the API server or a webhook refuses, sets Ready=False and Degraded=True with the
reason and the API server's words (field and value), then posts one Warning Event and sets
qm_policy_degraded. A refused ClusterQueue keeps its transitions where they were: their step is decided
again once the write goes through, and no Event says it happened before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes.client.exceptions import ApiException

from fairshare.control import (
    AuditAction,
    ClusterView,
    Decision,
    Overrides,
    PolicyRules,
    Reply,
    StepFailed,
)
from fairshare.control.cluster import OBSERVING, bring_history_up
from fairshare.errors import InputError
from fairshare.policy import KIND_ORDER, ObjectKey, QuotaPolicy, owner_selector, parse_policy
from fairshare.policy.status import (
    Condition,
    Forecast,
    PendingReport,
    PolicyPhase,
    QuotaPolicyStatus,
    TransitionPhase,
    TransitionStatus,
    next_step_at,
    policy_phase,
    read_status,
)
from fairshare.policy.tenancy import TENANCY_KIND_ORDER
from fairshare.quantity import parse_quantity
from ledger.records import QuotaChange

from . import history_store
from .actuator import Actuator
from .audit import Fact
from .cache import PolicyRuntime, State, policy_ref
from .conditions import BUDGET, DEGRADED, READY, STRANDED, TRANSITIONING, condition, merge_conditions
from .config import OperatorConfig
from .drift import check_drift
from .failures import APPLY_REFUSED, RECONCILE_FAILED, Refused, clip, describe
from .fanout import busy, fan_out
from .forecast import ForecastBook, error_ratio, forecast_condition
from .kube import Reader
from .kueue_config import KueueConfigFollower, read_configuration
from .ledger_feed import LedgerFeed, editor_of
from .metrics import Metrics
from .ownership import managed_content, needs_apply, owning_policy, stamped
from .refs import key_of, kind_of, ref_of
from .telemetry import TelemetryFeed
from .writer import Writer

log = logging.getLogger("queue_manager")


# Apply order of everything a policy renders: its Kueue objects, then its tenancy objects (the admission rules
# before the RoleBindings). Pruning goes in reverse.
APPLY_ORDER = (*KIND_ORDER, *TENANCY_KIND_ORDER)

# The status fields a decision sets (written before the cluster changes); the rest after.
DECISION_FIELDS = ("transitions", "activeTransitions", "teams", "lastPreemptions", "blockedPreemptions",
                   "pushedWeights", "budgets", "strandedQuota", "heldWorkloads", "weightPush", "storms",
                   "idleWorkloads", "telemetry", "pendingReports")


class Reconciler:
    def __init__(self, config: OperatorConfig, writer: Writer, reader: Reader, state: State, metrics: Metrics,
                 clock: Callable[[], float]) -> None:
        self.config = config
        self.writer = writer
        self.reader = reader
        self.state = state
        self.metrics = metrics
        self.clock = clock
        self.ledger: LedgerFeed | None = None  # the ledger this process writes (queue_manager/ledger_feed.py)
        self.forecasts: ForecastBook | None = None  # forecasts of transitions, given by `qm run`
        self.telemetry: TelemetryFeed | None = None  # the GPUs' activity (spec.idle), given by `qm run`
        self.overrides = Overrides(dry_run=config.dry_run, starvation_grace_s=config.starvation_grace_seconds,
                                   victim_hold_s=config.victim_hold_seconds)
        self.kueue = KueueConfigFollower(config.kueue_fair_sharing,
                                         lambda: read_configuration(self.reader.config_map))

    def actuator(self, rt: PolicyRuntime) -> Actuator:
        return Actuator(self.writer, self.metrics, rt.name, rt.generation, policy_ref(rt), ledger=self.ledger,
                        editor=editor_of(rt.body) if self.ledger is not None else None)

    # --- status ---------------------------------------------------------------------------------------

    def stored(self, rt: PolicyRuntime) -> QuotaPolicyStatus:
        """What we last wrote (the watch may lag behind our own writes), else the API's copy."""
        if rt.status is not None:
            return rt.status
        status, warnings = read_status(rt.body.get("status"))
        for w in warnings:
            log.warning("QuotaPolicy %s: %s", rt.name, w)
        rt.status = status
        return status

    def write_status(self, rt: PolicyRuntime, status: QuotaPolicyStatus, fields: Sequence[str]) -> None:
        """Merge-patch the given top-level status fields (camelCase) that changed since our last write."""
        doc = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        patch: dict[str, Any] = {}
        for f in fields:
            value = doc.get(f)
            text = json.dumps(value, sort_keys=True, separators=(",", ":"))
            if rt.written.get(f) != text:
                patch[f] = value  # None clears a field we wrote before
        rt.status = status
        if not patch:
            return
        self.writer.patch_policy_status(rt.name, patch)
        for f, value in patch.items():
            rt.written[f] = json.dumps(value, sort_keys=True, separators=(",", ":"))

    # --- one reconcile ----------------------------------------------------------------------------------

    def parse(self, rt: PolicyRuntime) -> QuotaPolicy | None:
        doc = {k: v for k, v in rt.body.items() if k != "status"}
        key = input_key(rt.body)
        if rt.policy is not None and rt.parsed_from == key:
            return rt.policy  # unchanged since the last parse (the timer hands us the same object)
        try:
            policy = parse_policy(doc)
        except InputError as err:
            self.metrics.policy_valid.labels(rt.name).set(0)
            self.reject(rt, err.one_line())
            return None
        self.metrics.policy_valid.labels(rt.name).set(1)
        rt.policy = policy
        rt.parsed_from = key
        return policy

    def reject(self, rt: PolicyRuntime, message: str) -> None:
        """The API server's CEL rules catch most mistakes; what gets past them (or comes from an older
        CRD) is reported once per generation and nothing is applied (never a partial apply)."""
        gen = rt.generation
        act = self.actuator(rt)
        if rt.rejected_generation != gen:
            rt.rejected_generation = gen
            act.audit(AuditAction.POLICY_REJECTED, policy_ref(rt), "policy not applied", message,
                      once=f"rejected|{gen}")
        now = self.clock()
        prev = self.stored(rt).conditions
        conditions = merge_conditions(prev, [
            condition(READY, False, "InvalidPolicy", message, generation=gen, now=now, previous=prev),
            condition(DEGRADED, True, "InvalidPolicy", message, generation=gen, now=now, previous=prev)])
        status = self.stored(rt).model_copy(update={"phase": PolicyPhase.INVALID, "conditions": conditions})
        self.write_status(rt, status, ["conditions", "phase"])

    def reconcile(self, rt: PolicyRuntime) -> None:
        try:
            policy = self.parse(rt)
        except Exception as err:  # not an InputError (parse reports those): a bug, said as one
            self.fail(rt, RECONCILE_FAILED, describe("reading the policy", err), err)
            return
        if policy is None:
            return
        before = self.stored(rt)
        now = self.clock()
        viewing = time.perf_counter()
        try:
            book = history_store.book_of(rt, policy, now)
            if rt.rules is None or rt.rules.policy is not policy:
                rt.rules = PolicyRules.of(policy, self.overrides)
                if self.ledger is not None:  # prices, accounted labels, retention of every policy
                    self.ledger.configure(p for r in list(self.state.policies.values()) if (p := r.policy))
            # What the core observes: the objects, the Workloads (those of the policy's namespaces and
            # ClusterQueues, from the shared cache, with the keys of those that changed since its last
            # read: the controller derives those again), each budget's consumption as last measured in the
            # ledger, the GPUs' activity as last read from Prometheus (spec.idle).
            budget_usage = self.ledger.budget_usage(policy) if self.ledger is not None else None
            activity = self.telemetry.activity(policy) if self.telemetry is not None else None
            others = self.other_namespaces(rt)
            if rt.changes is None:
                rt.changes = self.state.workloads.subscribe()
            mine, changed = self.state.workloads.view(rt.workload_scope(policy), rt.changes)
            setting = self.kueue.setting(now)
            self.metrics.kueue_fair_sharing.set(1 if setting.on else 0)
            self.metrics.kueue_configuration_known.set(1 if setting.known else 0)
            kueue = setting.scheduler_config()
            view = ClusterView(live=lambda key: self.live(rt, key), workloads=mine, config=kueue,
                               budget_usage=budget_usage, activity=activity, other_namespaces=others,
                               changed=changed)
        except Exception as err:
            rt.controller.seen.standing = None  # (the keys read are lost: the next step derives every one)
            self.fail(rt, RECONCILE_FAILED, describe(OBSERVING, err), err)
            return
        started = time.perf_counter()
        phases = self.metrics.reconcile_seconds
        phases.labels("view").observe(started - viewing)
        try:  # one trip into the core: observe, decide, what the decision puts in force
            reply = rt.controller.step(rt.rules, view, before, now, history=book, generation=rt.generation,
                                       timer=time.perf_counter)
        except StepFailed as err:
            self.fail(rt, RECONCILE_FAILED, describe(err.stage, err.cause), err.cause)
            return
        applying = time.perf_counter()
        self.metrics.decision_latency.labels("controller").observe(applying - started)
        for stage, seconds in reply.stages:
            phases.labels(stage).observe(seconds)
        history_store.keep(rt, reply.history, policy.name)
        try:
            self.carry_out(rt, reply, before, now)
        except Exception as err:
            self.fail(rt, RECONCILE_FAILED, describe("applying", err), err)
        phases.labels("apply").observe(time.perf_counter() - applying)

    def carry_out(self, rt: PolicyRuntime, reply: Reply, before: QuotaPolicyStatus, now: float) -> None:
        gen = rt.generation
        decision = reply.decision
        act = self.actuator(rt)
        # What claims no write (a step waits, a transition is blocked) is reported before the status that
        # records it; the facts of the ClusterQueue writes are recorded with it, to report once in place.
        act.report_transitions(decision.actions, decision.status.transitions)
        facts = act.transition_facts(decision.actions, decision.status.transitions)
        known = {f.fact for f in before.pending_reports}
        pending = [*before.pending_reports, *(f for f in facts if f.fact not in known)]
        self.write_status(rt, decision.status.model_copy(update={"pending_reports": pending}),
                          DECISION_FIELDS)
        rt.desired = {k: dict(v) for k, v in reply.objects.items()}
        # The quota history, dated by this decision: a ClusterQueue's changes are recorded with its apply
        # (and carried by its Event); what is in force without an apply (a restart) after the applies.
        changes: dict[str, list[QuotaChange]] = {}
        if self.ledger is not None:
            for c in self.ledger.quota_changes(rt.name, gen, reply.settings.quotas, now):
                changes.setdefault(c.team, []).append(c)
        refused: list[Refused] = []
        for kind in APPLY_ORDER:
            writes: list[tuple[ObjectKey, str]] = []
            for key in sorted(k for k in rt.desired if k.kind == kind):
                try:
                    what = self.to_write(rt, key)
                except Refused as err:
                    refused.append(err)
                    continue
                if what is not None:
                    writes.append((key, what))
            refused += self.write_all(rt, kind, writes, act, changes)
        if rt.pruned_generation != gen and not refused:
            self.prune(rt, act, cached=rt.pruned_generation is not None)
            rt.pruned_generation = gen
        self.report_writes(rt, act, before, pending, {f.fact for f in facts}, refused)
        if refused:
            self.fail(rt, APPLY_REFUSED, clip("; ".join(r.line() for r in refused)), None)
            return
        if self.ledger is not None:  # the quota history: what is in force now, once per change
            self.ledger.quotas(rt.name, gen, reply.settings.quotas, now)
        errors = act.apply_rest(decision.actions, decision.status.last_preemptions)
        act.ensure_reported(decision.status.last_preemptions)
        self.export(rt, decision, reply.waiting, now)
        self.export_storms(rt, decision)
        forecasts = self.forecast(rt, decision, now)  # after the cluster writes: never before a first step
        extra: list[str] = [] if forecasts is None else ["forecasts"]
        if now - rt.history_persisted_at >= self.config.history_persist_seconds:
            rt.history_persisted_at = now
            self.metrics.history_persist_time.labels(rt.name).set(now)
            extra.append("history")
        status = self.stored(rt)
        if "history" in extra:
            status = status.model_copy(update={"history": reply.history.serialize()})
        if forecasts is not None:
            status = status.model_copy(update={"forecasts": forecasts})
        conditions = self.conditions(rt, decision, errors, now)
        if forecasts is not None:
            conditions = merge_conditions(conditions, [forecast_condition(forecasts, rt.generation, now,
                                                                          conditions)])
        degraded = any(c.type == DEGRADED and c.status == "True" for c in conditions)
        transitions = decision.status.transitions
        status = status.model_copy(update={
            "observed_generation": gen, "conditions": conditions,
            "phase": policy_phase(transitions, degraded=degraded), "next_step_at": next_step_at(transitions),
            "next_step": reply.next_step})
        self.write_status(rt, status, ["observedGeneration", "conditions", "phase", "nextStepAt", "nextStep",
                                       "pendingReports", *extra])
        self.recovered(rt)

    def report_writes(self, rt: PolicyRuntime, act: Actuator, before: QuotaPolicyStatus,
                      pending: list[PendingReport], new: set[str], refused: Sequence[Refused]) -> None:
        """Report each fact whose ClusterQueue is in place now; what is left to report is written with the
        reconcile's last status write, or at once when a write was refused. A refused ClusterQueue's
        transitions go back to where they were before this decision (the next reconcile decides their step
        again, merged with any step that falls due meanwhile, as after an outage) and this decision's facts
        about it are dropped; a fact recorded earlier (before a crash) waits for its write."""
        failed = {r.key.name for r in refused if r.key.kind == "ClusterQueue"}
        pending = [f for f in pending if ObjectKey("ClusterQueue", "", f.cluster_queue) in rt.desired
                   and not (f.cluster_queue in failed and f.fact in new)]
        left = act.post_reports(pending, in_place=lambda cq: cq not in failed)
        status = self.stored(rt)
        update: dict[str, Any] = {"pending_reports": left}
        fields = ["pendingReports"]
        if failed:
            kept = _reverted(status.transitions, before.transitions, failed)
            update |= {"transitions": kept, "active_transitions": sum(
                1 for t in kept if t.phase != TransitionPhase.COMPLETE)}
            fields += ["transitions", "activeTransitions"]
            self.write_status(rt, status.model_copy(update=update), fields)
        else:
            # Written with the reconcile's last status write (carry_out): each write of a large policy costs
            # the API server about 0.5 s (500 teams), and a crash before it only posts nothing again.
            rt.status = status.model_copy(update=update)

    # --- a policy that cannot be served --------------------------------------------------------------------

    def fail(self, rt: PolicyRuntime, reason: str, message: str, err: BaseException | None) -> None:
        """Degraded, in this order: the conditions (Ready=False, Degraded=True with the reason and the
        message), then one Warning Event per distinct failure and generation, then qm_policy_degraded. The
        failure is logged once (with its traceback when it is a bug), not every tick. If the status cannot
        be written either (the API is away), the original error goes up to the handler, which logs it."""
        gen = rt.generation
        now = self.clock()
        prev = self.stored(rt).conditions
        conditions = merge_conditions(prev, [
            condition(READY, False, reason, message, generation=gen, now=now, previous=prev),
            condition(DEGRADED, True, reason, message, generation=gen, now=now, previous=prev)])
        status = self.stored(rt).model_copy(update={"phase": PolicyPhase.DEGRADED, "conditions": conditions})
        first = rt.failure != (gen, message)
        rt.failure = (gen, message)
        try:
            self.write_status(rt, status, ["conditions", "phase"])
            if first:
                digest = hashlib.sha256(f"{rt.uid or rt.name}|{gen}|{message}".encode()).hexdigest()[:20]
                self.writer.event(policy_ref(rt), reason=reason, message=message, event_type="Warning",
                                  name=f"{rt.name[:200]}.qm{digest}")
        except Exception:
            if err is not None:
                raise err from None
            raise
        finally:
            for other in (RECONCILE_FAILED, APPLY_REFUSED):
                self.metrics.policy_degraded.labels(rt.name, other).set(1 if other == reason else 0)
        if first:
            self.metrics.reconcile_errors.labels("reconcile").inc()
            if err is not None and not isinstance(err, InputError | ApiException | Refused):
                log.error("policy %s: %s", rt.name, message, exc_info=err)
            else:
                log.error("policy %s: %s", rt.name, message)

    def recovered(self, rt: PolicyRuntime) -> None:
        """The policy is served again: qm_policy_degraded back to 0."""
        if rt.failure is not None:
            rt.failure = None
            log.info("policy %s: served again", rt.name)
        for reason in (RECONCILE_FAILED, APPLY_REFUSED):
            self.metrics.policy_degraded.labels(rt.name, reason).set(0)

    def forecast(self, rt: PolicyRuntime, decision: Decision, now: float) -> list[Forecast] | None:
        """status.forecasts (queue_manager/forecast.py): a transition just started is forecast in the
        background; results and scores are collected here. None: nothing to write."""
        book, policy = self.forecasts, decision.policy
        stored = decision.status.forecasts
        if book is None or (not stored and not policy.spec.forecasts.enabled):
            return None

        def scored(name: str, f: Forecast) -> None:
            for v in f.values:
                ratio = error_ratio(v.predicted, v.ci95, v.observed)
                if ratio is not None:
                    self.metrics.forecast_error.labels(name, v.metric).set(ratio)

        return book.step(policy, rt.uid, rt.generation, decision.actions, decision.status.transitions, stored,
                         now, on_scored=scored, kueue=self.kueue.setting(now))

    def sync_history(self, rt: PolicyRuntime, now: float) -> None:
        """Bring the history up to the Workload cache (on shutdown: the last reconcile may be a tick old)."""
        if rt.history is None or rt.policy is None:
            return
        workloads = self.state.workloads.of(rt.workload_scope(rt.policy))
        bring_history_up(rt.policy, lambda key: self.live(rt, key), workloads, rt.history, now)

    def conditions(self, rt: PolicyRuntime, decision: Decision, errors: list[str],
                   now: float) -> list[Condition]:
        gen = rt.generation
        prev = self.stored(rt).conditions
        active = decision.active_transitions
        blocked = "; ".join([f"{k}: {why}" for k, why in decision.blocked] + errors)
        reason = "PreemptionFailed" if errors else ("TransitionBlocked" if decision.blocked else "Healthy")
        stranded = "; ".join(f"cohort {x.cohort}: {x.amount} of {x.flavor}/{x.resource} in no team's quota"
                             for x in decision.status.stranded_quota)
        budgets = self.budget_conditions(decision, gen, now, prev)
        return merge_conditions(prev, [
            *budgets,
            condition(STRANDED, bool(stranded), "QuotaHandedToNobody" if stranded else "AllQuotaAssigned",
                      stranded, generation=gen, now=now, previous=prev),
            condition(READY, True, "Applied", f"{len(rt.desired)} Kueue objects in place", generation=gen,
                      now=now, previous=prev),
            condition(TRANSITIONING, active > 0, "QuotaShift" if active else "Idle",
                      f"{active} quota transition(s) in progress", generation=gen, now=now, previous=prev),
            condition(DEGRADED, bool(blocked), reason, blocked, generation=gen, now=now, previous=prev)])

    @staticmethod
    def budget_conditions(decision: Decision, generation: int | None, now: float,
                          prev: Sequence[Condition]) -> list[Condition]:
        """BudgetThresholdReached, for a policy with budgets: which budgets reached a threshold in their
        period (fairshare.control.budgets; the alert of `alert`, and what is enforced)."""
        if not decision.policy.spec.budgets:
            return []
        reached = [b for b in decision.status.budgets if b.crossed]
        text = "; ".join(
            f"{b.name}: {b.used} of {b.limit} {b.unit} ({max(c.percent for c in b.crossed)}% reached"
            + (f"; enforcing {', '.join(b.enforcing)}" if b.enforcing else "") + ")" for b in reached)
        reason = "BudgetEnforced" if any(b.enforcing for b in reached) else \
            ("BudgetAlert" if reached else "WithinBudget")
        return [condition(BUDGET, bool(reached), reason, text or "every budget below its thresholds",
                          generation=generation, now=now, previous=prev)]

    # --- Kueue objects ---------------------------------------------------------------------------------

    def other_namespaces(self, rt: PolicyRuntime) -> list[str]:
        """The teams' namespaces of the other policies this operator reconciles: not "outside every team" to
        this policy's tenancy rules (fairshare.policy.tenancy.render_tenancy)."""
        with self.state.lock:
            others = [r.policy for r in self.state.policies.values() if r.name != rt.name and r.policy]
        return sorted({ns for p in others for t in p.spec.teams for ns in t.namespaces})

    def live(self, rt: PolicyRuntime, key: ObjectKey) -> dict[str, Any] | None:
        """An owned object as it exists: what we last applied, else the watch cache, else (after a restart,
        before the watch caught up) a read. Every kind, not only the ClusterQueues whose quotas transitions
        start from: a Workload counts as the policy's only through its LocalQueue (observe.policy_state),
        so a LocalQueue not seen yet made an in-flight victim, deactivated and admitted nowhere, look gone
        (its record ended Gone and it was never reactivated: found by tests/integration/
        test_operator_faults.py). At most one read per object after a start: the reconcile then applies
        it or finds it applied (`ensure`), and `applied` answers from then on."""
        applied = rt.applied.get(key)
        if applied is not None:
            return applied
        cached = self.state.live.get(key)
        if cached is not None:
            return managed_content(cached[1])
        obj = self.reader.get(ref_of(key))
        return managed_content(obj) if obj is not None else None

    def to_write(self, rt: PolicyRuntime, key: ObjectKey) -> str | None:
        """Whether a desired object needs a write: "created", "updated", or None when the live one already
        matches (no write, no Event). Raises Refused when reverting a hand edit of it was refused, or when
        another policy owns it."""
        want = rt.desired[key]
        cached = self.state.live.get(key)
        live = cached[1] if cached is not None else self.reader.get(ref_of(key))
        owner = owning_policy(live) if live is not None else None
        if owner is not None and owner != rt.name:
            # Another policy renders it too (the same flavor, cohort or class name in both): applying it would
            # take it over, and that policy would take it back on its next reconcile.
            raise Refused.owned(key, owner)
        if live is not None and owner == rt.name:
            try:  # a hand edit in the watch cache, its event not handled yet
                if check_drift(self, rt, None, live):
                    return None
            except ApiException as err:
                if busy(err):
                    raise
                raise Refused.of(key, err) from None
            known = rt.in_place.get(key)
            if known is not None and known[1] is live and known[0] == want:
                return None
            if not needs_apply(want, live):
                rt.applied.setdefault(key, managed_content(live))
                rt.in_place[key] = (want, live)
                return None
        return "created" if live is None else "updated"

    def write_all(self, rt: PolicyRuntime, kind: str, writes: Sequence[tuple[ObjectKey, str]],
                  act: Actuator, changes: dict[str, list[QuotaChange]]) -> list[Refused]:
        """Apply objects of one kind, each "created" or "updated", several at a time (fanout.py); the ones
        the API server refused. Each write is recorded, and reported (named after its content: once however
        often it is applied), in key order. A write the API server or a webhook refuses is no apply:
        Refused, with its words, and no record. Any other failure (the API is busy or away) goes up once
        the others are recorded and reported; the next reconcile retries it."""
        answers = fan_out(lambda key: self.apply(rt, key, rt.desired[key]), [key for key, _ in writes])
        refused: list[Refused] = []
        failure: Exception | None = None
        facts: dict[ObjectKey, Fact] = {}
        for (key, what), stored in zip(writes, answers, strict=True):
            if isinstance(stored, ApiException) and not busy(stored):
                refused.append(Refused.of(key, stored))
            elif isinstance(stored, Exception):
                failure = failure or stored
            else:
                content = json.dumps(rt.desired[key], sort_keys=True, default=str).encode()
                digest = hashlib.sha256(content).hexdigest()[:16]
                rt.remember_write(key, stored, managed_content(stored))
                facts[key] = Fact(AuditAction.APPLY, ref_of(key), f"{what} {key.kind} {key.name}",
                                  "rendered from the policy", f"apply|{rt.generation}|{key}|{digest}",
                                  changes.get(key.name, []) if key.kind == "ClusterQueue" else [])
        # What an earlier reconcile wrote and could not report (its object is in place: no write now).
        late = {k: f for k, f in rt.unreported.items() if k.kind == kind and k in rt.desired}
        for key in [k for k in rt.unreported if k.kind == kind and k not in rt.desired]:
            del rt.unreported[key]  # no longer the policy's
        reported = {**late, **facts}
        keys = sorted(reported)
        for key, err in zip(keys, act.audit_all([reported[k] for k in keys]), strict=True):
            if err is None:
                rt.unreported.pop(key, None)
            else:
                rt.unreported[key] = reported[key]
                failure = failure or err
        if failure is not None:
            raise failure
        return refused

    def apply(self, rt: PolicyRuntime, key: ObjectKey, want: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of a rendered object. A forced apply keeps the items another field manager added
        to a list the API server merges as a set: a hand edit of a ValidatingAdmissionPolicyBinding's
        validationActions to [Warn] became [Warn, Deny], which the API server refuses (422; found by
        tests/integration/test_tenancy.py). Then the rendered content goes back by merge patch (lists
        replaced whole) and is applied again, to own it."""
        try:
            return self.writer.apply(stamped(want))
        except ApiException as err:
            if err.status != 422:
                raise
            log.warning("%s: the apply was refused (%s); putting the rendered content back by merge patch",
                        ref_of(key).describe(), err.reason)
        rt.remember_version(key, self.writer.merge_patch(ref_of(key), managed_content(want)))
        return self.writer.apply(stamped(want))

    def prune(self, rt: PolicyRuntime, act: Actuator, *, cached: bool = False) -> None:
        """Delete what the policy owns and no longer implies. The first prune of a policy in this process
        LISTs every kind by the policy's label; later ones (each new generation) read the watch cache of
        the owned objects, which holds what carries the same labels (the watches filter on them), with what
        this process wrote: at 500 teams the LISTs took 0.6 s of each edit's reconcile."""
        for kind_name in reversed(APPLY_ORDER):
            if cached:  # what the watches hold, and what this process wrote (its event may be on its way)
                found = {key for key, (owner, _) in list(self.state.live.items())
                         if key.kind == kind_name and owner == rt.name}
                keys = sorted(found | {key for key in rt.applied if key.kind == kind_name})
            else:
                listed = self.reader.list(kind_of(kind_name), label_selector=owner_selector(rt.name))
                keys = [key_of(obj) for obj in listed]
            for key in keys:
                if key in rt.desired:
                    continue
                # Deleted, then reported (gone already, e.g. by a process that crashed after the delete: the
                # same fact, reported once). Gone from what this process knows, so that a later prune from
                # the cache does not delete and report it again.
                self.writer.delete(ref_of(key))
                for known in (rt.in_place, rt.applied, self.state.live):
                    known.pop(key, None)
                act.audit(AuditAction.PRUNE, ref_of(key), f"deleted {key.kind} {key.name}",
                          "no longer implied by the policy", once=f"prune|{rt.generation}|{key}")

    # --- metrics -----------------------------------------------------------------------------------------

    def export(self, rt: PolicyRuntime, decision: Decision, waiting: Mapping[tuple[str, str], float],
               now: float) -> None:
        m, name = self.metrics, rt.name
        for p in decision.progress:
            labels = (name, p.key.team, p.key.flavor, p.key.resource)
            m.quota_current.labels(*labels).set(p.current / 1000)
            m.quota_target.labels(*labels).set(p.target / 1000)
            ratio = 1.0 if p.total_steps == 0 else p.applied_steps / p.total_steps
            m.transition_progress.labels(*labels).set(ratio)
            m.transition_waiting_drain.labels(*labels).set(1 if p.waiting else 0)
            if p.last_step_at is not None:
                m.transition_last_step_time.labels(*labels).set(p.last_step_at)
            if p.step_interval is not None:
                m.transition_step_interval.labels(*labels).set(p.step_interval)
            m.transition_next_step_time.labels(*labels).set(p.next_step_at or 0)
        m.transitions_active.labels(name).set(decision.active_transitions)
        for x in decision.status.stranded_quota:
            m.stranded_quota.labels(name, x.cohort, x.flavor, x.resource).set(parse_quantity(x.amount) / 1000)
        m.policy_generation.labels(name).set(rt.generation or 0)
        for klass in decision.policy.spec.preemption.protected_classes:
            m.protected_class.labels(name, klass).set(1)
        m.preemption_budget_remaining.labels(name).set(decision.gate.budget_remaining)
        protected: dict[str, int] = {}
        for w in decision.gate.waiting:
            protected[w.info.cluster_queue] = protected.get(w.info.cluster_queue, 0) + 1
        oldest = {k: max(0.0, now - created) for k, created in waiting.items()}
        for cq in sorted({c for c, _ in oldest} | set(protected) | rt.pending_series):
            m.pending_protected.labels(name, cq).set(protected.get(cq, 0))
        for cq, pc in sorted(set(oldest) | rt.oldest_series):
            m.oldest_pending_age.labels(name, cq, pc).set(oldest.get((cq, pc), 0.0))
        rt.pending_series = set(protected) | {c for c, _ in oldest}
        rt.oldest_series = set(oldest)
        if rt.history is not None:
            history_store.export_metrics(rt.history, name, m, now)
        self.export_budgets(rt, decision)
        self.export_idle(rt, decision)

    def export_idle(self, rt: PolicyRuntime, decision: Decision) -> None:
        """qm_gpu_activity_workloads and qm_idle_workloads_warned (spec.idle), and qm_namespace_team (the
        dashboards' join of DCGM's namespaces to teams)."""
        m, name = self.metrics, rt.name
        for team in decision.policy.spec.teams:
            for ns in team.namespaces:
                m.namespace_team.labels(name, ns, team.name).set(1)
        idle = decision.idle
        if idle is None:
            return
        t = idle.telemetry
        for state, count in (("idle", t.idle), ("busy", t.busy), ("unknown", t.unknown)):
            m.gpu_activity.labels(name, state).set(count)
        m.idle_warned.labels(name).set(sum(1 for r in idle.records if not r.dry_run))

    def export_storms(self, rt: PolicyRuntime, decision: Decision) -> None:
        """qm_eviction_storm: 1 per storm whose response is in force (status.storms); the Events and
        qm_eviction_storms_total come with the StormDetected actions (actuator.py)."""
        seen: set[tuple[str, str]] = set()
        for storm in decision.status.storms:
            key = (storm.preemptor or (storm.victims[0] if storm.victims else ""), str(storm.response))
            self.metrics.eviction_storm.labels(rt.name, *key).set(1)
            seen.add(key)
        for key in rt.storm_series - seen:
            self.metrics.eviction_storm.remove(rt.name, *key)
        rt.storm_series = seen

    def export_budgets(self, rt: PolicyRuntime, decision: Decision) -> None:
        """qm_budget_*: the figures of status.budgets (the ones enforcement uses)."""
        m, name = self.metrics, rt.name
        seen: set[tuple[str, ...]] = set()
        for b in decision.status.budgets:
            team, unit = b.team or "", b.unit or ""
            if b.used_ratio is not None and b.used is not None:
                m.budget_used_ratio.labels(name, b.name, team).set(b.used_ratio)
                m.budget_used.labels(name, b.name, unit).set(float(b.used))
                seen |= {("ratio", b.name, team), ("used", b.name, unit)}
            if b.limit is not None:
                m.budget_limit.labels(name, b.name, unit).set(float(b.limit))
                seen.add(("limit", b.name, unit))
            for action in ("shrink", "deprioritize", "hold"):
                m.budget_enforcing.labels(name, b.name, team, action).set(1 if action in b.enforcing else 0)
                seen.add(("enforcing", b.name, team, action))
        for series in rt.budget_series - seen:  # a budget removed from the policy, or a changed unit
            gauge = {"ratio": m.budget_used_ratio, "used": m.budget_used, "limit": m.budget_limit,
                     "enforcing": m.budget_enforcing}[series[0]]
            gauge.remove(name, *series[1:])
        rt.budget_series = seen


def input_key(body: dict[str, Any]) -> str:
    """What a reconcile reads of a QuotaPolicy, as one string: status is ours and may hold fields newer than
    the model, so only metadata (less its version and field managers) and spec are input."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields")}
    return json.dumps({"metadata": meta, "spec": body.get("spec")}, sort_keys=True, default=str)


def _reverted(now: Sequence[TransitionStatus], before: Sequence[TransitionStatus],
              teams: set[str]) -> list[TransitionStatus]:
    """The decision's transition records, with those of `teams` as they were before it."""
    old = {(t.team, t.flavor, t.resource): t for t in before if t.team in teams}
    out: list[TransitionStatus] = []
    for t in now:
        if t.team not in teams:
            out.append(t)
        elif (kept := old.pop((t.team, t.flavor, t.resource), None)) is not None:
            out.append(kept)
    return out + list(old.values())
