"""What the operator hands the ledger (docs/ledger.md), and the budget consumption it reads back.

- Every Workload event (the watch, and a listing at start: the resync) is an observation; the last state
  of a deleted Workload is recorded with ``deleted``. A life the ledger holds open whose Workload is gone
  from the listing was deleted while the operator was down: it is closed (`WorkloadGone`, inferred).
- Every quota the operator puts in force (once per change), every audit record (with the policy
  generation and who last edited the policy), and the policies' prices, labels and retention.
- Each budget's consumption in its period, measured in the ledger by a background thread every
  ``--budget-refresh``; a reconcile reads the last measurement (never the database).

The ledger never blocks a quota step or an eviction: recording appends to the local spool (fsync'd for
audit, quota and deletion records; observations the API can give again are not fsync'd) and returns; the
database is written by the ledger's own thread. A failure of the ledger itself (a full disk) is logged,
counted (`qm_reconcile_errors_total{handler="ledger"}`) and dropped, never raised into a reconcile.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fairshare.control.budgets import budget_rules
from fairshare.control.observed import BudgetUsage
from fairshare.errors import InputError, QueueManagerError
from fairshare.manifests import parse_object
from fairshare.models import QuotaKey, ResourceQuota, Workload
from fairshare.policy import QuotaPolicy, parse_policy
from fairshare.policy.owners import project_label, project_of, team_of
from fairshare.policy.tenancy import EDITOR_ANNOTATION
from fairshare.policy.units import duration_seconds
from ledger.budgets import measure
from ledger.codec import CodecError, decode, encode
from ledger.ledger import Ledger, LedgerConfig, open_ledger
from ledger.records import AuditEntry, LabelKeys, PriceTable, QuotaChange, WorkloadObservation

from .audit import AuditRecord
from .cache import State
from .config import OperatorConfig
from .events import LEDGER_ANNOTATION
from .kube import Reader
from .metrics import Metrics
from .ownership import FIELD_MANAGER
from .refs import QUOTA_POLICY, WORKLOAD

log = logging.getLogger("queue_manager.ledger")

PRUNE_EVERY_S = 3600.0  # the retention is applied hourly (and at start)


@dataclass(frozen=True, slots=True)
class WorkloadOwner:
    """Whose a workload is, for its audit rows: the team (ClusterQueue), LocalQueue, project (the policy's
    project label) and user (the ledger's user label, stamped at admission; None until stamped)."""

    team: str | None = None
    local_queue: str | None = None
    project: str | None = None
    user: str | None = None
RESYNC_RETRY_S = 10.0


def editor_of(body: Mapping[str, Any]) -> str | None:
    """Who last edited the policy's spec: the requesting user the API server stamped at admission
    (annotation queuemanager.dev/edited-by, set by the MutatingAdmissionPolicy queue-manager-policy-editor
    of manifests/admission from request.userInfo.username on every create and spec change). Without that
    stamp (the admission policy not installed), the field manager of the newest managedFields entry that
    owns spec fields (kubectl, kubectl-edit, argocd-controller, ...), not this operator: a tool, not a
    person."""
    meta = body.get("metadata") or {}
    stamped = (meta.get("annotations") or {}).get(EDITOR_ANNOTATION)
    if isinstance(stamped, str) and stamped:
        return stamped
    best: tuple[str, str] | None = None
    for entry in meta.get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        fields = entry.get("fieldsV1") or {}
        manager = entry.get("manager")
        if not isinstance(fields, dict) or "f:spec" not in fields or not isinstance(manager, str):
            continue
        if manager == FIELD_MANAGER:
            continue
        when = str(entry.get("time") or "")
        if best is None or when >= best[0]:
            best = (when, manager)
    return best[1] if best is not None else None


def ledger_config(policies: Iterable[QuotaPolicy]) -> LedgerConfig:
    """Prices (flavors[].pricePerUnitHour, in spec.ledger.currency), accounted labels (the project label
    of spec.fairShare.projectLabel, spec.ledger.labels) and retention (spec.ledger.retention) of every
    policy: one ledger per operator, so prices of all flavors, the union of the labels and the longest
    retention. The project column takes the first policy's project label (by name); another policy's is
    kept among the extra labels."""
    ordered = sorted(policies, key=lambda p: p.name)
    prices: dict[str, dict[str, str]] = {}
    currencies: dict[str, str] = {}
    project = project_label(ordered[0]) if ordered else LabelKeys().project
    extra: list[str] = []
    retention = 0.0
    for policy in ordered:
        for f in policy.spec.flavors:
            prices.setdefault(f.name, {}).update(f.price_per_unit_hour)
            currencies[f.name] = policy.spec.ledger.currency
        extra += [k for k in (project_label(policy), *policy.spec.ledger.labels) if k not in extra]
        retention = max(retention, float(duration_seconds(policy.spec.ledger.retention)))
    labels = LabelKeys(project=project, extra=tuple(k for k in extra if k != project))
    config = LedgerConfig(prices=PriceTable.of(prices, currencies), labels=labels)
    return config if not retention else LedgerConfig(config.prices, config.labels, retention)


class LedgerFeed:
    def __init__(self, ledger: Ledger, state: State, metrics: Metrics, clock: Callable[[], float], *,
                 budget_refresh_s: float = 30.0) -> None:
        self.ledger = ledger
        self.state = state
        self.metrics = metrics
        self.clock = clock
        self.budget_refresh_s = budget_refresh_s
        # What this process knows is in the ledger: (policy, team, flavor, resource) -> quota in force.
        self._quotas: dict[tuple[str, str, str, str], tuple[int, int | None, int | None]] = {}
        self._lock = threading.Lock()
        self._budget_policies: dict[str, QuotaPolicy] = {}
        self._usage: dict[str, dict[str, BudgetUsage]] = {}
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._threads: list[threading.Thread] = []
        self._start(self._poll_budgets, "ledger-budgets")

    @classmethod
    def open(cls, config: OperatorConfig, state: State, metrics: Metrics,
             clock: Callable[[], float]) -> LedgerFeed:
        """Open the ledger of `config` (LedgerError, one line, for a bad URL, a schema from a newer version
        or a spool in use; a server that does not answer is no error: records are spooled)."""
        ledger = open_ledger(config.ledger_url, spool_dir=config.ledger_spool, metrics=metrics.ledger,
                             tolerate_unavailable=True, prune_every_s=PRUNE_EVERY_S, clock=clock)
        log.info("ledger: writing to %s", ledger.url.render_as_string(hide_password=True))
        return cls(ledger, state, metrics, clock, budget_refresh_s=config.budget_refresh_seconds)

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _guard(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except (QueueManagerError, OSError) as err:
            self.metrics.reconcile_errors.labels("ledger").inc()
            log.error("ledger: could not record %s: %s", what, err)

    # --- workloads ----------------------------------------------------------------------------------

    def _owner(self, wl: Workload) -> tuple[QuotaPolicy, str] | None:
        """The policy and team the workload is charged to (fairshare.policy.owners.team_of: the one rule)."""
        for rt in sorted(list(self.state.policies.values()), key=lambda r: r.name):
            policy = rt.policy
            if policy is None:
                continue
            team = team_of(policy, wl)
            if team is not None:
                return policy, team
        return None

    def cluster_queue(self, wl: Workload) -> str | None:
        """The ClusterQueue of the workload's LocalQueue (the team of a workload never admitted)."""
        owner = self._owner(wl)
        return owner[1] if owner is not None else None

    def workload_owner(self, namespace: str, name: str) -> WorkloadOwner:
        """Team, LocalQueue, project and user of a workload an audit record is about, from the workloads
        the operator watches (all None for one it no longer sees)."""
        wl = self.state.workloads.get(f"{namespace}/{name}")
        if wl is None:
            return WorkloadOwner()
        owner = self._owner(wl)
        labels = dict(wl.labels)
        user_key = self.ledger.config.labels.user
        if owner is None:
            return WorkloadOwner(local_queue=wl.queue_name or None, user=labels.get(user_key))
        policy, team = owner
        return WorkloadOwner(team, wl.queue_name or None, project_of(policy, wl), labels.get(user_key))

    def workload(self, event_type: str | None, wl: Workload | None) -> None:
        if wl is None:
            return
        deleted = event_type == "DELETED"
        obs = WorkloadObservation(wl, self.clock(), cluster_queue=self.cluster_queue(wl), deleted=deleted)
        # A deletion is the one observation the API cannot give again: fsync'd.
        self._guard(f"workload {wl.key}", lambda: self.ledger.record_workloads([obs], sync=deleted))

    def resync(self, reader: Reader) -> None:
        """In the background: every Workload as listed now, and the end of lives whose Workload is gone."""
        self._start(lambda: self._resync(reader), "ledger-resync")

    def _resync(self, reader: Reader) -> None:
        while not self._stop.is_set():
            try:
                self._resync_once(reader)
                return
            except QueueManagerError as err:  # the database does not answer yet: try again
                log.warning("ledger: resync waits for the database (%s)", err)
            except Exception as err:  # the API (list) failed: try again, never crash the operator
                log.warning("ledger: resync could not list Workloads (%s); retrying", err)
            self._stop.wait(RESYNC_RETRY_S)

    def _resync_once(self, reader: Reader) -> None:
        at = self.clock()
        present: set[str] = set()
        observations = []
        for body in reader.list(WORKLOAD):
            doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **body}
            try:
                wl = parse_object(doc)
            except InputError:
                continue
            if not isinstance(wl, Workload):
                continue
            present.add(wl.uid or f"{wl.namespace}/{wl.name}")
            observations.append(WorkloadObservation(wl, at, cluster_queue=self.cluster_queue(wl)))
        self.ledger.record_workloads(observations, sync=False)
        gone = [uid for uid, _, _ in self.ledger.open_lives(observed_before=at) if uid not in present]
        if gone:
            log.info("ledger: %d workload(s) the ledger held open were deleted while the operator was down",
                     len(gone))
            self.ledger.record_gone(gone, at)
        log.info("ledger: resync recorded %d workload(s)", len(observations))

    # --- quotas, audit, configuration -------------------------------------------------------------

    def quota_changes(self, policy: str, generation: int | None, in_force: Mapping[QuotaKey, ResourceQuota],
                      at: float) -> list[QuotaChange]:
        """The quotas in force that the ledger does not hold yet, from `at` (the decision that put them in
        force: the same time whichever replica records it, so a fact recorded twice is one row)."""
        changes = []
        for key in sorted(in_force):
            q = in_force[key]
            if self._quotas.get((policy, key.team, key.flavor, key.resource)) == (
                    q.nominal, q.borrowing_limit, q.lending_limit):
                continue
            changes.append(QuotaChange(key.team, key.flavor, key.resource, q.nominal, q.borrowing_limit,
                                       q.lending_limit, at, policy, generation))
        return changes

    def quotas(self, policy: str, generation: int | None, in_force: Mapping[QuotaKey, ResourceQuota],
               at: float) -> None:
        """The quotas the operator put in force (once per change per policy and key)."""
        self.record(self.quota_changes(policy, generation, in_force, at))

    def record(self, items: Sequence[AuditEntry | QuotaChange]) -> None:
        """Hand records to the ledger (spooled, fsync'd); a quota change is then known to be in it."""
        audits = [i for i in items if isinstance(i, AuditEntry)]
        changes = [i for i in items if isinstance(i, QuotaChange)]
        if changes:
            self._guard("quota changes", lambda: self.ledger.record_quotas(changes))
            for c in sorted(changes, key=lambda c: c.at):
                if c.policy is not None:
                    self._quotas[(c.policy, c.team, c.flavor, c.resource)] = (
                        c.nominal, c.borrowing_limit, c.lending_limit)
        if audits:
            self._guard(f"audit record {audits[0].action}", lambda: self.ledger.record_audit(audits))

    def audit_entry(self, record: AuditRecord, *, editor: str | None, team: str | None,
                    fact: str | None = None) -> AuditEntry:
        """The ledger's row of an audit record, dated now; `fact` (the Event name of what it reports) makes a
        record reported again the same row (queue_manager/actuator.py: reported after a crash, never lost,
        never twice). An action on a workload carries the workload's team, LocalQueue, project and user
        (`workload_owner`)."""
        target = record.target
        owner = WorkloadOwner()
        if target.kind == WORKLOAD.kind and target.namespace:
            owner = self.workload_owner(target.namespace, target.name)
        if team is None:
            team = owner.team if owner.team is not None else (
                target.name if target.kind == "ClusterQueue" else None)
        return AuditEntry(
            at=self.clock(), action=str(record.action), target_kind=target.kind,
            target_name=target.name, what=record.what, why=record.why, policy=record.policy,
            target_namespace=target.namespace, policy_generation=record.generation, editor=editor,
            team=team, fact=fact, local_queue=owner.local_queue, project=owner.project, user=owner.user)

    def audit(self, record: AuditRecord, *, editor: str | None, team: str | None,
              fact: str | None = None) -> None:
        """One audit row (see `audit_entry`)."""
        self.record([self.audit_entry(record, editor=editor, team=team, fact=fact)])

    # --- a new leader: what an earlier one reported -------------------------------------------------

    @staticmethod
    def annotation(items: Sequence[AuditEntry | QuotaChange]) -> str:
        """The ledger's rows of one reported fact, as its Event carries them (events.LEDGER_ANNOTATION)."""
        return json.dumps([encode(i) for i in items], separators=(",", ":"), ensure_ascii=False)

    def recover(self, events: Iterable[Mapping[str, Any]]) -> list[str]:
        """Re-record the rows every Event of ours carries (an earlier leader's facts, with their original
        times): the spool of a replica that died, an emptyDir, may have held rows the database never got.
        Idempotent (a fact is one row however often it is recorded; a quota repeated unchanged is no new
        row). Returns the names of the Events read, so that they are not posted again."""
        found: list[tuple[float, int, AuditEntry | QuotaChange]] = []
        names = []
        for n, event in enumerate(events):
            meta = event.get("metadata") or {}
            names.append(str(meta.get("name", "")))
            text = (meta.get("annotations") or {}).get(LEDGER_ANNOTATION)
            if not isinstance(text, str):
                continue
            try:
                raw = json.loads(text)
                items = [decode(r) for r in raw] if isinstance(raw, list) else []
            except (ValueError, CodecError) as err:  # another version's, or damaged: skipped, said once
                log.warning("ledger: Event %s/%s: records not readable (%s)", meta.get("namespace"),
                            meta.get("name"), err)
                continue
            found += [(i.at, n, i) for i in items if isinstance(i, AuditEntry | QuotaChange)]
        found.sort(key=lambda x: (x[0], x[1]))  # in the order they happened: a quota's history in order
        self.record([i for _, _, i in found])
        if found:
            log.info("ledger: re-recorded %d record(s) of %d Event(s) an earlier leader reported",
                     len(found), len({n for _, n, _ in found}))
        return [n for n in names if n]

    def configure_from(self, reader: Reader) -> None:
        """At start, before the first observation: the prices and labels of the policies as listed (so
        that a Workload observed before its policy is reconciled is accounted with them)."""
        policies = []
        try:
            for body in reader.list(QUOTA_POLICY):
                try:
                    policies.append(parse_policy({k: v for k, v in body.items() if k != "status"}))
                except InputError:
                    continue  # the reconcile reports it
        except Exception as err:  # the API did not answer: the first reconcile configures the ledger
            log.warning("ledger: could not list QuotaPolicies at start (%s)", err)
            return
        self.configure(policies)

    def configure(self, policies: Iterable[QuotaPolicy]) -> None:
        """A policy changed: the prices, labels and retention in force from now on."""
        self.ledger.configure(ledger_config(policies))

    # --- budgets ---------------------------------------------------------------------------------------

    def budget_usage(self, policy: QuotaPolicy) -> dict[str, BudgetUsage]:
        """The last measurement of the policy's budgets (empty until the first one)."""
        if not policy.spec.budgets:
            with self._lock:
                self._budget_policies.pop(policy.name, None)
            return {}
        with self._lock:
            known = self._budget_policies.get(policy.name)
            self._budget_policies[policy.name] = policy
            usage = dict(self._usage.get(policy.name, {}))
        if known is not policy:
            self._poke.set()  # a new or edited policy is measured at once
        return usage

    def _poll_budgets(self) -> None:
        failing = False
        while not self._stop.is_set():
            with self._lock:
                policies = list(self._budget_policies.values())
            for policy in policies:
                try:
                    usage = measure(self.ledger, budget_rules(policy), self.clock())
                except QueueManagerError as err:
                    if not failing:
                        log.warning("ledger: budgets not measured (%s); the last measurement stands", err)
                    failing = True
                    continue
                failing = False
                with self._lock:
                    self._usage[policy.name] = usage
            self._poke.wait(self.budget_refresh_s)
            self._poke.clear()

    # --- lifetime --------------------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._poke.set()
        for thread in self._threads:
            thread.join(10)
        self.ledger.close()
