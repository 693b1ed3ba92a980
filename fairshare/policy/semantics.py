"""Cross-field rules of a QuotaPolicy spec, the same ones the CRD's CEL rules enforce in the API server.

The first violation (in document order) is raised as an InputError naming the field path and the value, so a
policy file is judged offline exactly as `kubectl apply` would judge it, plus the rules CEL cannot express
cheaply (cohort tree consistency, durations in days or weeks).

This is also every rule the policy controller would otherwise meet at reconcile time (a transition the
quota-shift planner cannot plan: a target below its floor, too many steps): `parse_policy` runs these
checks, so the operator and `qm policy check` give one verdict with one message, and the controller never
has to hold a transition back for a reason the policy's author could have been told about.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fairshare.errors import InputError, Location
from fairshare.planners.quota_shift import MAX_STEPS
from fairshare.quantity import describe_quantity, exact_quantity
from fairshare.resource_units import price_problem

from .ledger_spec import MIN_ROLLING
from .model import (
    MIN_FORECAST_HORIZON,
    TEAM_METRICS,
    QuotaPolicySpec,
    Subject,
    TransitionDefaults,
    TransitionOverride,
)
from .names import DNS_SUBDOMAIN
from .render import resource_groups
from .units import duration_seconds, to_milli


def _fail(field: str, message: str, value: object) -> InputError:
    return InputError(message, location=Location(field=field), value=value, has_value=True)


def check_spec(spec: QuotaPolicySpec) -> None:
    """Raise InputError (field path relative to the object: spec....) at the first broken rule."""
    _check_unique_names(spec)
    _check_namespaces(spec)
    _check_quotas(spec)
    _check_kueue_limits(spec)
    _check_flavors(spec)
    _check_cohorts(spec)
    _check_priorities(spec)
    _check_threshold(spec)
    _check_reclaim(spec)
    _check_transitions(spec)
    _check_floors(spec)
    _check_positive_durations(spec)
    _check_prices(spec)
    _check_ledger(spec)
    _check_tenancy(spec)
    _check_idle(spec)
    _check_forecasts(spec)


def _check_unique_names(spec: QuotaPolicySpec) -> None:
    for list_name, names in (("teams", [t.name for t in spec.teams]),
                             ("flavors", [f.name for f in spec.flavors]),
                             ("priorityClasses", [p.name for p in spec.priority_classes])):
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                raise _fail(f"spec.{list_name}[{i}].name", f"duplicate name in spec.{list_name}", name)
            seen.add(name)
    for t_i, team in enumerate(spec.teams):
        flavors: set[str] = set()
        for q_i, quota in enumerate(team.quotas):
            if quota.flavor in flavors:
                raise _fail(f"spec.teams[{t_i}].quotas[{q_i}].flavor", "flavor listed twice for the team",
                            quota.flavor)
            flavors.add(quota.flavor)
            resources: set[str] = set()
            for r_i, res in enumerate(quota.resources):
                if res.name in resources:
                    raise _fail(f"spec.teams[{t_i}].quotas[{q_i}].resources[{r_i}].name",
                                "resource listed twice for the flavor", res.name)
                resources.add(res.name)


def _check_namespaces(spec: QuotaPolicySpec) -> None:
    owner: dict[str, str] = {}
    for t_i, team in enumerate(spec.teams):
        for n_i, ns in enumerate(team.namespaces):
            if ns in owner:
                what = "namespace listed twice for the team" if owner[ns] == team.name else \
                    f"namespace already belongs to team {owner[ns]}; a namespace belongs to at most one team"
                raise _fail(f"spec.teams[{t_i}].namespaces[{n_i}]", what, ns)
            owner[ns] = team.name


def _check_quotas(spec: QuotaPolicySpec) -> None:
    declared = {f.name for f in spec.flavors}
    for t_i, team in enumerate(spec.teams):
        for q_i, quota in enumerate(team.quotas):
            where = f"spec.teams[{t_i}].quotas[{q_i}]"
            if quota.flavor not in declared:
                raise _fail(f"{where}.flavor", "flavor is not declared in spec.flavors", quota.flavor)
            for r_i, res in enumerate(quota.resources):
                at = f"{where}.resources[{r_i}]"
                # Kueue's ClusterQueue rules: borrowing/lending limits need a cohort; lendingLimit <= nominal.
                if team.cohort is None and res.borrowing_limit is not None:
                    raise _fail(f"{at}.borrowingLimit", "borrowingLimit needs a cohort (team has none)",
                                res.borrowing_limit)
                if team.cohort is None and res.lending_limit is not None:
                    raise _fail(f"{at}.lendingLimit", "lendingLimit needs a cohort (team has none)",
                                res.lending_limit)
                if res.lending_limit is not None and \
                        to_milli(res.lending_limit) > to_milli(res.nominal):
                    raise _fail(f"{at}.lendingLimit", f"lendingLimit must not exceed nominal ({res.nominal})",
                                res.lending_limit)


# Kueue's limits on one ClusterQueue (v0.19.2): its CRD allows 16 resourceGroups, 64 coveredResources per
# group and 64 resources per flavor (kueue.x-k8s.io_clusterqueues.yaml); its webhook 256 covered resources
# in all and 512 flavor-resource pairs in a group (clusterqueue_webhook.go validateTotalCoveredResources,
# validateFlavorResourceCombinations). The renderer puts flavors that share a resource in one group, and
# every flavor of a group lists every resource the group covers (render.resource_groups).
MAX_RESOURCE_GROUPS = 16
MAX_COVERED_PER_GROUP = 64
MAX_COVERED = 256
MAX_FLAVOR_RESOURCES = 512
# Kueue's fairSharing weight: 0, or more than 1n (common.go validateFairSharing).
_NANO = Fraction(1, 10**9)


def _check_kueue_limits(spec: QuotaPolicySpec) -> None:
    for t_i, team in enumerate(spec.teams):
        where = f"spec.teams[{t_i}]"
        weight = exact_quantity(team.fair_share_weight)
        if 0 < weight <= _NANO:
            raise _fail(f"{where}.fairShareWeight", "fairShareWeight must be 0 or more than 1n (Kueue "
                        "refuses a weight that collapses to 0)", team.fair_share_weight)
        groups = resource_groups(team)
        if len(groups) > MAX_RESOURCE_GROUPS:
            raise _fail(f"{where}.quotas", f"the team's flavors make {len(groups)} Kueue resource groups "
                        f"(flavors that share no resource); Kueue allows {MAX_RESOURCE_GROUPS}", len(groups))
        covered = sum(len(g[0]) for g in groups)
        if covered > MAX_COVERED:
            raise _fail(f"{where}.quotas", f"the team's quotas name {covered} resources; Kueue allows "
                        f"{MAX_COVERED} in a ClusterQueue", covered)
        for resources, flavors in groups:
            if len(resources) > MAX_COVERED_PER_GROUP:
                raise _fail(f"{where}.quotas", f"flavors {', '.join(flavors)} share resources and so cover "
                            f"{len(resources)} resources in one Kueue resource group; Kueue allows "
                            f"{MAX_COVERED_PER_GROUP}", len(resources))
            if len(resources) * len(flavors) > MAX_FLAVOR_RESOURCES:
                pairs = len(resources) * len(flavors)
                raise _fail(f"{where}.quotas", f"flavors {', '.join(flavors)} share resources: "
                            f"{len(flavors)} flavors x {len(resources)} resources in one Kueue resource "
                            f"group; Kueue allows {MAX_FLAVOR_RESOURCES} pairs", pairs)


def _check_flavors(spec: QuotaPolicySpec) -> None:
    # Kueue's ResourceFlavor webhook and CRD rules (resourceflavor_webhook.go, kueue.x-k8s.io_resourceflavors
    # .yaml) and those of the Pods the tolerations are added to (core/v1 ValidateTolerations).
    for f_i, flavor in enumerate(spec.flavors):
        seen: set[tuple[str, str]] = set()
        for x_i, taint in enumerate(flavor.node_taints):
            pair = (taint.key, taint.effect)
            if pair in seen:
                raise _fail(f"spec.flavors[{f_i}].nodeTaints[{x_i}]",
                            "taints must be unique by key and effect", f"{taint.key}:{taint.effect}")
            seen.add(pair)
        for x_i, tol in enumerate(flavor.tolerations):
            at = f"spec.flavors[{f_i}].tolerations[{x_i}]"
            if tol.key is None and tol.operator != "Exists":
                raise _fail(f"{at}.operator", "a toleration without a key needs operator Exists (it then "
                            "matches every taint)", tol.operator)
            if tol.toleration_seconds is not None and tol.effect != "NoExecute":
                raise _fail(f"{at}.tolerationSeconds", "tolerationSeconds needs effect NoExecute",
                            tol.toleration_seconds)
            if tol.operator == "Exists" and tol.value is not None:
                raise _fail(f"{at}.value", "a toleration with operator Exists has no value", tol.value)


def _check_cohorts(spec: QuotaPolicySpec) -> None:
    # Kueue Cohorts are cluster-wide names: a path segment names one Cohort, so it must have one parent.
    parent_of: dict[str, str | None] = {}
    teams = {t.name for t in spec.teams}
    for t_i, team in enumerate(spec.teams):
        if team.cohort is None:
            continue
        field = f"spec.teams[{t_i}].cohort"
        parts = team.cohort.split("/")
        if len(set(parts)) != len(parts):
            raise _fail(field, "a cohort path must not repeat a name (that would be a cycle)", team.cohort)
        for i, part in enumerate(parts):
            if part in teams:
                raise _fail(field, f"cohort {part} has the name of a team; cohort and team names must differ",
                            team.cohort)
            parent = parts[i - 1] if i else None
            if part in parent_of and parent_of[part] != parent:
                other = parent_of[part] or "no parent (a root)"
                raise _fail(field, f"cohort {part} has parent {parent or 'none'} here but {other} in an "
                            "earlier team", team.cohort)
            parent_of[part] = parent


def _check_priorities(spec: QuotaPolicySpec) -> None:
    classes = {p.name: p for p in spec.priority_classes}
    for i, name in enumerate(spec.preemption.protected_classes):
        where = f"spec.preemption.protectedClasses[{i}]"
        if name not in classes:
            raise _fail(where, "protected class is not declared in spec.priorityClasses", name)
        if classes[name].experiment:
            raise _fail(where, "protected class is marked experiment", name)
    if len(set(spec.preemption.protected_classes)) != len(spec.preemption.protected_classes):
        raise _fail("spec.preemption.protectedClasses", "duplicate class", spec.preemption.protected_classes)


def _check_threshold(spec: QuotaPolicySpec) -> None:
    # A workload below the threshold is an experiment (settings.PreemptionSettings.is_experiment): a protected
    # class below it would be both, preempted for itself. Checked in CEL too (model.py).
    threshold = spec.preemption.experiment_priority_threshold
    if threshold is None:
        return
    values = {p.name: p.value for p in spec.priority_classes}
    for name in spec.preemption.protected_classes:
        if name in values and values[name] < threshold:
            raise _fail("spec.preemption.experimentPriorityThreshold",
                        f"must not exceed the value of protected class {name} ({values[name]}): its "
                        "workloads would be experiments too", threshold)


def _check_reclaim(spec: QuotaPolicySpec) -> None:
    # Experiment preemption frees a team's quota for protected work of another team, which then borrows it.
    # Kueue's reclaimWithinCohort: Any lets the victims' team take it back at once, whatever the priorities
    # (preemption.go: reclaim within cohort), evicting the beneficiary: the planner would have to exclude
    # every such victim, or the eviction would help no one. LowerPriority keeps reclaim for the team's own
    # higher-priority work. Checked in CEL too (model.py).
    if not spec.preemption.protected_classes:
        return
    for i, team in enumerate(spec.teams):
        if team.preemption.reclaim_within_cohort == "Any" and team.cohort is not None:
            raise _fail(f"spec.teams[{i}].preemption.reclaimWithinCohort",
                        f"Any lets {team.name}'s experiments reclaim at once the quota experiment preemption "
                        "frees for protected work (Kueue evicts the beneficiary): use LowerPriority or Never",
                        "Any")


def floor_source(spec: QuotaPolicySpec, team_index: int) -> tuple[str, dict[str, str]]:
    """Where a team's effective transition floor is written, and the floor (resource -> quantity): the
    team's override replaces the defaults' floor as a whole (`merge_transition`)."""
    team = spec.teams[team_index]
    if team.transition is not None and team.transition.floor is not None:
        return f"spec.teams[{team_index}].transition.floor", dict(team.transition.floor)
    return "spec.transitions.defaults.floor", dict(spec.transitions.defaults.floor)


def _check_floors(spec: QuotaPolicySpec) -> None:
    # The quota-shift planner never plans a target below the floor (fairshare.planners.quota_shift.make_plan):
    # a nominal below it could never be reached by a transition. Checked in CEL too (model.py).
    for t_i, team in enumerate(spec.teams):
        where, floor = floor_source(spec, t_i)
        for q_i, quota in enumerate(team.quotas):
            for r_i, res in enumerate(quota.resources):
                if res.name in floor and to_milli(res.nominal) < to_milli(floor[res.name]):
                    shown = describe_quantity(to_milli(floor[res.name]), res.name)
                    raise _fail(f"spec.teams[{t_i}].quotas[{q_i}].resources[{r_i}].nominal",
                                f"nominal is below the transition floor of {res.name} ({shown}, {where}): a "
                                "quota never goes below its floor", res.nominal)


def _check_transitions(spec: QuotaPolicySpec) -> None:
    defaults = spec.transitions.defaults
    _check_interval("spec.transitions.defaults", defaults)
    for t_i, team in enumerate(spec.teams):
        if team.transition is not None:
            _check_interval(f"spec.teams[{t_i}].transition", merge_transition(defaults, team.transition))


def _check_interval(where: str, rule: TransitionDefaults) -> None:
    duration, step_interval = rule.duration, rule.step_interval
    if duration_seconds(step_interval) > duration_seconds(duration):
        raise _fail(f"{where}.stepInterval", f"stepInterval must not exceed duration ({duration})",
                    step_interval)
    if duration_seconds(step_interval) == Fraction(0):
        raise _fail(f"{where}.stepInterval", "stepInterval must be positive", step_interval)
    # The quota-shift planner refuses more steps than this (fairshare.planners.quota_shift.MAX_STEPS).
    if rule.curve != "immediate" and duration_seconds(duration) / duration_seconds(step_interval) > MAX_STEPS:
        raise _fail(f"{where}.stepInterval", f"stepInterval makes more than {MAX_STEPS} steps over duration "
                    f"({duration})", step_interval)


def _check_positive_durations(spec: QuotaPolicySpec) -> None:
    # The usage history keeps time in whole milliseconds (fairshare.history.decay.HalfLife needs >= 1 tick)
    # and a victim budget counts over a window (fairshare.planners.budget.VictimBudget needs > 0): a zero
    # here would pass the schema and then stop the operator.
    if duration_seconds(spec.fair_share.half_life) < Fraction(1, 1000):
        raise _fail("spec.fairShare.halfLife", "halfLife must be at least 1ms", spec.fair_share.half_life)
    if duration_seconds(spec.preemption.budget.window) == Fraction(0):
        raise _fail("spec.preemption.budget.window", "window must be positive", spec.preemption.budget.window)


def merge_transition(defaults: TransitionDefaults, override: TransitionOverride | None) -> TransitionDefaults:
    """The team's effective transition settings: each override field that is set replaces the default."""
    if override is None:
        return defaults
    changes = {k: v for k, v in override.model_dump(exclude_none=True).items()}
    return defaults.model_copy(update=changes)


def _check_prices(spec: QuotaPolicySpec) -> None:
    """A price is per unit-hour of its resource's unit (fairshare/resource_units.py): GPU-hour, core-hour,
    GiB-hour. A byte resource's price small enough to be meant per byte-hour is refused."""
    for f_i, flavor in enumerate(spec.flavors):
        for resource, text in flavor.price_per_unit_hour.items():
            exact = exact_quantity(text)
            price = Decimal(exact.numerator) / Decimal(exact.denominator)
            problem = price_problem(resource, price)
            if problem is not None:
                raise _fail(f"spec.flavors[{f_i}].pricePerUnitHour[{resource!r}]", problem, text)


def _check_ledger(spec: QuotaPolicySpec) -> None:
    """spec.ledger and spec.budgets (fairshare/policy/ledger_spec.py): what the schema cannot say."""
    if duration_seconds(spec.ledger.retention) < 1:
        raise _fail("spec.ledger.retention", "retention must be at least 1s", spec.ledger.retention)
    _check_set("spec.ledger.labels", spec.ledger.labels)
    teams = {t.name: t for t in spec.teams}
    priced = any(f.price_per_unit_hour for f in spec.flavors)
    seen: set[str] = set()
    for b_i, budget in enumerate(spec.budgets):
        at = f"spec.budgets[{b_i}]"
        if budget.name in seen:
            raise _fail(f"{at}.name", "duplicate name in spec.budgets", budget.name)
        seen.add(budget.name)
        team = budget.selector.team
        if team is not None and team not in teams:
            raise _fail(f"{at}.selector.team", "not a team of spec.teams", team)
        if team is None and budget.selector.project is None and budget.selector.cost_center is None:
            raise _fail(f"{at}.selector", "a selector needs team, project or costCenter", {})
        period = budget.period
        if (period.calendar is None) == (period.rolling is None):
            raise _fail(f"{at}.period", "give exactly one of calendar and rolling",
                        period.model_dump(by_alias=True, exclude_none=True))
        # A rolling budget is re-decided every 1/60 of its window while a threshold is reached, at most once a
        # second (fairshare.control.budgets): a window of seconds would only make wake-ups.
        if period.rolling is not None and duration_seconds(period.rolling) < duration_seconds(MIN_ROLLING):
            raise _fail(f"{at}.period.rolling", f"a rolling window must be at least {MIN_ROLLING}",
                        period.rolling)
        try:
            ZoneInfo(period.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise _fail(f"{at}.period.timeZone", "not an IANA time zone (e.g. UTC, Europe/Paris)",
                        period.time_zone) from None
        limit = budget.limit
        if (limit.gpu_hours is None) == (limit.cost is None):
            raise _fail(f"{at}.limit", "give exactly one of gpuHours and cost",
                        limit.model_dump(by_alias=True, exclude_none=True))
        amount = limit.gpu_hours if limit.gpu_hours is not None else limit.cost
        if amount is not None and to_milli(amount) == 0:
            raise _fail(f"{at}.limit", "the limit must be positive", amount)
        if limit.cost is not None and not priced:
            raise _fail(f"{at}.limit.cost", "a cost limit needs prices (spec.flavors[].pricePerUnitHour)",
                        limit.cost)
        pairs: set[tuple[int, str]] = set()
        for t_i, threshold in enumerate(budget.thresholds):
            where = f"{at}.thresholds[{t_i}]"
            pair = (threshold.percent, threshold.action)
            if pair in pairs:
                raise _fail(where, "threshold listed twice", f"{threshold.percent}% {threshold.action}")
            pairs.add(pair)
            if threshold.action != "alert" and team is None:
                raise _fail(f"{where}.action", "shrink, deprioritize and hold act on a team: give "
                            "selector.team", threshold.action)
            if threshold.action == "deprioritize" and team is not None and teams[team].cohort is None:
                raise _fail(f"{where}.action", f"deprioritize sets the team's borrowingLimit to 0, and team "
                            f"{team} has no cohort to borrow from", threshold.action)


def subject_identity(subject: Subject) -> tuple[str, str]:
    """How the API server names a subject in a request: ("User", name) or ("Group", name); a ServiceAccount
    is the user system:serviceaccount:NAMESPACE:NAME."""
    if subject.kind == "ServiceAccount":
        return "User", f"system:serviceaccount:{subject.namespace}:{subject.name}"
    return subject.kind, subject.name


def _check_tenancy(spec: QuotaPolicySpec) -> None:
    """Teams' members, priority classes, projects and cost-centers (docs/tenancy.md). The class rules are
    checked by the API server too (model.py, admission.py); one subject in two teams is Python only
    (quadratic over every list in CEL)."""
    declared = {p.name for p in spec.priority_classes}
    member_of: dict[tuple[str, str], str] = {}
    for t_i, team in enumerate(spec.teams):
        at = f"spec.teams[{t_i}]"
        for field, classes in (("priorityClasses", team.priority_classes or []),
                               ("forbiddenPriorityClasses", team.forbidden_priority_classes)):
            seen: set[str] = set()
            for c_i, name in enumerate(classes):
                if name not in declared:
                    raise _fail(f"{at}.{field}[{c_i}]",
                                "priority class is not declared in spec.priorityClasses", name)
                if name in seen:
                    raise _fail(f"{at}.{field}[{c_i}]", "priority class listed twice", name)
                seen.add(name)
        for c_i, name in enumerate(team.forbidden_priority_classes):
            if team.priority_classes is not None and name in team.priority_classes:
                raise _fail(f"{at}.forbiddenPriorityClasses[{c_i}]",
                            f"priority class is both allowed and forbidden to team {team.name}", name)
        for field, values in (("projects", team.projects or []), ("costCenters", team.cost_centers or [])):
            if len(set(values)) != len(values):
                raise _fail(f"{at}.{field}", "a value is listed twice", values)
        here: set[tuple[str, str]] = set()
        for field, subjects in (("members", team.members), ("admins", team.admins)):
            for s_i, subject in enumerate(subjects):
                where = f"{at}.{field}[{s_i}]"
                if subject.kind == "ServiceAccount":
                    if subject.namespace is None:
                        raise _fail(f"{where}.namespace", "a ServiceAccount needs its namespace",
                                    subject.name)
                    if not re.match(DNS_SUBDOMAIN, subject.name) or len(subject.name) > 253:
                        raise _fail(f"{where}.name", "not a ServiceAccount name (a DNS subdomain)",
                                    subject.name)
                elif subject.namespace is not None:
                    raise _fail(f"{where}.namespace", f"only a ServiceAccount has a namespace, not a "
                                f"{subject.kind}", subject.namespace)
                ident = subject_identity(subject)
                owner = member_of.get(ident)
                if owner is not None and owner != team.name:
                    raise _fail(where, f"{ident[0]} {ident[1]} is already a member of team {owner}; a user, "
                                "group or ServiceAccount belongs to one team", ident[1])
                here.add(ident)
        for ident in here:
            member_of[ident] = team.name


def _check_idle(spec: QuotaPolicySpec) -> None:
    """spec.idle (fairshare/policy/idle_spec.py): durations the rule divides by or compares (a zero scrape
    interval would make every sample stale; a window shorter than the staleness bound could never be seen
    whole, so nothing would ever be idle)."""
    idle = spec.idle
    for field, value in (("scrapeInterval", idle.scrape_interval), ("window", idle.window),
                         ("budget.window", idle.budget.window),
                         ("prometheus.timeout", idle.prometheus.timeout)):
        if duration_seconds(value) == Fraction(0):
            raise _fail(f"spec.idle.{field}", f"{field.split('.')[-1]} must be positive", value)
    stale = duration_seconds(idle.scrape_interval) * idle.stale_after_scrapes
    if duration_seconds(idle.window) < stale:
        raise _fail("spec.idle.window", f"window must be at least staleAfterScrapes x scrapeInterval "
                    f"({float(stale):g}s): a shorter window is never seen whole", idle.window)


def _check_set(where: str, values: list[str]) -> None:
    """A list the CRD declares `x-kubernetes-list-type: set`: the API server refuses a duplicate."""
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise _fail(f"{where}[{i}]", "listed twice", value)
        seen.add(value)


def _check_forecasts(spec: QuotaPolicySpec) -> None:
    forecasts = spec.forecasts
    if forecasts.horizon is not None and \
            duration_seconds(forecasts.horizon) < duration_seconds(MIN_FORECAST_HORIZON):
        raise _fail("spec.forecasts.horizon", f"horizon must be at least {MIN_FORECAST_HORIZON}",
                    forecasts.horizon)
    _check_set("spec.forecasts.metrics", forecasts.metrics)
    teams = [t.name for t in spec.teams]
    classes = [c.name for c in spec.priority_classes]
    for i, metric in enumerate(forecasts.metrics):
        name, bracket, rest = metric.partition("[")
        if not bracket:
            continue
        arg = rest.removesuffix("]")
        if name in TEAM_METRICS and arg not in teams:
            raise _fail(f"spec.forecasts.metrics[{i}]",
                        f"{name}[...] names a team; known: {', '.join(teams)}", metric)
        if name not in TEAM_METRICS and arg not in classes:
            known = ", ".join(classes) or "none (spec.priorityClasses is empty)"
            raise _fail(f"spec.forecasts.metrics[{i}]", f"{name}[...] names a priority class; known: {known}",
                        metric)
