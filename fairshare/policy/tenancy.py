"""Tenancy: what a QuotaPolicy's `spec.tenancy` renders (pure, deterministic), and the install manifests
that stamp who submitted what (docs/tenancy.md).

Rendered per policy (the operator applies and owns them like the Kueue objects):

- per team, a ValidatingAdmissionPolicy and its binding (the team's namespaces): a workload there may name
  only the team's LocalQueue (and a batch kind must name it), only the priority classes, projects and
  cost-centers the policy allows the team, and a user label only of the person who submits it (a team admin:
  of any listed member). Each denial names the team, the value and the allowed set;
- one ValidatingAdmissionPolicy for every other namespace: no Kueue LocalQueue there
  (`namespacesOutsideTeams: Deny`);
- per team namespace, a RoleBinding of the members and admins to the shipped ClusterRole
  `queue-manager-team-member` (manifests/rbac/team-member-clusterrole.yaml).

Installed once (manifests/admission/stamps.yaml, generated from `stamp_manifests()`): MutatingAdmission-
Policies that stamp, at admission, the requesting user (`request.userInfo.username`) on every workload object
created (annotation `queuemanager.dev/submitted-by`, and the label `queuemanager.dev/user` when absent, which
Kueue copies to the Workload: `integrations.labelKeysToCopy`), and on every QuotaPolicy whose spec changes
(annotation `queuemanager.dev/edited-by`: the editor the ledger's audit rows show).

Why a RoleBinding to a shipped ClusterRole rather than a rendered Role: Kubernetes lets a user create a Role
only with permissions it holds (or with `escalate`, which would let the operator grant anything), and a
RoleBinding only to a role whose permissions it holds or which it may `bind`. The operator may `bind` this
one ClusterRole (manifests/rbac/clusterrole.yaml, by resourceNames): it never holds Job or Pod permissions.
Why the MutatingAdmissionPolicies are installed, not rendered: a MutatingAdmissionPolicy can rewrite any
object (a Pod's image); the operator may create ValidatingAdmissionPolicies, which can only deny.

Kueue's labels (v0.19.2 pkg/controller/constants/constants.go): `kueue.x-k8s.io/queue-name` (QueueLabel),
`kueue.x-k8s.io/priority-class` (WorkloadPriorityClassLabel, "always mutable", so updates are checked too);
without that label Kueue takes the priority from the pod template's priorityClassName
(jobframework.ExtractPriority), which is therefore checked as well.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import yaml

from .model import QuotaPolicy, Subject, Team, Tenancy
from .owners import local_queue_name
from .render import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAMESPACE_NAME_LABEL,
    TEAM_LABEL,
    Manifest,
    owner_labels,
)
from .semantics import subject_identity

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
# Apply order: the admission rules before the RoleBindings (a member never holds access the rules do not
# check yet); pruning goes in reverse.
TENANCY_KIND_ORDER = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "RoleBinding")
# (kind, group, version, plural) of each, for readers of the live objects.
TENANCY_KINDS = (
    ("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
    ("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1",
     "validatingadmissionpolicybindings"),
    ("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings"),
)

USER_LABEL = "queuemanager.dev/user"  # the ledger's user (ledger.records.LabelKeys.user)
SUBMITTER_ANNOTATION = "queuemanager.dev/submitted-by"
EDITOR_ANNOTATION = "queuemanager.dev/edited-by"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
COST_CENTER_LABEL = "cost-center"  # the ledger's (ledger.records.LabelKeys.cost_center)
DEFAULT_PROJECT_LABEL = "project"
MEMBER_CLUSTER_ROLE = "queue-manager-team-member"
STAMP_PREFIX = "queue-manager"

# A label value (k8s.io/apimachinery validation.IsValidLabelValue): at most 63 characters.
_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# How a user name becomes a label value: one fixed chain of replacements, the same in CEL (the stamp and the
# check) and here (the admins' members). What is still not a label value afterwards is not stamped.
_LABEL_REPLACEMENTS = (("@", "_at_"), (":", "."), ("/", "."), ("#", "."), ("+", "-"), (" ", "-"), ("=", "-"),
                       ("~", "-"))


@dataclass(frozen=True, slots=True)
class IntegratedKind:
    """A kind Kueue v0.19.2 integrates by default (config/components/manager/controller_manager_config.yaml,
    integrations.frameworks). `batch`: a member may create it and it must name a LocalQueue."""

    group: str
    resource: str
    batch: bool


INTEGRATED_KINDS = (
    IntegratedKind("batch", "jobs", True),
    IntegratedKind("batch", "cronjobs", True),  # not a Kueue kind: its Jobs are (their template is checked)
    IntegratedKind("jobset.x-k8s.io", "jobsets", True),
    IntegratedKind("ray.io", "rayjobs", True),
    IntegratedKind("ray.io", "rayclusters", True),
    IntegratedKind("ray.io", "rayservices", True),
    IntegratedKind("kubeflow.org", "mpijobs", True),
    IntegratedKind("workload.codeflare.dev", "appwrappers", True),
    IntegratedKind("trainer.kubeflow.org", "trainjobs", True),
    IntegratedKind("leaderworkerset.x-k8s.io", "leaderworkersets", False),
    IntegratedKind("apps", "deployments", False),
    IntegratedKind("apps", "statefulsets", False),
    IntegratedKind("", "pods", False),
)
WORKLOADS = IntegratedKind("kueue.x-k8s.io", "workloads", False)


# --------------------------------------------------------------------------------------------- helpers


def cel(value: object) -> str:
    """A CEL literal: strings double-quoted with JSON's escapes (\\uXXXX for non-ASCII; CEL reads them),
    lists and string maps."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(cel(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel(k)}: {cel(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no CEL literal for {value!r}")


def label_safe(username: str) -> str | None:
    """The label value stamped for a user name (`cel_label_safe` in CEL), or None when even after the
    replacements it is not a label value (then no user label is stamped)."""
    out = username
    for old, new in _LABEL_REPLACEMENTS:
        out = out.replace(old, new)
    return out if out and len(out) <= 63 and re.match(_LABEL_VALUE, out) else None


def cel_label_safe(expr: str) -> str:
    """`label_safe` in CEL (the Kubernetes strings library's replace)."""
    out = expr
    for old, new in _LABEL_REPLACEMENTS:
        out = f"{out}.replace({cel(old)}, {cel(new)})"
    return out


def cel_is_label_value(expr: str) -> str:
    return f"({expr} != '' && size({expr}) <= 63 && {expr}.matches({cel(_LABEL_VALUE)}))"


def project_label(policy: QuotaPolicy) -> str:
    """The workload label that names its project: spec.fairShare.projectLabel, else "project" (the label the
    ledger accounts by)."""
    return policy.spec.fair_share.project_label or DEFAULT_PROJECT_LABEL


def allowed_classes(policy: QuotaPolicy, team: Team) -> list[str]:
    """The priority classes the team may use: its list, else every declared class that is not protected
    (a protected class only for the teams that list it); minus its forbidden ones. Sorted."""
    protected = set(policy.spec.preemption.protected_classes)
    base = team.priority_classes if team.priority_classes is not None else \
        [p.name for p in policy.spec.priority_classes if p.name not in protected]
    forbidden = set(team.forbidden_priority_classes)
    return sorted(c for c in base if c not in forbidden)


@dataclass(frozen=True, slots=True)
class LabelRule:
    """Which values of a label a team may charge: `allowed` (its own list), or, without one, any value but
    those other teams list (`claimed`: value -> the team that lists it)."""

    allowed: tuple[str, ...] | None
    claimed: dict[str, str]

    def permits(self, value: str) -> bool:
        if not value:
            return True
        return value in self.allowed if self.allowed is not None else value not in self.claimed


def label_rule(policy: QuotaPolicy, team: Team, field: str) -> LabelRule:
    """`field`: "projects" or "cost_centers"."""
    own = getattr(team, field)
    if own is not None:
        return LabelRule(tuple(sorted(own)), {})
    claimed: dict[str, str] = {}
    for other in sorted(policy.spec.teams, key=lambda t: t.name):
        if other.name != team.name:
            for value in getattr(other, field) or []:
                claimed.setdefault(value, other.name)
    return LabelRule(None, dict(sorted(claimed.items())))


def _users(subjects: Sequence[Subject]) -> tuple[list[str], list[str]]:
    users: set[str] = set()
    groups: set[str] = set()
    for s in subjects:
        kind, name = subject_identity(s)
        (users if kind == "User" else groups).add(name)
    return sorted(users), sorted(groups)


def member_label_values(team: Team) -> list[str]:
    """The user-label values a team admin may attribute work to: every listed member or admin user (and
    ServiceAccount) whose name has a label form. Groups have no single user to name."""
    users, _ = _users([*team.members, *team.admins])
    return sorted({v for u in users if (v := label_safe(u)) is not None})


def object_name(*parts: str) -> str:
    """A cluster-scoped object name (DNS subdomain, at most 253): the parts joined by dots, shortened with a
    digest when too long."""
    name = ".".join(parts)
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"{name[:240]}.{digest}"


def _meta(policy_name: str, name: str, *, namespace: str | None = None, team: str | None = None) -> Manifest:
    labels = owner_labels(policy_name)
    if team is not None:
        labels[TEAM_LABEL] = team
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels
    return meta


# --------------------------------------------------------------------------------------------- CEL inputs

_META_LABELS = "(has({o}.metadata.labels) ? {o}.metadata.labels : {{}})"
_CRONJOB_LABELS = ("(has({o}.spec.jobTemplate.metadata) && has({o}.spec.jobTemplate.metadata.labels) ? "
                   "{o}.spec.jobTemplate.metadata.labels : {{}})")
_POD_TEMPLATE_LABELS = ("(has({o}.spec.template) && has({o}.spec.template.metadata) && "
                        "has({o}.spec.template.metadata.labels) ? {o}.spec.template.metadata.labels : {{}})")


def _labels(o: str) -> str:
    """The labels Kueue reads: a CronJob's are its Jobs' (jobTemplate), every other kind's its own."""
    return f"(request.resource.resource == 'cronjobs' ? {_CRONJOB_LABELS.format(o=o)} : " \
           f"{_META_LABELS.format(o=o)})"


def _template_labels(o: str) -> str:
    """A Deployment's or StatefulSet's pod template labels (Kueue's pod integration reads the Pods')."""
    return f"(request.resource.resource in ['deployments', 'statefulsets'] ? " \
           f"{_POD_TEMPLATE_LABELS.format(o=o)} : {{}})"


def _get(labels: str, key: str) -> str:
    return f"({cel(key)} in {labels} ? {labels}[{cel(key)}] : '')"


def _queue(o: str, labels: str) -> str:
    return f"(variables.isWorkload ? (has({o}.spec.queueName) ? {o}.spec.queueName : '') : " \
           f"{_get(labels, QUEUE_LABEL)})"


def _class(o: str, labels: str) -> str:
    # A Workload's class: spec.priorityClassRef (a WorkloadPriorityClass or, group scheduling.k8s.io, a
    # PriorityClass), Kueue v1beta2 workload_types.go.
    return f"(variables.isWorkload ? (has({o}.spec.priorityClassRef) ? {o}.spec.priorityClassRef.name " \
           f": '') : {_get(labels, PRIORITY_CLASS_LABEL)})"


def _pod_class(o: str) -> str:
    """The pod template's priorityClassName (Kueue's priority when the class label is absent)."""
    return (f"(request.resource.resource == 'pods' ? (has({o}.spec.priorityClassName) ? "
            f"{o}.spec.priorityClassName : '') : request.resource.resource == 'cronjobs' ? "
            f"(has({o}.spec.jobTemplate.spec) && "
            f"has({o}.spec.jobTemplate.spec.template.spec.priorityClassName) ? "
            f"{o}.spec.jobTemplate.spec.template.spec.priorityClassName : '') : "
            f"request.resource.resource in ['jobs', 'deployments', 'statefulsets'] ? "
            f"(has({o}.spec.template.spec.priorityClassName) ? {o}.spec.template.spec.priorityClassName "
            f": '') : '')")


def _annotation(o: str, key: str) -> str:
    return f"(has({o}.metadata.annotations) && {cel(key)} in {o}.metadata.annotations ? " \
           f"{o}.metadata.annotations[{cel(key)}] : '')"


def _changed(var: str) -> str:
    """True on CREATE, and on UPDATE when the value changes (a rule never blocks other writers' updates of
    an object it admitted, e.g. Kueue's)."""
    up = var[0].upper() + var[1:]
    return f"(request.operation == 'CREATE' || variables.{var} != variables.old{up})"


def _input_variables(policy: QuotaPolicy) -> list[dict[str, str]]:
    project = project_label(policy)
    old = "request.operation == 'UPDATE'"
    pairs: list[tuple[str, str]] = [
        ("isWorkload",
         "request.resource.group == 'kueue.x-k8s.io' && request.resource.resource == 'workloads'"),
        ("labels", _labels("object")),
        ("oldLabels", f"{old} ? {_labels('oldObject')} : {{}}"),
        ("templateLabels", _template_labels("object")),
        ("oldTemplateLabels", f"{old} ? {_template_labels('oldObject')} : {{}}"),
        ("queue", _queue("object", "variables.labels")),
        ("oldQueue", f"{old} ? {_queue('oldObject', 'variables.oldLabels')} : ''"),
        ("priorityClass", _class("object", "variables.labels")),
        ("oldPriorityClass", f"{old} ? {_class('oldObject', 'variables.oldLabels')} : ''"),
        ("podPriorityClass", _pod_class("object")),
        ("oldPodPriorityClass", f"{old} ? {_pod_class('oldObject')} : ''"),
        ("project", _get("variables.labels", project)),
        ("oldProject", _get("variables.oldLabels", project)),
        ("costCenter", _get("variables.labels", COST_CENTER_LABEL)),
        ("oldCostCenter", _get("variables.oldLabels", COST_CENTER_LABEL)),
        ("user", _get("variables.labels", USER_LABEL)),
        ("oldUser", _get("variables.oldLabels", USER_LABEL)),
        ("templateUser", _get("variables.templateLabels", USER_LABEL)),
        ("oldTemplateUser", _get("variables.oldTemplateLabels", USER_LABEL)),
        ("submitter", _annotation("object", SUBMITTER_ANNOTATION)),
        ("oldSubmitter", f"{old} ? {_annotation('oldObject', SUBMITTER_ANNOTATION)} : ''"),
        ("requesterLabel", cel_label_safe("request.userInfo.username")),
        ("owned", "has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0"),
        ("what", "request.kind.kind + ' ' + (has(object.metadata.name) && object.metadata.name != '' ? "
                 "object.metadata.name : (has(object.metadata.generateName) ? object.metadata.generateName "
                 "+ '*' : ''))"),
    ]
    return [{"name": n, "expression": e} for n, e in pairs]


def _trusted(tenancy: Tenancy) -> str:
    exact = sorted(t for t in tenancy.trusted_controllers if not t.endswith("*"))
    prefixes = sorted(t[:-1] for t in tenancy.trusted_controllers if t.endswith("*"))
    return f"(request.userInfo.username in {cel(exact)} || " \
           f"{cel(prefixes)}.exists(p, request.userInfo.username.startsWith(p)))"


def _exempt_condition(tenancy: Tenancy) -> list[dict[str, str]]:
    users = sorted({tenancy.operator, *tenancy.exempt_users})
    groups = sorted(set(tenancy.exempt_groups))
    return [{"name": "not-exempt",
             "expression": f"!(request.userInfo.username in {cel(users)}) && "
                           f"!request.userInfo.groups.exists(g, g in {cel(groups)})"}]


def _resource_rules(kinds: Sequence[IntegratedKind], operations: Sequence[str]) -> list[Manifest]:
    groups: dict[str, list[str]] = {}
    for k in kinds:
        groups.setdefault(k.group, []).append(k.resource)
    return [{"apiGroups": [g], "apiVersions": ["*"], "operations": list(operations), "resources": sorted(r)}
            for g, r in sorted(groups.items())]


def _rule(expression: str, message: str) -> Manifest:
    return {"expression": expression, "messageExpression": message, "reason": "Forbidden"}


def _shown(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]" if values else "[] (none)"


# --------------------------------------------------------------------------------------------- per team


def _team_validations(policy: QuotaPolicy, team: Team) -> list[Manifest]:
    t = team.name
    queues = [local_queue_name(team)]
    classes = allowed_classes(policy, team)
    batch = [k.resource for k in INTEGRATED_KINDS if k.batch]
    admin_users, admin_groups = _users(team.admins)
    members = member_label_values(team)
    prefix = f"'team {t}: ' + variables.what"
    out = [
        _rule(f"!{_changed('queue')} || variables.queue == '' || variables.queue in {cel(queues)}",
              f"{prefix} + ' names LocalQueue ' + variables.queue + '; namespace ' + request.namespace + "
              f"' may use only LocalQueue {_shown(queues)}'"),
        _rule(f"variables.isWorkload || !(request.resource.resource in {cel(batch)}) || variables.trusted || "
              "variables.owned || variables.queue != '' || "
              "(request.operation == 'UPDATE' && variables.oldQueue == '')",
              f"{prefix} + ' names no LocalQueue (label {QUEUE_LABEL}); in namespace ' + request.namespace + "
              f"' it must name {_shown(queues)}, or it would run outside Kueue'"),
        _rule(f"!{_changed('priorityClass')} || variables.priorityClass == '' || "
              f"variables.priorityClass in {cel(classes)}",
              f"{prefix} + ' asks for priority class ' + variables.priorityClass + '; team {t} may use "
              f"{_shown(classes)}'"),
        _rule(f"!{_changed('podPriorityClass')} || variables.podPriorityClass == '' || "
              f"variables.podPriorityClass in {cel(classes)}",
              f"{prefix} + ' asks for pod priorityClassName ' + variables.podPriorityClass + '; team {t} may "
              f"use {_shown(classes)}'"),
    ]
    for var, field, label in (("project", "projects", project_label(policy)),
                              ("costCenter", "cost_centers", COST_CENTER_LABEL)):
        rule = label_rule(policy, team, field)
        if rule.allowed is not None:
            out.append(_rule(
                f"!{_changed(var)} || variables.{var} == '' || variables.{var} in {cel(list(rule.allowed))}",
                f"{prefix} + ' charges {label} ' + variables.{var} + '; team {t} may charge "
                f"{_shown(rule.allowed)}'"))
        elif rule.claimed:
            out.append(_rule(
                f"!{_changed(var)} || !(variables.{var} in {cel(rule.claimed)})",
                f"{prefix} + ' charges {label} ' + variables.{var} + ', which is team ' + "
                f"{cel(rule.claimed)}[variables.{var}] + \"'s; team {t} may charge any {label} no other team "
                f"lists (not {_shown(sorted(rule.claimed))})\""))
    admin = f"(request.userInfo.username in {cel(admin_users)} || " \
            f"request.userInfo.groups.exists(g, g in {cel(admin_groups)}))"
    for var in ("user", "templateUser"):
        where = "label" if var == "user" else "pod template label"
        out.append(_rule(
            f"variables.isWorkload || variables.trusted || !{_changed(var)} || "
            f"(request.operation == 'CREATE' && (variables.{var} == '' || variables.{var} == "
            f"variables.requesterLabel)) || ({admin} && variables.{var} in {cel(members)})",
            f"{prefix} + ' has {where} {USER_LABEL}: ' + variables.{var} + ', but it is submitted by ' + "
            f"request.userInfo.username + ' (label value ' + variables.requesterLabel + '); only an admin "
            f"of team {t} may name another member: {_shown(members)}'"))
    out.append(_rule(
        "variables.isWorkload || variables.trusted || request.operation != 'UPDATE' || "
        "variables.submitter == variables.oldSubmitter",
        f"{prefix} + ': annotation {SUBMITTER_ANNOTATION} is stamped at creation and cannot be changed'"))
    return out


def _binding(policy_name: str, name: str, selector: Manifest, team: str | None) -> Manifest:
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta(policy_name, name, team=team),
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": selector}}}


def _selector(operator: str, namespaces: Sequence[str]) -> Manifest:
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": operator,
                                  "values": sorted(set(namespaces))}]}


def _validating_policy(policy: QuotaPolicy, name: str, validations: list[Manifest], tenancy: Tenancy,
                       team: str | None) -> Manifest:
    kinds = [*INTEGRATED_KINDS, WORKLOADS]
    variables = _input_variables(policy)
    variables.append({"name": "trusted", "expression": _trusted(tenancy)})
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "ValidatingAdmissionPolicy",
            "metadata": _meta(policy.name, name, team=team),
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": _resource_rules(kinds, ("CREATE", "UPDATE"))},
                     "matchConditions": _exempt_condition(tenancy),
                     "variables": variables,
                     "validations": validations}}


def _outside_validations(policy: QuotaPolicy) -> list[Manifest]:
    return [_rule(
        "variables.queue == '' || (request.operation == 'UPDATE' && variables.oldQueue == variables.queue)",
        f"variables.what + ' names LocalQueue ' + variables.queue + '; namespace ' + request.namespace + "
        f"' is in no team of QuotaPolicy {policy.name}, so it may use no Kueue LocalQueue: [] (none)'")]


def _role_binding(policy_name: str, team: Team, namespace: str) -> Manifest:
    subjects: list[Manifest] = []
    seen: set[tuple[str, str, str]] = set()
    for s in [*team.members, *team.admins]:
        key = (s.kind, s.namespace or "", s.name)
        if key in seen:
            continue
        seen.add(key)
        if s.kind == "ServiceAccount":  # apiGroup "" is omitted by the API server
            subjects.append({"kind": "ServiceAccount", "name": s.name, "namespace": s.namespace})
        else:
            subjects.append({"kind": s.kind, "apiGroup": "rbac.authorization.k8s.io", "name": s.name})
    subjects.sort(key=lambda m: (str(m["kind"]), str(m.get("namespace", "")), str(m["name"])))
    return {"apiVersion": RBAC_API_VERSION, "kind": "RoleBinding",
            "metadata": _meta(policy_name, object_name(STAMP_PREFIX, policy_name), namespace=namespace,
                              team=team.name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": MEMBER_CLUSTER_ROLE},
            "subjects": subjects}


def render_tenancy(policy: QuotaPolicy, *, other_namespaces: Sequence[str] = ()) -> list[Manifest]:
    """The tenancy objects of the policy, in apply order (TENANCY_KIND_ORDER; by name within a kind); none
    without spec.tenancy. `other_namespaces`: the teams' namespaces of the operator's other QuotaPolicies (not
    "outside every team")."""
    tenancy = policy.spec.tenancy
    if tenancy is None:
        return []
    name = policy.name
    policies: list[Manifest] = []
    bindings: list[Manifest] = []
    for team in sorted(policy.spec.teams, key=lambda t: t.name):
        obj = object_name(STAMP_PREFIX, name, team.name)
        policies.append(_validating_policy(policy, obj, _team_validations(policy, team), tenancy,
                                           team.name))
        bindings.append(_binding(name, obj, _selector("In", team.namespaces), team.name))
    if tenancy.namespaces_outside_teams == "Deny":
        obj = object_name(STAMP_PREFIX, name, "outside-teams")
        policies.append(_validating_policy(policy, obj, _outside_validations(policy), tenancy, None))
        mine = [ns for t in policy.spec.teams for ns in t.namespaces]
        bindings.append(_binding(name, obj, _selector("NotIn", [*mine, *other_namespaces]), None))
    role_bindings = [_role_binding(name, t, ns) for t in policy.spec.teams for ns in t.namespaces
                     if t.members or t.admins]

    def by_name(m: Manifest) -> tuple[str, str]:
        meta = cast(dict[str, object], m["metadata"])
        return str(meta.get("namespace", "")), str(meta["name"])

    return [*sorted(policies, key=by_name), *sorted(bindings, key=by_name),
            *sorted(role_bindings, key=by_name)]


def tenancy_warnings(policy: QuotaPolicy) -> list[str]:
    """What `qm policy check` says about tenancy fields that would not be enforced."""
    if policy.spec.tenancy is not None:
        return []
    fields = sorted({f for t in policy.spec.teams for f, v in (
        ("members", t.members), ("admins", t.admins), ("priorityClasses", t.priority_classes),
        ("forbiddenPriorityClasses", t.forbidden_priority_classes), ("projects", t.projects),
        ("costCenters", t.cost_centers)) if v})
    if not fields:
        return []
    return [f"teams set {', '.join(fields)} but spec.tenancy is not set: nothing renders or enforces them "
            "(add spec.tenancy: {} to enforce them, docs/tenancy.md)"]


# --------------------------------------------------------------------------------------------- installed once


def member_cluster_role() -> Manifest:
    """The ClusterRole the rendered RoleBindings grant in a team's namespaces: submit and manage the batch
    kinds Kueue integrates (they must name the team's LocalQueue), read Workloads, LocalQueues, Pods, their
    logs and Events. Nothing that runs outside Kueue (Pods, Deployments) and nothing cluster-wide."""
    rules: list[Manifest] = []
    groups: dict[str, list[str]] = {}
    for k in INTEGRATED_KINDS:
        if k.batch:
            groups.setdefault(k.group, []).append(k.resource)
    for group, resources in sorted(groups.items()):
        rules.append({"apiGroups": [group], "resources": sorted(resources),
                      "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]})
    rules.append({"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"],
                  "verbs": ["get", "list", "watch"]})
    rules.append({"apiGroups": [""], "resources": ["events", "pods", "pods/log"],
                  "verbs": ["get", "list", "watch"]})
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole",
            "metadata": {"name": MEMBER_CLUSTER_ROLE, "labels": {"app.kubernetes.io/name": "queue-manager"}},
            "rules": rules}


def _stamp_binding(name: str, selector: Manifest | None) -> Manifest:
    spec: Manifest = {"policyName": name}
    if selector is not None:
        spec["matchResources"] = {"namespaceSelector": selector}
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "queue-manager"}}, "spec": spec}


def _stamp(name: str, resources: Sequence[IntegratedKind], operations: Sequence[str],
           variables: Sequence[Mapping[str, str]], mutations: list[Manifest],
           conditions: list[Manifest] | None = None) -> Manifest:
    spec: Manifest = {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                      "matchConstraints": {"resourceRules": _resource_rules(resources, operations)}}
    if conditions:
        spec["matchConditions"] = conditions
    spec["variables"] = [dict(v) for v in variables]
    spec["mutations"] = mutations
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "queue-manager"}}, "spec": spec}


def _apply(expression: str) -> Manifest:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def _label_stamp(path: str, labels: str) -> Manifest:
    """Set USER_LABEL at `path` (an ApplyConfiguration type path, e.g. Object.metadata) unless the object
    carries one (the validating rules then check it) or the user name has no label form."""
    user = cel(USER_LABEL)
    parts = path.split(".")  # e.g. Object, spec, template, metadata: the types of the nested fields
    inner = f"{path}{{labels: {{{user}: variables.requesterLabel}}}}"
    for i in range(len(parts) - 1, 0, -1):
        inner = f"{'.'.join(parts[:i])}{{{parts[i]}: {inner}}}"
    keep = f"({user} in {labels} || !{cel_is_label_value('variables.requesterLabel')})"
    return _apply(f"{keep} ? Object{{}} : {inner}")


def stamp_manifests() -> list[Manifest]:
    """The MutatingAdmissionPolicies (and bindings) installed once (manifests/admission/stamps.yaml)."""
    variables = [{"name": "requesterLabel", "expression": cel_label_safe("request.userInfo.username")}]
    not_system = _selector("NotIn", ["kube-system"])
    workloads = [k for k in INTEGRATED_KINDS if k.resource != "pods"]
    submitter = f"{STAMP_PREFIX}-submitter"
    annotate = _apply(f"Object{{metadata: Object.metadata{{annotations: {{{cel(SUBMITTER_ANNOTATION)}: "
                      "request.userInfo.username}}}")
    meta_labels = _META_LABELS.format(o="object")
    cron = f"{STAMP_PREFIX}-submitter-cronjobs"
    cron_labels = _CRONJOB_LABELS.format(o="object")
    pods = f"{STAMP_PREFIX}-submitter-pod-templates"
    pod_labels = _POD_TEMPLATE_LABELS.format(o="object")
    editor = f"{STAMP_PREFIX}-policy-editor"
    key = EDITOR_ANNOTATION.replace("~", "~0").replace("/", "~1")
    old = _annotation("oldObject", EDITOR_ANNOTATION)
    edit = ("(request.operation == 'CREATE' || object.spec != oldObject.spec) ? "
            "((has(object.metadata.annotations) ? [] : [JSONPatch{op: 'add', path: '/metadata/annotations', "
            "value: {}}]) + [JSONPatch{op: 'add', path: '/metadata/annotations/" + key + "', "
            "value: request.userInfo.username}]) : "
            f"({old} != '' ? [JSONPatch{{op: 'add', path: '/metadata/annotations/{key}', value: {old}}}] : "
            f"[JSONPatch{{op: 'remove', path: '/metadata/annotations/{key}'}}])")
    edited = ("request.operation == 'CREATE' || object.spec != oldObject.spec || "
              f"{_annotation('object', EDITOR_ANNOTATION)} != {old}")
    return [
        _stamp(submitter, workloads, ("CREATE",), variables,
               [annotate, _label_stamp("Object.metadata", meta_labels)]),
        _stamp_binding(submitter, not_system),
        _stamp(cron, [k for k in INTEGRATED_KINDS if k.resource == "cronjobs"], ("CREATE",), variables,
               [_label_stamp("Object.spec.jobTemplate.metadata", cron_labels)]),
        _stamp_binding(cron, not_system),
        _stamp(pods, [k for k in INTEGRATED_KINDS if k.resource in ("deployments", "statefulsets")],
               ("CREATE",), variables, [_label_stamp("Object.spec.template.metadata", pod_labels)]),
        _stamp_binding(pods, not_system),
        _stamp(editor, [IntegratedKind("queuemanager.dev", "quotapolicies", False)], ("CREATE", "UPDATE"), [],
               [{"patchType": "JSONPatch", "jsonPatch": {"expression": edit}}],
               [{"name": "spec-or-editor-changed", "expression": edited}]),
        _stamp_binding(editor, None),
    ]


HEADER = ("# Generated by `python -m fairshare.policy.tenancy {what}` from fairshare/policy/tenancy.py.\n"
          "# Do not edit: change the code and regenerate (tests/unit/policy/test_tenancy.py checks).\n")


def main(argv: Sequence[str]) -> int:
    what = argv[0] if argv else ""
    generators: dict[str, Callable[[], list[Manifest]]] = {
        "stamps": stamp_manifests, "member-role": lambda: [member_cluster_role()]}
    docs = generators.get(what)
    if docs is None:
        print("usage: python -m fairshare.policy.tenancy stamps|member-role", file=sys.stderr)
        return 2
    sys.stdout.write(HEADER.format(what=what))
    sys.stdout.write(yaml.safe_dump_all(docs(), sort_keys=False, width=110))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["ADMISSION_API_VERSION", "EDITOR_ANNOTATION", "INTEGRATED_KINDS", "MANAGED_BY_LABEL",
           "MANAGED_BY_VALUE", "MEMBER_CLUSTER_ROLE", "SUBMITTER_ANNOTATION", "TENANCY_KIND_ORDER",
           "USER_LABEL", "allowed_classes", "label_rule", "label_safe", "member_cluster_role",
           "render_tenancy", "stamp_manifests", "tenancy_warnings"]
