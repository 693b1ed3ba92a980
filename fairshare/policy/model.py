"""The QuotaPolicy API (`queuemanager.dev/v1alpha1`), as pydantic v2 models: the boundary type.

These models are the single source of truth for the CRD: `fairshare.policy.crd` turns them (field
descriptions, enums, bounds, list types and the CEL rules attached here) into
manifests/crd/quotapolicies.yaml. Cross-field rules that the API server checks with CEL are checked again in
Python by `fairshare.policy.semantics`, so a policy file gets the same verdict offline.
Field names are snake_case in Python and camelCase in YAML (aliases).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from fairshare.durations import cel_is_go as _go

from .idle_spec import IdleReclamation
from .ledger_spec import MAX_BUDGETS, Budget, LedgerSettings
from .names import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    RESOURCE_NAME,
    LabelKey,
    LabelValue,
    OptionalLabelValue,
)
from .status import QuotaPolicyStatus
from .units import Duration, Integer, Quantity

API_GROUP = "queuemanager.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "QuotaPolicy"
PLURAL = "quotapolicies"

# Bounds keep every CEL rule below within the API server's cost budget (it rejects a CRD whose rules could
# cost too much on the largest allowed object) and are far above what one cluster needs. A team is one Kueue
# ClusterQueue: 1,000 is the size of Kueue's own large-scale tests. The rules whose estimated cost grows with
# the product of these bounds (a namespace in one team, declared flavors and classes, floors, lending
# limits) are checked by the ValidatingAdmissionPolicy shipped with the CRD (fairshare/policy/admission.py),
# whose CEL is charged for the object actually sent, not for the largest one allowed.
MAX_TEAMS = 1000
MAX_NAMESPACES_PER_TEAM = 16
MAX_FLAVORS = 32
MAX_RESOURCES = 16
MAX_PRIORITY_CLASSES = 32

# A cohort path: DNS labels separated by "/", root first ("org/gpu").
COHORT_PATH = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(/[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

TeamName = Annotated[str, Field(pattern=DNS_LABEL, min_length=1, max_length=63)]
NamespaceName = Annotated[str, Field(pattern=DNS_LABEL, min_length=1, max_length=63)]
FlavorName = Annotated[str, Field(pattern=DNS_SUBDOMAIN, min_length=1, max_length=63)]
ResourceName = Annotated[str, Field(pattern=RESOURCE_NAME, min_length=1, max_length=63)]
ClassName = Annotated[str, Field(pattern=DNS_SUBDOMAIN, min_length=1, max_length=63)]


class _Spec(BaseModel):
    """Spec objects: camelCase in YAML, unknown fields are an error (a typo must not be silently ignored), and
    types are strict as the API server's schema is: `dryRun: "yes"` or `maxVictims: "5"` is refused, not
    coerced (issue 33: `qm policy check` accepted what `kubectl apply` refuses)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              strict=True)


# --------------------------------------------------------------------------------------------- teams


class ResourceQuota(_Spec):
    """Quota of one resource on one flavor for a team (one entry of a Kueue ClusterQueue flavor).

    Kueue's ClusterQueue webhook rule lendingLimit <= nominalQuota is checked at admission
    (fairshare/policy/admission.py): as a CRD rule its cost counts once per allowed team x flavor x resource.
    """

    name: ResourceName = Field(description="Resource name as Pods request it, e.g. cpu, memory, "
                               "nvidia.com/gpu.")
    nominal: Quantity = Field(description="Nominal quota (Kueue nominalQuota): what the team is guaranteed "
                              "when its cohort is busy. A change starts a gradual transition.")
    borrowing_limit: Quantity | None = Field(
        default=None, description="Most the team may borrow from its cohort above nominal (Kueue "
        "borrowingLimit). Unset = unlimited. Only allowed when the team has a cohort.")
    lending_limit: Quantity | None = Field(
        default=None, description="Most of the nominal quota the cohort may borrow from the team (Kueue "
        "lendingLimit); nominal - lendingLimit stays private. Unset = all of it. At most nominal; only "
        "allowed when the team has a cohort.")


class FlavorQuota(_Spec):
    """Quotas of one team on one ResourceFlavor. Order of flavors is Kueue's order of preference."""

    flavor: FlavorName = Field(description="Name of a flavor declared in spec.flavors.")
    resources: list[ResourceQuota] = Field(
        min_length=1, max_length=MAX_RESOURCES,
        description="One entry per resource. Within a team, flavors that share a resource are rendered into "
        "one Kueue resource group; a resource a flavor does not list gets quota 0 there.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})


class TeamPreemption(_Spec):
    """Kueue-native preemption settings of the team's ClusterQueue (spec.preemption)."""

    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        default="Never", description="Whether a pending workload may preempt admitted workloads of the same "
        "team (Kueue withinClusterQueue).")
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        default="Never", description="Whether a pending workload may preempt workloads of other teams that "
        "borrow this team's nominal quota (Kueue reclaimWithinCohort).")


class TransitionOverride(_Spec):
    """Per-team override of spec.transitions.defaults; an unset field keeps the default."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.stepInterval) || !" + _go("self.stepInterval") + " || "
                "(duration(self.stepInterval) > duration('0s') && (!has(self.duration) || !"
                + _go("self.duration") + " || duration(self.stepInterval) <= duration(self.duration)))",
        "message": "stepInterval must be positive and must not exceed duration",
        "fieldPath": ".stepInterval",
    }]})

    duration: Duration | None = Field(default=None, description="Total time of a quota decrease (336h).")
    step_interval: Duration | None = Field(default=None, description="Time between two steps (<= duration).")
    curve: Literal["linear", "geometric", "immediate"] | None = Field(
        default=None, description="Shape of the schedule: linear (equal steps), geometric (each step closes "
        "the same fraction of the remaining gap), immediate (one step at once).")
    floor: dict[ResourceName, Quantity] | None = Field(
        default=None, max_length=MAX_RESOURCES, description="Per resource, the lowest quota the team may "
        "have: replaces the defaults' floor as a whole; a nominal below it is rejected.")
    drain: bool | None = Field(default=None, description="If true, a step never cuts quota below what "
                               "running workloads use: it waits for them to finish (until the deadline).")
    deadline: Duration | None = Field(
        default=None, description="Time after the start of a transition after which bounded preemption of "
        "the team's workloads is allowed to reach the target. Unset = never preempt.")
    max_victims_per_hour: Integer | None = Field(
        default=None, ge=0, le=10000, description="Most workloads a transition may preempt per hour after "
        "the deadline.")
    ramp_up: bool | None = Field(default=None, description="If true, quota increases follow the schedule "
                                 "too; otherwise growth applies at once.")


# --------------------------------------------------------------------------------------------- tenancy

MAX_SUBJECTS = 32
MAX_TEAM_LABEL_VALUES = 32
# A user or group name as the API server's authenticators give it (an SSO username or email, an OIDC groups
# claim, "system:serviceaccount:NS:NAME"): anything printable but a quote or a backslash, so that it can be
# written into the rendered admission rules as a CEL string (fairshare/policy/tenancy.py).
SUBJECT_NAME = r'^[^"\\\x00-\x1f\x7f]+$'
SubjectName = Annotated[str, Field(pattern=SUBJECT_NAME, min_length=1, max_length=253)]
# The same, or a prefix ending in "*" (trusted controllers: system:serviceaccount:kube-system:*).
SUBJECT_OR_PREFIX = r'^[^"\\\x00-\x1f\x7f*]+\*?$'


class Subject(_Spec):
    """Who belongs to a team, as an RBAC RoleBinding names it: a user or group of the API server's
    authenticator (with SSO, the OIDC username and groups claims, docs/tenancy.md), or a ServiceAccount."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "self.kind == 'ServiceAccount' ? has(self.namespace) : !has(self.namespace)",
        "message": "namespace is required for a ServiceAccount and allowed only for one",
        "fieldPath": ".namespace",
    }]})

    kind: Literal["User", "Group", "ServiceAccount"] = Field(description="User, Group or ServiceAccount.")
    name: SubjectName = Field(description="The user or group name as the API server authenticates it (e.g. "
                              "alice@example.com, oidc:ml-research), or the ServiceAccount's name.")
    namespace: NamespaceName | None = Field(default=None, description="The ServiceAccount's namespace "
                                            "(ServiceAccount only).")


class Team(_Spec):
    """A team: its namespaces, its place in the cohort tree and its quotas. Rendered into one ClusterQueue
    (named after the team) and one LocalQueue per namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        # Kueue's ClusterQueue CEL: borrowingLimit/lendingLimit must be nil when cohortName is empty.
        "rule": "has(self.cohort) || self.quotas.all(q, q.resources.all(r, "
                "!has(r.borrowingLimit) && !has(r.lendingLimit)))",
        "message": "borrowingLimit and lendingLimit need a cohort",
        "fieldPath": ".quotas",
    }, {
        # fairshare.policy.semantics._check_tenancy: qm policy check says the same.
        "rule": "!has(self.priorityClasses) || !has(self.forbiddenPriorityClasses) || "
                "self.priorityClasses.all(c, !(c in self.forbiddenPriorityClasses))",
        "message": "a priority class must not be both allowed and forbidden to the team",
        "fieldPath": ".forbiddenPriorityClasses",
    }, {
        # Kueue's webhook (pkg/webhooks/common.go validateFairSharing): "When not 0, weight must be > 10e-9".
        "rule": "!has(self.fairShareWeight) || "
                "quantity(string(self.fairShareWeight)).compareTo(quantity('0')) == 0 || "
                "quantity(string(self.fairShareWeight)).compareTo(quantity('1n')) > 0",
        "message": "fairShareWeight must be 0 or more than 1n (Kueue refuses a weight that collapses to 0)",
        "fieldPath": ".fairShareWeight",
    }]})

    name: TeamName = Field(description="Team name; also the name of its ClusterQueue.")
    namespaces: list[NamespaceName] = Field(
        min_length=1, max_length=MAX_NAMESPACES_PER_TEAM,
        description="Namespaces whose workloads belong to the team; each gets a LocalQueue. A namespace "
        "belongs to at most one team.", json_schema_extra={"x-kubernetes-list-type": "set"})
    local_queue_name: TeamName | None = Field(
        default=None, description="Name of the LocalQueue in each namespace (the value of the "
        "kueue.x-k8s.io/queue-name label on jobs). Default: the team name.")
    cohort: str | None = Field(
        default=None, pattern=COHORT_PATH, max_length=253,
        description="Cohort path, root first, e.g. org/gpu: Cohort gpu with parent org. Teams in one "
        "cohort lend and borrow unused quota. Unset = no cohort (no borrowing).")
    quotas: list[FlavorQuota] = Field(
        min_length=1, max_length=MAX_FLAVORS,
        description="Quotas per flavor and resource, in order of flavor preference.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["flavor"]})
    fair_share_weight: Quantity = Field(
        default="1", description="Share of the team among its siblings, for history-based fair share and "
        "Kueue fairSharing.weight.")
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        default="BestEffortFIFO", description="Kueue queueingStrategy of the team's ClusterQueue.")
    preemption: TeamPreemption = Field(default_factory=TeamPreemption,
                                       description="Kueue-native preemption of the team's ClusterQueue.")
    transition: TransitionOverride | None = Field(
        default=None, description="Overrides of spec.transitions.defaults for this team.")
    # Tenancy (docs/tenancy.md): enforced when spec.tenancy is set.
    members: list[Subject] = Field(
        default_factory=list, max_length=MAX_SUBJECTS,
        description="Who may submit work in the team's namespaces: bound there to the ClusterRole "
        "queue-manager-team-member (batch Jobs and the other kinds Kueue integrates; read Workloads, "
        "LocalQueues, Pods and Events). A subject belongs to at most one team.")
    admins: list[Subject] = Field(
        default_factory=list, max_length=MAX_SUBJECTS,
        description="Team admins: members who may also attribute work to another listed member of the "
        "team (its queuemanager.dev/user label), never to anyone outside it.")
    priority_classes: list[ClassName] | None = Field(
        default=None, max_length=MAX_PRIORITY_CLASSES,
        description="The priority classes the team's workloads may use. Unset = every declared class "
        "that is not in spec.preemption.protectedClasses (a protected class only for the teams that list "
        "it).", json_schema_extra={"x-kubernetes-list-type": "set"})
    forbidden_priority_classes: list[ClassName] = Field(
        default_factory=list, max_length=MAX_PRIORITY_CLASSES,
        description="Classes taken out of the allowed ones (e.g. every default class but one).",
        json_schema_extra={"x-kubernetes-list-type": "set"})
    projects: list[LabelValue] | None = Field(
        default=None, max_length=MAX_TEAM_LABEL_VALUES,
        description="Values of the project label (spec.fairShare.projectLabel, else project) the team may "
        "charge. Unset = any value another team does not list.",
        json_schema_extra={"x-kubernetes-list-type": "set"})
    cost_centers: list[LabelValue] | None = Field(
        default=None, max_length=MAX_TEAM_LABEL_VALUES,
        description="Values of the cost-center label the team may charge. Unset = any value another team "
        "does not list.", json_schema_extra={"x-kubernetes-list-type": "set"})


# --------------------------------------------------------------------------------------------- flavors


# Kueue's ResourceFlavor CRD caps nodeLabels, nodeTaints and tolerations at 8 each (kueue.x-k8s.io_
# resourceflavors.yaml, v0.19.2: maxProperties / maxItems 8).
MAX_FLAVOR_LABELS = 8
MAX_FLAVOR_TAINTS = 8
MAX_FLAVOR_TOLERATIONS = 8


class Taint(_Spec):
    """A node taint of a flavor (Kueue ResourceFlavor nodeTaints; its webhook checks the key as a label key
    and the value as a label value, resourceflavor_webhook.go validateNodeTaints)."""

    key: LabelKey = Field(description="Taint key (a label key, e.g. example.com/gpu).")
    value: OptionalLabelValue | None = Field(default=None, description="Taint value (a label value).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="Taint effect.")


class Toleration(_Spec):
    """A toleration added to workloads admitted on a flavor (Kueue ResourceFlavor tolerations: the rules of
    its CRD and webhook, and of the Pods it is added to, core/v1 ValidateTolerations)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
         "message": "a toleration without a key needs operator Exists (it then matches every taint)",
         "fieldPath": ".operator"},
        {"rule": "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
         "message": "tolerationSeconds needs effect NoExecute", "fieldPath": ".tolerationSeconds"},
        {"rule": "!has(self.operator) || self.operator != 'Exists' || !has(self.value)",
         "message": "a toleration with operator Exists has no value", "fieldPath": ".value"},
    ]})

    key: LabelKey | None = Field(default=None, description="Taint key the toleration matches (a label key); "
                                 "unset: every key, with operator Exists.")
    operator: Literal["Equal", "Exists"] | None = Field(default=None, description="Equal (default) or "
                                                        "Exists.")
    value: OptionalLabelValue | None = Field(default=None, description="Taint value to match (a label "
                                             "value); none with Exists.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to match; unset = all.")
    toleration_seconds: Integer | None = Field(default=None, ge=0, le=2**63 - 1,
                                               description="How long a NoExecute taint is tolerated.")


class Flavor(_Spec):
    """A kind of node (Kueue ResourceFlavor) and its price."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        # Kueue's webhook: "taints must be unique by key and effect pair" (validateNodeTaints).
        "rule": "!has(self.nodeTaints) || self.nodeTaints.all(t, self.nodeTaints.exists_one(u, "
                "u.key == t.key && u.effect == t.effect))",
        "message": "taints must be unique by key and effect", "fieldPath": ".nodeTaints",
    }]})

    name: FlavorName = Field(description="Flavor name; also the ResourceFlavor name.")
    node_labels: dict[LabelKey, OptionalLabelValue] = Field(
        default_factory=dict, max_length=MAX_FLAVOR_LABELS, description="Labels of the nodes of this flavor "
        "(label keys and values); Kueue adds them as node selectors to admitted pods.")
    node_taints: list[Taint] = Field(default_factory=list, max_length=MAX_FLAVOR_TAINTS,
                                     description="Taints of the nodes of this flavor.")
    tolerations: list[Toleration] = Field(default_factory=list, max_length=MAX_FLAVOR_TOLERATIONS,
                                          description="Tolerations Kueue adds to admitted pods.")
    price_per_unit_hour: dict[ResourceName, Quantity] = Field(
        default_factory=dict, max_length=MAX_RESOURCES,
        description="Price per unit-hour on this flavor, in spec.ledger.currency, for cost reports: per "
        "GPU-hour (nvidia.com/gpu: \"2.5\"), core-hour (cpu) and GiB-hour (memory, ephemeral-storage, "
        "hugepages-*; a price below 0.000001 per GiB-hour is refused as a price per byte-hour).")


# --------------------------------------------------------------------------------------------- priorities


class PriorityClass(_Spec):
    """A Kueue WorkloadPriorityClass rendered by the policy."""

    name: ClassName = Field(description="WorkloadPriorityClass name (jobs select it with the "
                            "kueue.x-k8s.io/priority-class label).")
    value: Integer = Field(ge=-2147483648, le=1000000000,
                           description="Priority value; higher is admitted first.")
    experiment: bool = Field(default=False, description="Whether workloads of this class are experiments "
                             "(preemptible by protected work).")
    description: str | None = Field(default=None, max_length=256, description="Human-readable description.")


# --------------------------------------------------------------------------------------------- fair share


class FairShare(_Spec):
    """History-based fair share settings."""

    half_life: Duration = Field(default="168h", description="Half-life of past usage: usage this long ago "
                                "counts half.")
    project_label: LabelKey | None = Field(
        default=None, description="Workload label (a label key) whose value adds a project/user node below "
        "its LocalQueue in the usage history graph.")
    push_weights_to_kueue: bool = Field(
        default=False, description="If true, history-adjusted weights are written to the ClusterQueues' "
        "fairSharing.weight; otherwise fairShareWeight is written as is.")


# --------------------------------------------------------------------------------------------- preemption


class PreemptionBudget(_Spec):
    """Most victims the experiment preemption may evict within a sliding window."""

    max_victims: Integer = Field(default=10, ge=0, le=10000, description="Most victims per window.")
    window: Duration = Field(default="1h", description="Length of the sliding window.")
    max_lost_hours: dict[ResourceName, Quantity] = Field(
        default_factory=dict, max_length=MAX_RESOURCES, description="Most work lost to experiment evictions "
        "per window, in resource-hours per resource (e.g. nvidia.com/gpu: 20 = 20 GPU-hours: a victim that "
        "ran 3 h on 2 GPUs loses 6). Unset = bounded by maxVictims only.")


class ExperimentPreemption(_Spec):
    """Automated preemption of experiments when protected work is pending."""

    experiment_priority_threshold: Integer | None = Field(
        default=None, ge=-2147483648, le=1000000000,
        description="Workloads with a priority below this are experiments (in addition to classes marked "
        "experiment). Unset = only classes marked experiment.")
    protected_classes: list[ClassName] = Field(
        default_factory=list, max_length=MAX_PRIORITY_CLASSES,
        description="Priority classes whose pending workloads may preempt experiments. Each must be "
        "declared in spec.priorityClasses and not be an experiment. Empty = no automated preemption.",
        json_schema_extra={"x-kubernetes-list-type": "set"})
    min_runtime: Duration = Field(default="10m", description="Workloads that have run less than this are "
                                  "never victims.")
    starvation_grace: Duration = Field(
        default="30s", description="How long protected work waits without quota before experiments are "
        "preempted for it: Kueue gets the first chance to admit it (or to preempt by itself). Counted from "
        "its creation or its last eviction.")
    victim_hold: Duration = Field(
        default="60s", description="A victim stays deactivated (so it cannot take the freed quota back) "
        "until its beneficiary holds quota, or this long after the eviction request at most; Kueue then "
        "requeues it.")
    budget: PreemptionBudget = Field(default_factory=PreemptionBudget, description="Victim budget.")
    max_evictions_per_workload: Integer = Field(
        default=3, ge=1, le=1000, description="A workload already evicted this many times (by Kueue or by "
        "us) is never chosen as a victim again (anti-thrash): not by experiment preemption, nor for borrowed "
        "quota past a transition's deadline. What a team may not hold at all still falls.")
    storm_cool_down: Duration = Field(
        default="1h", description="How long the response to an eviction storm holds: pushed weights stay "
        "damped to the spec's, a held preemptor stays deactivated (so that its victims run); released then.")
    hold_competing_experiments: bool = Field(
        default=True, description="While victims wait for their beneficiary, the pending experiments Kueue "
        "would admit first with the freed quota (those within their team's nominal quota are ordered before "
        "a borrowing beneficiary) are held too (spec.active=false), and released with the victims: when the "
        "beneficiary holds quota, or after victimHold.")
    dry_run: bool = Field(default=False, description="If true, victims are only reported (Events, metrics, "
                          "status), never evicted.")


# --------------------------------------------------------------------------------------------- transitions


class TransitionDefaults(_Spec):
    """How quota changes roll out, for every team unless it overrides."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!" + _go("self.stepInterval") + " || (duration(self.stepInterval) > duration('0s') && (!"
                + _go("self.duration") + " || duration(self.stepInterval) <= duration(self.duration)))",
        "message": "stepInterval must be positive and must not exceed duration",
        "fieldPath": ".stepInterval",
    }]})

    duration: Duration = Field(default="24h", description="Total time of a quota decrease.")
    step_interval: Duration = Field(default="1h", description="Time between two steps; at most duration.")
    curve: Literal["linear", "geometric", "immediate"] = Field(
        default="linear", description="Shape of the schedule: linear (equal steps), geometric (each step "
        "closes the same fraction of the remaining gap), immediate (one step at once).")
    floor: dict[ResourceName, Quantity] = Field(
        default_factory=dict, max_length=MAX_RESOURCES, description="Per resource, the lowest quota a team "
        "may have (a transition never goes below it): a nominal below it is rejected.")
    drain: bool = Field(default=True, description="If true, a step never cuts quota below what running "
                        "workloads use: it waits for them to finish (until the deadline).")
    deadline: Duration | None = Field(
        default=None, description="Time after the start of a transition after which bounded preemption is "
        "allowed to reach the target. Unset = never preempt.")
    max_victims_per_hour: Integer = Field(default=0, ge=0, le=10000, description="Most workloads a "
                                          "transition may preempt per hour after the deadline.")
    ramp_up: bool = Field(default=False, description="If true, quota increases follow the schedule too; "
                          "otherwise growth applies at once.")


class Transitions(_Spec):
    """Rollout of quota changes."""

    defaults: TransitionDefaults = Field(default_factory=TransitionDefaults,
                                         description="Settings for every team; teams may override them.")


# --------------------------------------------------------------------------------------------- forecasts

# What a forecast can name (docs/operator.md, "Forecasts"): metrics the simulator predicts and the ledger
# observes over one time window, named as in the simulator's vocabulary (simulations/metrics.py) where it has
# them, with an optional argument: a priority class for the waits, a team (ClusterQueue) for the GPU-hours.
FORECAST_METRICS = ("wait_mean", "wait_p50", "wait_p95", "never_admitted", "gpu_hours", "lost_gpu_hours")
FORECAST_METRIC_PATTERN = r"^(" + "|".join(FORECAST_METRICS) + r")(\[[^\[\]]{1,253}\])?$"
MAX_FORECAST_METRICS = 16


# The shortest forecast horizon: a forecast of less than a minute of a transition says nothing.
MIN_FORECAST_HORIZON = "1m"
# Metrics whose argument is a team (ClusterQueue); the others take a priority class.
TEAM_METRICS = ("gpu_hours", "lost_gpu_hours")


class Forecasts(_Spec):
    """When a transition starts, record in status.forecasts the simulator's forecast of these metrics over
    the transition's horizon (computed in the background, never delaying its first step), and when the
    horizon has passed, the values the ledger observed beside them."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "!has(self.horizon) || self.horizon.matches('[wd]') || "
                f"duration(self.horizon) >= duration('{MIN_FORECAST_HORIZON}')",
        "message": f"horizon must be at least {MIN_FORECAST_HORIZON}", "fieldPath": ".horizon",
    }]})

    enabled: bool = Field(default=False, description="Forecast each transition this policy starts.")
    metrics: list[Annotated[str, Field(pattern=FORECAST_METRIC_PATTERN, max_length=300)]] = Field(
        default_factory=lambda: ["wait_p95", "gpu_hours", "lost_gpu_hours"], max_length=MAX_FORECAST_METRICS,
        description="Metrics to forecast: wait_mean, wait_p50, wait_p95, never_admitted (optionally "
        "[PRIORITY-CLASS]), gpu_hours, lost_gpu_hours (optionally [TEAM]).",
        json_schema_extra={"x-kubernetes-list-type": "set"})
    horizon: Duration | None = Field(
        default=None, description="How far ahead to forecast (1m to 3650d); default: the longest duration of "
        "the transitions started.")
    replications: Integer = Field(default=5, ge=2, le=50, description="Simulated replications (the CI is "
                                  "over them).")


# --------------------------------------------------------------------------------------------- tenancy


class Tenancy(_Spec):
    """Per-team access, rendered by the operator and enforced by the API server (docs/tenancy.md): a
    RoleBinding per team namespace and ValidatingAdmissionPolicies (allowed LocalQueues, priority classes,
    projects, cost-centers and user label per team; no Kueue queue outside the teams' namespaces)."""

    operator: SubjectName = Field(
        default="system:serviceaccount:queue-manager:queue-manager",
        description="The operator's user name: its own Workload edits (eviction requests) are exempt.")
    exempt_users: list[SubjectName] = Field(
        default_factory=lambda: ["system:serviceaccount:kueue-system:kueue-controller-manager"],
        max_length=MAX_SUBJECTS,
        description="Users the admission rules never apply to. Default: Kueue's controller (its Workloads "
        "mirror Jobs the rules judged; a cluster admin's change of a Job's class must reach its Workload).")
    exempt_groups: list[SubjectName] = Field(
        default_factory=lambda: ["system:masters"], max_length=MAX_SUBJECTS,
        description="Groups the admission rules never apply to. Default: system:masters (cluster admins).")
    trusted_controllers: list[Annotated[str, Field(pattern=SUBJECT_OR_PREFIX, min_length=1,
                                                   max_length=253)]] = Field(
        default_factory=lambda: ["system:kube-controller-manager", "system:serviceaccount:kube-system:*"],
        max_length=MAX_SUBJECTS,
        description="Controllers that create objects from a template a member wrote (a CronJob's Jobs, a "
        "Deployment's Pods): their objects keep the template's user label, and need no queue of their own. "
        "A trailing * is a prefix. Add e.g. the JobSet or KubeRay controller's ServiceAccount if used.")
    namespaces_outside_teams: Literal["Deny", "Allow"] = Field(
        default="Deny", description="Deny: a namespace in no team (of any QuotaPolicy the operator "
        "reconciles) cannot submit to a Kueue LocalQueue.")


# --------------------------------------------------------------------------------------------- spec

# The spec-level CEL rule below falls back to these when a policy has no transitions.defaults at all (the API
# server fills scalar defaults only inside objects that exist).
_DEFAULT_STEP = TransitionDefaults.model_fields["step_interval"].default
_DEFAULT_DURATION = TransitionDefaults.model_fields["duration"].default
# A team's effective stepInterval and duration (its override, else the defaults, else the defaults' defaults).
_TEAM_STEP = ("(has(t.transition.stepInterval) ? t.transition.stepInterval : (has(self.transitions) && "
              "has(self.transitions.defaults) && has(self.transitions.defaults.stepInterval) ? "
              f"self.transitions.defaults.stepInterval : '{_DEFAULT_STEP}'))")
_TEAM_DURATION = ("(has(t.transition.duration) ? t.transition.duration : (has(self.transitions) && "
                  "has(self.transitions.defaults) && has(self.transitions.defaults.duration) ? "
                  f"self.transitions.defaults.duration : '{_DEFAULT_DURATION}'))")


class QuotaPolicySpec(_Spec):
    """Desired state: teams, flavors, priority classes, fair share, preemption and transition rules."""

    # Cross-field rules whose cost stays small at MAX_TEAMS. A namespace in one team, declared flavors and
    # classes, floors and lending limits are checked at admission (fairshare/policy/admission.py).
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [
        {"rule": "!has(self.preemption) || !has(self.preemption.protectedClasses) || "
                 "self.preemption.protectedClasses.all(c, has(self.priorityClasses) && "
                 "self.priorityClasses.exists(p, p.name == c && !(has(p.experiment) && p.experiment)))",
         "message": "every protectedClasses entry must be a declared, non-experiment priority class",
         "fieldPath": ".preemption.protectedClasses"},
        {"rule": "self.teams.all(t, !has(t.transition) || "
                 f"!{_go(_TEAM_STEP)} || !{_go(_TEAM_DURATION)} || "
                 f"duration({_TEAM_STEP}) <= duration({_TEAM_DURATION}))",
         "message": "a team's effective transition stepInterval must not exceed its duration",
         "fieldPath": ".teams"},
        {"rule": "!has(self.budgets) || self.budgets.all(b, !has(b.selector.team) || "
                 "self.teams.exists(t, t.name == b.selector.team))",
         "message": "every budgets[].selector.team must be a team of spec.teams", "fieldPath": ".budgets"},
        # fairshare.policy.semantics._check_reclaim.
        {"rule": "!has(self.preemption) || !has(self.preemption.protectedClasses) || "
                 "size(self.preemption.protectedClasses) == 0 || self.teams.all(t, !has(t.cohort) || "
                 "!has(t.preemption) || !has(t.preemption.reclaimWithinCohort) || "
                 "t.preemption.reclaimWithinCohort != 'Any')",
         "message": "with spec.preemption.protectedClasses, a team's preemption.reclaimWithinCohort must not "
                    "be "
                    "Any (its experiments would reclaim the freed quota from the beneficiary): use "
                    "LowerPriority or Never",
         "fieldPath": ".teams"},
        # fairshare.policy.semantics._check_forecasts: a metric's argument names a team or a priority class.
        {"rule": "!has(self.forecasts) || !has(self.forecasts.metrics) || self.forecasts.metrics.all(m, "
                 "!m.contains('[') || ("
                 + " || ".join(f"m.startsWith('{x}[')" for x in TEAM_METRICS)
                 + " ? self.teams.exists(t, m.endsWith('[' + t.name + ']')) : (has(self.priorityClasses) && "
                 "self.priorityClasses.exists(p, m.endsWith('[' + p.name + ']')))))",
         "message": "a forecast metric's [argument] must name a team (gpu_hours, lost_gpu_hours) or a "
                    "priority class of the policy (wait_mean, wait_p50, wait_p95, never_admitted)",
         "fieldPath": ".forecasts.metrics"},
        {"rule": "!has(self.preemption) || !has(self.preemption.experimentPriorityThreshold) || "
                 "!has(self.preemption.protectedClasses) || !has(self.priorityClasses) || "
                 "self.priorityClasses.all(p, !(p.name in self.preemption.protectedClasses) || "
                 "p.value >= self.preemption.experimentPriorityThreshold)",
         "message": "experimentPriorityThreshold must not exceed the value of a protected class",
         "fieldPath": ".preemption.experimentPriorityThreshold"},
    ]})

    teams: list[Team] = Field(
        min_length=1, max_length=MAX_TEAMS, description="Teams sharing the cluster. Names are unique.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
    flavors: list[Flavor] = Field(
        min_length=1, max_length=MAX_FLAVORS, description="Kinds of nodes (ResourceFlavors); unique names.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
    priority_classes: list[PriorityClass] = Field(
        default_factory=list, max_length=MAX_PRIORITY_CLASSES,
        description="WorkloadPriorityClasses to render. Names are unique.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
    fair_share: FairShare = Field(default_factory=FairShare, description="History-based fair share.")
    preemption: ExperimentPreemption = Field(default_factory=ExperimentPreemption,
                                             description="Automated experiment preemption.")
    transitions: Transitions = Field(default_factory=Transitions, description="Rollout of quota changes.")
    # Accounting (fairshare/policy/ledger_spec.py; evaluated by fairshare/control/budgets.py).
    ledger: LedgerSettings = Field(default_factory=LedgerSettings,
                                   description="What the ledger keeps and for how long.")
    budgets: list[Budget] = Field(
        default_factory=list, max_length=MAX_BUDGETS, description="Budgets of teams or projects per period, "
        "with alerts and gradual enforcement.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
    forecasts: Forecasts = Field(default_factory=Forecasts, description="Forecasts of each transition, "
                                 "recorded in status and scored against the ledger.")
    tenancy: Tenancy | None = Field(
        default=None, description="Per-team access rules (RBAC and admission) the operator renders and the "
        "API server enforces. Unset = none (teams' members, classes, projects and cost-centers are then "
        "not enforced).")
    # Idle GPUs (fairshare/policy/idle_spec.py; the rule: fairshare/control/idle.py).
    idle: IdleReclamation = Field(default_factory=IdleReclamation, description="Reclaim allocated-but-idle "
                                  "GPUs of experiments, read from dcgm-exporter through Prometheus.")


MAX_POLICY_NAME = 63


class ObjectMeta(BaseModel):
    """The part of metadata the policy code reads; everything else is kept as is."""

    model_config = ConfigDict(extra="allow", frozen=True)

    # The name is the value of the queuemanager.dev/policy label on every rendered object: a label value,
    # at most 63 characters (the CRD says so too, fairshare.policy.crd).
    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=MAX_POLICY_NAME)
    generation: int | None = None
    uid: str | None = None
    resourceVersion: str | None = None


class QuotaPolicy(BaseModel):
    """A whole QuotaPolicy object as stored in the API server or written in a file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    apiVersion: Literal["queuemanager.dev/v1alpha1"]
    kind: Literal["QuotaPolicy"]
    metadata: ObjectMeta
    spec: QuotaPolicySpec
    status: QuotaPolicyStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name
