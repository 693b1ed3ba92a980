"""The operator: kopf handlers call these methods; decisions come from `fairshare`,
writes go through `Writer`. One `Operator` per process, created by `qm run` and handed
to kopf as `memo.operator` (no module globals)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from fairshare.errors import InputError
from fairshare.manifests import parse_object
from fairshare.models import ClusterState, Workload
from fairshare.planners.experiments import ExperimentPolicy, plan_experiment_preemptions
from fairshare.policy import (
    KIND_ORDER,
    ObjectKey,
    QuotaPolicy,
    format_milli,
    half_life_seconds,
    owner_selector,
    parse_policy,
    render_index,
    spec_quotas,
)
from fairshare.snapshot import Snapshot

from .audit import Action, AuditRecord, log_audit
from .conditions import DEGRADED, READY, TRANSITIONING, condition, merge_conditions
from .config import OperatorConfig
from .events import rfc3339
from .eviction import EvictionMechanism, EvictionRequest
from .kube import Reader
from .metrics import Metrics
from .ownership import differs_from_desired, managed_content, owning_policy, restore_patch, spec_drift
from .preemption import (
    EVICTED,
    EXPERIMENT_KIND,
    GONE,
    REACTIVATED,
    REPORTED,
    REQUESTED,
    REQUEUED,
    TRANSITION_KIND,
    already_reported,
    condition_true,
    experiment_policy,
    holds_quota,
    in_flight,
    past_preemption_times,
    policy_state,
    trim,
)
from .refs import QUOTA_POLICY, ObjectRef, kind_of
from .state import PolicyRuntime, State
from .transitions import TransitionOutcome, deadline_victims, live_nominal, live_usage, plan_transitions
from .usage import PolicyHistory, export_metrics, history_weights
from .writer import Writer

log = logging.getLogger("queue_manager")


def _key_of(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def _ref_of(key: ObjectKey) -> ObjectRef:
    return ObjectRef(kind=key.kind, name=key.name, namespace=key.namespace or None)


def _fingerprint(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class Operator:
    """Reconciles QuotaPolicies into Kueue objects; see docs/operator.md."""

    def __init__(self, config: OperatorConfig, api: k8s.ApiClient, *, clock: Callable[[], float] = time.time,
                 metrics: Metrics | None = None) -> None:
        self.config = config
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.writer = Writer(api, clock=clock)
        self.reader = Reader(api)
        self.state = State()

    # ------------------------------------------------------------------ audit
    def audit(self, record: AuditRecord, *, also_on: ObjectRef | None = None) -> None:
        """Log line + Event on the target (and optionally on a second object)."""
        log_audit(log, record)
        self.metrics.audit_records.labels(str(record.action)).inc()
        self.writer.event(record.target, reason=record.event_reason, message=record.message(),
                          event_type=record.event_type)
        if also_on is not None and also_on != record.target:
            self.writer.event(also_on, reason=record.event_reason, message=record.message(),
                              event_type=record.event_type)

    # ------------------------------------------------------------------ QuotaPolicy
    def policy_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name", ""))
        if not name:
            return
        if event_type == "DELETED":
            self.forget_policy(name)
            return
        self.reconcile_policy(name, body)

    def policy_tick(self, body: dict[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name", ""))
        if name:
            self.reconcile_policy(name, body)

    def reconcile_policy(self, name: str, body: dict[str, Any]) -> None:
        rt = self.state.runtime(name, body)
        with rt.lock:
            self._reconcile_locked(rt)

    def _policy_ref(self, rt: PolicyRuntime) -> ObjectRef:
        uid = (rt.body.get("metadata") or {}).get("uid")
        return ObjectRef(kind=QUOTA_POLICY.kind, name=rt.name, uid=str(uid) if uid else None)

    def _parse(self, rt: PolicyRuntime) -> QuotaPolicy | None:
        # Status is ours and may hold fields newer than the model: only metadata + spec are input.
        doc = {k: v for k, v in rt.body.items() if k != "status"}
        try:
            policy = parse_policy(doc)
        except InputError as err:
            self.metrics.policy_valid.labels(rt.name).set(0)
            self._reject(rt, err.one_line())
            return None
        self.metrics.policy_valid.labels(rt.name).set(1)
        rt.policy = policy
        return policy

    def _reject(self, rt: PolicyRuntime, message: str) -> None:
        """The API server's CEL rules catch most mistakes; what gets past them (or comes
        from an older CRD) is reported and nothing is applied (never a partial apply)."""
        gen = rt.generation
        if rt.rejected_generation != gen:
            rt.rejected_generation = gen
            self.audit(AuditRecord(Action.POLICY_REJECTED, self._policy_ref(rt), "policy not applied",
                                   message, rt.name, gen))
        now = self.clock()
        prev = self._status_conditions(rt)
        self._write_status(rt, {
            "conditions": merge_conditions(prev, [
                condition(READY, False, "InvalidPolicy", message, generation=gen, now=now, previous=prev),
                condition(DEGRADED, True, "InvalidPolicy", message, generation=gen, now=now, previous=prev)]),
        })

    def _status_conditions(self, rt: PolicyRuntime) -> list[dict[str, Any]]:
        status = rt.body.get("status") or {}
        conds = status.get("conditions") or []
        return [c for c in conds if isinstance(c, dict)]

    def _write_status(self, rt: PolicyRuntime, fields: dict[str, Any]) -> None:
        """Merge-patch the status fields that changed since our last write (none: no request)."""
        last = rt.last_status or {}
        patch = {k: v for k, v in fields.items() if k not in last or _fingerprint(last[k]) != _fingerprint(v)}
        if not patch and rt.last_status is not None:
            return
        self.writer.patch_policy_status(rt.name, patch or fields)
        rt.last_status = {**last, **fields}

    def _reconcile_locked(self, rt: PolicyRuntime) -> None:
        policy = self._parse(rt)
        if policy is None:
            return
        now = self.clock()
        gen = rt.generation
        started = time.perf_counter()
        stored = self._stored_transitions(rt)
        records = self._records(rt)
        outcome = plan_transitions(policy, gen, stored, self._live_nominals(rt, policy),
                                   live_usage(self.state.workloads.snapshot()), now,
                                   past_preemption_times(records, kind=TRANSITION_KIND))
        self.metrics.decision_latency.labels("transition").observe(time.perf_counter() - started)
        # Progress first, then the ClusterQueue: a crash in between re-applies the step recorded
        # in status on restart; it never skips a step nor applies one twice.
        self._write_status(rt, {"transitions": outcome.status, "activeTransitions": outcome.active})
        # The step's Event goes out with its progress record, before the change it announces: a crash
        # after the ClusterQueue apply can no longer lose it (the restarted operator finds the step
        # recorded and does not announce it again). The window left is between the status write and
        # the Event post, two calls in a row.
        self._report_steps(rt, outcome, gen)
        started = time.perf_counter()
        # Only quotas held away from the spec are overridden: the rest keep the text the user wrote.
        spec = spec_quotas(policy)
        held = {k: v for k, v in outcome.quotas.items() if spec.get(k) != v}
        weights = self._pushed_weights(rt, policy, now)
        desired = render_index(policy, quotas=held, weights=weights)
        self.metrics.decision_latency.labels("render").observe(time.perf_counter() - started)
        rt.desired = {k: dict(v) for k, v in desired.items()}
        for kind in KIND_ORDER:
            for key in sorted(k for k in rt.desired if k.kind == kind):
                self._ensure(rt, key, gen)
        if rt.pruned_generation != gen:
            self._prune(rt, gen)
            rt.pruned_generation = gen
        self._report_transitions(rt, outcome, gen)
        errors = self._isolated("deadline-preemption",
                                lambda: self._deadline_preemptions(rt, outcome, now, gen))
        self.metrics.policy_generation.labels(rt.name).set(gen or 0)
        extra = self._account_usage(rt, policy, now)
        errors += self._isolated("preemption", lambda: self._preempt(rt, policy, now))
        prev = self._status_conditions(rt)
        transitioning = outcome.active > 0
        degraded_reason = "Healthy"
        if errors:
            degraded_reason = "PreemptionFailed"
        elif outcome.blocked:
            degraded_reason = "TransitionBlocked"
        blocked = "; ".join([f"{k.team}/{k.flavor}/{k.resource}: {why}" for k, why in outcome.blocked]
                            + errors)
        self._write_status(rt, {
            **extra,
            "observedGeneration": gen,
            "teams": len(policy.spec.teams),
            "conditions": merge_conditions(prev, [
                condition(READY, True, "Applied", f"{len(rt.desired)} Kueue objects in place",
                          generation=gen, now=now, previous=prev),
                condition(TRANSITIONING, transitioning, "QuotaShift" if transitioning else "Idle",
                          f"{outcome.active} quota transition(s) in progress", generation=gen, now=now,
                          previous=prev),
                condition(DEGRADED, bool(blocked), degraded_reason, blocked, generation=gen, now=now,
                          previous=prev)]),
        })

    def _isolated(self, what: str, fn: Callable[[], None]) -> list[str]:
        """Run one preemption part; an API error there (e.g. a missing RBAC verb) is logged,
        counted and reported in the Degraded condition, and does not stop quota transitions."""
        try:
            fn()
        except ApiException as err:
            self.metrics.reconcile_errors.labels(what).inc()
            body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
            message = f"{what}: API error {err.status} {err.reason}: {body[:300]}"
            log.error("%s", message)
            return [message]
        return []

    # ------------------------------------------------------------------ transitions
    def _stored_transitions(self, rt: PolicyRuntime) -> list[dict[str, Any]]:
        """What we last wrote (the watch may lag behind our own writes), else the API's copy."""
        if rt.last_status is not None and "transitions" in rt.last_status:
            entries = rt.last_status["transitions"]
        else:
            entries = (rt.body.get("status") or {}).get("transitions") or []
        return [e for e in entries if isinstance(e, dict)]

    def _live_nominals(self, rt: PolicyRuntime, policy: QuotaPolicy) -> dict[str, dict[tuple[str, str], int]]:
        out: dict[str, dict[tuple[str, str], int]] = {}
        for team in policy.spec.teams:
            key = ObjectKey("ClusterQueue", "", team.name)
            applied = rt.applied.get(key)
            obj = applied if applied is not None else self._live(key)
            if obj is not None:
                out[team.name] = live_nominal(obj)
        return out

    def _report_steps(self, rt: PolicyRuntime, outcome: TransitionOutcome, gen: int | None) -> None:
        policy_ref = self._policy_ref(rt)
        for key, before, after, steps in outcome.started:
            self.audit(AuditRecord(
                Action.TRANSITION_START, policy_ref,
                f"transition of {key.team} {key.flavor}/{key.resource} from {format_milli(before)} to "
                f"{format_milli(after)} in {steps} step(s)", "the policy's quota changed", rt.name, gen))
        for step in outcome.steps:
            self.metrics.transition_steps.labels(rt.name, step.key.team).inc()
            why = "; ".join(step.reasons) or "scheduled step"
            self.audit(AuditRecord(
                Action.TRANSITION_STEP, ObjectRef("ClusterQueue", step.key.team),
                f"nominalQuota {step.key.flavor}/{step.key.resource} {format_milli(step.before)} -> "
                f"{format_milli(step.after)} (step {step.step}/{step.total})", why, rt.name, gen),
                also_on=policy_ref)

    def _report_transitions(self, rt: PolicyRuntime, outcome: TransitionOutcome, gen: int | None) -> None:
        policy_ref = self._policy_ref(rt)
        waiting_now = set(outcome.waiting_reasons)
        for key in sorted(waiting_now - rt.waiting):
            self.audit(AuditRecord(Action.TRANSITION_WAIT, ObjectRef("ClusterQueue", key.team),
                                   f"next step of {key.flavor}/{key.resource} waits",
                                   outcome.waiting_reasons[key], rt.name, gen))
        rt.waiting = waiting_now
        for key in outcome.finished:
            self.audit(AuditRecord(Action.TRANSITION_DONE, policy_ref,
                                   f"transition of {key.team} {key.flavor}/{key.resource} finished",
                                   "target quota reached", rt.name, gen))
        for key, why in outcome.blocked:
            self.metrics.transition_waiting_drain.labels(rt.name, key.team, key.flavor, key.resource).set(0)
            log.warning("transition of %s/%s/%s blocked: %s", key.team, key.flavor, key.resource, why)
        for p in outcome.progress:
            labels = (rt.name, p.key.team, p.key.flavor, p.key.resource)
            self.metrics.quota_current.labels(*labels).set(p.current / 1000)
            self.metrics.quota_target.labels(*labels).set(p.target / 1000)
            self.metrics.transition_progress.labels(*labels).set(
                1.0 if p.total_steps == 0 else p.applied_steps / p.total_steps)
            self.metrics.transition_waiting_drain.labels(*labels).set(1 if p.waiting else 0)
            if p.last_step_at is not None:
                self.metrics.transition_last_step_time.labels(*labels).set(p.last_step_at)
        self.metrics.transitions_active.labels(rt.name).set(outcome.active)

    # ------------------------------------------------------------------ experiment preemption
    def _records(self, rt: PolicyRuntime) -> list[dict[str, Any]]:
        if rt.last_status is not None and "lastPreemptions" in rt.last_status:
            entries = rt.last_status["lastPreemptions"]
        else:
            entries = (rt.body.get("status") or {}).get("lastPreemptions") or []
        return [dict(e) for e in entries if isinstance(e, dict)]

    def _preempt(self, rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> None:
        rules = experiment_policy(policy, self.config.dry_run)
        workloads = self.state.workloads.snapshot()
        records = self._records(rt)
        records = self._follow_up(rt, records, workloads, now)
        if rules is None:
            self._write_status(rt, {"lastPreemptions": records})
            return
        state = policy_state(list(rt.desired.values()), workloads)
        grace = self.config.starvation_grace_seconds
        starved = self._observe_pending(rt, rules, state, now)
        remaining = rules.budget.remaining(past_preemption_times(records, kind=EXPERIMENT_KIND), now)
        self.metrics.preemption_budget_remaining.labels(rt.name).set(remaining)
        if not starved or in_flight(records):
            self._write_status(rt, {"lastPreemptions": records})
            return
        history = rt.history  # synced by _account_usage just before
        if history is None:
            return
        started = time.perf_counter()
        snap = Snapshot.from_state(state)
        pending = [snap.pending[k] for k in sorted(snap.pending)
                   if snap.pending[k].priority >= rules.protected_priority
                   and now - snap.pending[k].workload.creation_timestamp >= grace]
        past = past_preemption_times(records, kind=EXPERIMENT_KIND)
        plan = plan_experiment_preemptions(snap, history.graph, rules, now=history.clamp(now),
                                           past_preemptions=past, pending=pending)
        self.metrics.decision_latency.labels("preemption").observe(time.perf_counter() - started)
        gen = rt.generation
        for decision in plan.decisions:
            if decision.action == "blocked":
                self._report_blocked(rt, decision.workload, decision.reason, gen)
            for v in decision.victims:
                records = self._act_on_victim(rt, v.victim, v.beneficiary, v.reason, plan.dry_run, records,
                                              workloads, now, gen)
        self._write_status(rt, {"lastPreemptions": trim(records)})

    def _deadline_preemptions(self, rt: PolicyRuntime, outcome: TransitionOutcome, now: float,
                              gen: int | None) -> None:
        """A transition past its deadline may evict what still holds quota above the quota in
        force, within maxVictimsPerHour (the planner's `to_free` / `preemptions_allowed`)."""
        if not outcome.to_free:
            return
        records = self._records(rt)
        if in_flight(records):
            return
        policy = rt.policy
        rules = experiment_policy(policy, self.config.dry_run) if policy is not None else None
        dry_run = rules.dry_run if rules is not None else bool(self.config.dry_run)
        workloads = self.state.workloads.snapshot()
        for key, excess, allowed, _ in outcome.to_free:
            for victim, reason in deadline_victims(workloads, key, excess, allowed, now):
                records = self._act_on_victim(rt, victim, "", reason, dry_run, records, workloads, now, gen,
                                              kind=TRANSITION_KIND)
        self._write_status(rt, {"lastPreemptions": trim(records)})

    def _observe_pending(self, rt: PolicyRuntime, rules: ExperimentPolicy, state: ClusterState,
                         now: float) -> bool:
        """Export pending ages; True when protected work waits longer than the grace period."""
        starved = False
        oldest: dict[tuple[str, str], float] = {}
        protected: dict[str, int] = {}
        for wl in state.workloads.values():
            if wl.has_quota_reservation or wl.is_finished or not wl.active:
                continue
            cq = state.cluster_queue_of(wl) or ""
            age = max(0.0, now - wl.creation_timestamp)
            k = (cq, wl.priority_class or "")
            oldest[k] = max(oldest.get(k, 0.0), age)
            if wl.effective_priority >= rules.protected_priority:
                protected[cq] = protected.get(cq, 0) + 1
                starved = starved or age >= self.config.starvation_grace_seconds
        for cq in sorted({c for c, _ in oldest} | set(protected) | set(rt.pending_series)):
            self.metrics.pending_protected.labels(rt.name, cq).set(protected.get(cq, 0))
        for cq, pc in sorted(set(oldest) | rt.oldest_series):
            self.metrics.oldest_pending_age.labels(rt.name, cq, pc).set(oldest.get((cq, pc), 0.0))
        rt.pending_series = set(protected) | {c for c, _ in oldest}
        rt.oldest_series = set(oldest)
        return starved

    def _report_blocked(self, rt: PolicyRuntime, beneficiary: str, reason: str, gen: int | None) -> None:
        if rt.blocked_reported.get(beneficiary) == reason:
            return
        rt.blocked_reported[beneficiary] = reason
        kind = "budget" if "budget" in reason else "no-set"
        self.metrics.preemption_blocked.labels(rt.name, kind).inc()
        ns, _, name = beneficiary.partition("/")
        self.audit(AuditRecord(Action.PREEMPT_BLOCKED, ObjectRef("Workload", name, namespace=ns),
                               f"no experiment preempted for {beneficiary}", reason, rt.name, gen),
                   also_on=self._policy_ref(rt))

    def _act_on_victim(self, rt: PolicyRuntime, victim: str, beneficiary: str, reason: str, dry_run: bool,
                       records: list[dict[str, Any]], workloads: Mapping[str, Workload], now: float,
                       gen: int | None, *, kind: str = EXPERIMENT_KIND) -> list[dict[str, Any]]:
        ns, _, name = victim.partition("/")
        bns, _, bname = beneficiary.partition("/")
        victim_ref = ObjectRef("Workload", name, namespace=ns)
        beneficiary_ref = ObjectRef("Workload", bname, namespace=bns) if beneficiary else self._policy_ref(rt)
        record = {"time": rfc3339(now), "at": now, "victim": victim, "beneficiary": beneficiary,
                  "reason": reason, "dryRun": dry_run, "state": REPORTED if dry_run else REQUESTED,
                  "kind": kind}
        if dry_run:
            if already_reported(records, victim, beneficiary):
                return records
            self.metrics.preemptions.labels(rt.name, kind, "dry-run").inc()
            self.audit(AuditRecord(Action.PREEMPT_DRY_RUN, victim_ref, f"would preempt {victim}", reason,
                                   rt.name, gen), also_on=beneficiary_ref)
            return [*records, record]
        # Record first: a crash after the request still counts it against the budget.
        records = [*records, record]
        self._write_status(rt, {"lastPreemptions": trim(records)})
        req = EvictionRequest(ns, name, reason, None)
        self.writer.request_eviction(req, EvictionMechanism.DEACTIVATE)
        try:
            self.writer.explain_preemption(req)
        except ApiException as err:  # the eviction stands; the Event still carries the reason
            log.warning("could not set the preemption condition on %s: %s", victim, err.reason)
        self.metrics.preemptions.labels(rt.name, kind, "enforced").inc()
        self.audit(AuditRecord(Action.PREEMPT, victim_ref,
                               f"asked Kueue to evict {victim} for {beneficiary or 'a quota transition'}",
                               reason, rt.name, gen), also_on=beneficiary_ref)
        return records

    def _follow_up(self, rt: PolicyRuntime, records: list[dict[str, Any]], workloads: Mapping[str, Workload],
                   now: float) -> list[dict[str, Any]]:
        """Verify what Kueue did with each request and requeue victims once their
        beneficiary is in (see preemption.py for the states)."""
        out = []
        gen = rt.generation
        for r in records:
            state = r.get("state")
            victim = str(r.get("victim", ""))
            ns, _, name = victim.partition("/")
            ref = ObjectRef("Workload", name, namespace=ns)
            wl = workloads.get(victim)
            if r.get("dryRun") or state in (REQUEUED, GONE):
                out.append(r)
                continue
            if wl is None:
                out.append({**r, "state": GONE})
                continue
            if state == REQUESTED and not holds_quota(wl) and condition_true(wl, "Evicted"):
                evicted = wl.condition("Evicted")
                why = f"Evicted={evicted.reason}" if evicted is not None else "quota released"
                self.metrics.preemptions_verified.labels(rt.name).inc()
                self.audit(AuditRecord(Action.PREEMPT_VERIFIED, ref, f"Kueue evicted {victim} ({why})",
                                       str(r.get("reason", "")), rt.name, gen))
                r = {**r, "state": EVICTED, "evictedAt": rfc3339(now)}
                state = EVICTED
            elif state == REQUESTED and wl.active and holds_quota(wl):
                # Recorded but not (yet) deactivated, e.g. a crash or an API error between the
                # status write and the request: the request is idempotent, so issue it again.
                self.writer.request_eviction(EvictionRequest(ns, name, str(r.get("reason", "")), None),
                                             EvictionMechanism.DEACTIVATE)
            elif state == REQUESTED and now - float(r.get("at", now)) > self.config.eviction_verify_seconds \
                    and not r.get("overdue"):
                log.warning("Kueue has not evicted %s %.0fs after the request", victim,
                            now - float(r.get("at", now)))
                r = {**r, "overdue": True}
            if state == EVICTED:
                beneficiary = workloads.get(str(r.get("beneficiary", "")))
                waited = now - float(r.get("at", now))
                overdue = waited > self.config.eviction_verify_seconds
                if beneficiary is None or holds_quota(beneficiary) or overdue:
                    self.writer.reactivate(ns, name)
                    r = {**r, "state": REACTIVATED}
                    state = REACTIVATED
            if state == REACTIVATED and (condition_true(wl, "Requeued") or holds_quota(wl)) and wl.active:
                log.info("Kueue requeued %s", victim, extra={"qm": {"victim": victim, "policy": rt.name}})
                r = {**r, "state": REQUEUED}
            out.append(r)
        return out

    # ------------------------------------------------------------------ usage history
    def _pushed_weights(self, rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> dict[str, str] | None:
        """spec.fairShare.pushWeightsToKueue: history-adjusted fairSharing.weight per team."""
        if not policy.spec.fair_share.push_weights_to_kueue:
            rt.pushed_weights = None
            return None
        history = self._history(rt, policy, now)
        history.sync(policy, self.state.workloads.snapshot(), now)
        weights = history_weights(policy, history, now)
        if weights != rt.pushed_weights:
            shown = ", ".join(f"{t}={w}" for t, w in sorted(weights.items()))
            self.audit(AuditRecord(
                Action.WEIGHTS_PUSHED, self._policy_ref(rt), f"fairSharing weights {shown}",
                "policy weight / historical over-share (Fair Tree), bounded to [1/4, 4]x", rt.name,
                rt.generation))
            rt.pushed_weights = weights
        return weights

    def _history(self, rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> PolicyHistory:
        half_life = half_life_seconds(policy)
        if rt.history is None or rt.history_half_life != half_life:
            stored = (rt.body.get("status") or {}).get("history") if rt.history is None else None
            rt.history = PolicyHistory.restore_or_new(policy, stored, now)
            rt.history_half_life = half_life
            rt.history_persisted_at = now  # restored state is already persisted
        return rt.history

    def _account_usage(self, rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> dict[str, Any]:
        """Sync the history with the Workload cache; the status fields to write (history
        only when it is due, so the status is not rewritten every tick)."""
        history = self._history(rt, policy, now)
        history.sync(policy, self.state.workloads.snapshot(), now)
        export_metrics(history, rt.name, self.metrics, now)
        if now - rt.history_persisted_at < self.config.history_persist_seconds:
            return {"history": rt.last_status.get("history")} if rt.last_status and \
                "history" in rt.last_status else {}
        rt.history_persisted_at = now
        self.metrics.history_persist_time.labels(rt.name).set(now)
        return {"history": history.serialize()}

    def persist_all_history(self) -> None:
        """On shutdown: write every policy's history (the periodic write may be up to
        history_persist_seconds old)."""
        now = self.clock()
        with self.state.lock:
            runtimes = list(self.state.policies.values())
        for rt in runtimes:
            with rt.lock:
                if rt.history is None or rt.policy is None:
                    continue
                rt.history.sync(rt.policy, self.state.workloads.snapshot(), now)
                status = dict(rt.last_status or {})
                status["history"] = rt.history.serialize()
                self.writer.patch_policy_status(rt.name, {"history": status["history"]})
                rt.last_status = status
                self.metrics.history_persist_time.labels(rt.name).set(now)

    def _live(self, key: ObjectKey) -> dict[str, Any] | None:
        cached = self.state.live.get(key)
        if cached is not None:
            return cached[1]
        return self.reader.get(_ref_of(key))

    def _ensure(self, rt: PolicyRuntime, key: ObjectKey, gen: int | None) -> None:
        """Apply a desired object unless the live one already matches (no write, no Event)."""
        want = rt.desired[key]
        live = self._live(key)
        if live is not None and owning_policy(live) == rt.name \
                and not differs_from_desired(managed_content(want), managed_content(live)):
            rt.applied.setdefault(key, managed_content(live))
            return
        stored = self.writer.apply(want)
        rt.remember_write(key, stored, managed_content(stored))
        what = "created" if live is None else "updated"
        self.audit(AuditRecord(Action.APPLY, _ref_of(key), f"{what} {key.kind} {key.name}",
                               "rendered from the policy", rt.name, gen))

    def _prune(self, rt: PolicyRuntime, gen: int | None) -> None:
        for kind_name in reversed(KIND_ORDER):
            kind = kind_of(kind_name)
            for obj in self.reader.list(kind, label_selector=owner_selector(rt.name)):
                key = _key_of(obj)
                if key in rt.desired:
                    continue
                if self.writer.delete(_ref_of(key)):
                    rt.applied.pop(key, None)
                    self.audit(AuditRecord(Action.PRUNE, _ref_of(key), f"deleted {key.kind} {key.name}",
                                           "no longer implied by the policy", rt.name, gen))

    def forget_policy(self, name: str) -> None:
        """A deleted policy: delete what it owned (Kueue keeps running admitted work;
        queues vanish, so nothing new is admitted through them)."""
        with self.state.lock:
            rt = self.state.policies.pop(name, None)
        if rt is None:
            return
        with rt.lock:
            rt.desired = {}
            self._prune(rt, rt.generation)

    # ------------------------------------------------------------------ owned objects (drift)
    def owned_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        policy = owning_policy(body)
        if policy is None:
            return
        key = _key_of(body)
        if event_type == "DELETED":
            self.state.live.pop(key, None)
        else:
            self.state.live[key] = (policy, body)
        if key.kind == "ClusterQueue" and event_type != "DELETED":
            self.state.cq_status[key.name] = dict(body.get("status") or {})
        rt = self.state.policies.get(policy)
        if rt is None or key not in rt.desired:
            return
        with rt.lock:
            self._check_drift(rt, key, event_type, body)

    def _check_drift(self, rt: PolicyRuntime, key: ObjectKey, event_type: str | None,
                     body: dict[str, Any]) -> None:
        rv = str((body.get("metadata") or {}).get("resourceVersion", ""))
        if event_type != "DELETED" and rv in rt.own_versions.get(key, set()):
            return  # our own write (possibly a late event for an older one)
        applied = rt.applied.get(key)
        if not applied:  # nothing known to compare with (never a reason to wipe an object)
            return
        if event_type == "DELETED":
            paths = ["(object deleted)"]
            live: dict[str, Any] = {}
        else:
            live = managed_content(body)
            paths = spec_drift(applied, live, path="")
            paths = [p.lstrip(".") for p in paths]
        if not paths:
            return
        want = rt.desired[key]
        stored = self.writer.apply(want)
        content = managed_content(stored)
        leftover = restore_patch(applied, content) if spec_drift(applied, content) else {}
        if leftover and event_type != "DELETED":
            # Fields someone else added that our apply does not own: remove them by patch.
            stored = self.writer.merge_patch(_ref_of(key), leftover)
            content = managed_content(stored)
        rt.remember_write(key, stored, content)
        self.metrics.drift_corrections.labels(key.kind).inc()
        changed = ", ".join(paths[:8]) + (" ..." if len(paths) > 8 else "")
        self.audit(AuditRecord(Action.DRIFT, _ref_of(key), f"reverted hand edit of {changed}",
                               "owned by the policy; edit the QuotaPolicy instead", rt.name, rt.generation),
                   also_on=self._policy_ref(rt))

    # ------------------------------------------------------------------ Workloads
    def workload_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        cache = self.state.workloads
        if event_type == "DELETED":
            with cache.lock:
                cache.items.pop(key, None)
                cache.unparsable.pop(key, None)
            self.metrics.workloads_tracked.set(len(cache.items))
            return
        doc = dict(body)
        doc.setdefault("apiVersion", "kueue.x-k8s.io/v1beta2")
        doc.setdefault("kind", "Workload")
        try:
            parsed = parse_object(doc)
        except InputError as err:
            with cache.lock:
                first = key not in cache.unparsable
                cache.unparsable[key] = err.one_line()
            if first:
                log.warning("workload %s not tracked: %s", key, err.one_line())
            return
        if not isinstance(parsed, Workload):
            return
        with cache.lock:
            cache.items[key] = parsed
            cache.unparsable.pop(key, None)
        self.metrics.workloads_tracked.set(len(cache.items))

    # ------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        log.info("operator stopping: persisting usage history")
        try:
            self.persist_all_history()
        except ApiException as err:
            log.error("could not persist usage history on shutdown: %s", err.reason)
