"""Tenancy (fairshare/policy/tenancy.py): the fields' rules, what a policy's spec.tenancy renders, and the
generated install manifests. The rendered rules are enforced by the real API server in
tests/integration/test_tenancy.py."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from fairshare.errors import InputError
from fairshare.policy import ObjectKey, object_key, parse_policy
from fairshare.policy.tenancy import (
    HEADER,
    MEMBER_CLUSTER_ROLE,
    allowed_classes,
    label_rule,
    label_safe,
    member_cluster_role,
    member_label_values,
    render_tenancy,
    stamp_manifests,
    tenancy_warnings,
)

from .helpers import REPO, Doc, edited

TENANCY = REPO / "manifests" / "tenancy"


def policy_doc(**spec: Any) -> Doc:
    """Two teams: research (experiments only, by default) and business (may use the protected class)."""
    doc: Doc = {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "gpu"},
        "spec": {
            "tenancy": {},
            "flavors": [{"name": "a100"}],
            "priorityClasses": [{"name": "business", "value": 1000000},
                                {"name": "batch", "value": 500},
                                {"name": "experiment", "value": 100, "experiment": True}],
            "preemption": {"protectedClasses": ["business"]},
            "fairShare": {"projectLabel": "queuemanager.dev/project"},
            "teams": [
                {"name": "research", "namespaces": ["research", "research-2"],
                 "members": [{"kind": "User", "name": "alice@example.com"},
                             {"kind": "Group", "name": "oidc:ml-research"}],
                 "admins": [{"kind": "User", "name": "rita"}],
                 "projects": ["scaling-laws"], "costCenters": ["cc-research"],
                 "quotas": [{"flavor": "a100", "resources": [{"name": "nvidia.com/gpu", "nominal": 4}]}]},
                {"name": "business", "namespaces": ["serving"],
                 "members": [{"kind": "User", "name": "bob"},
                             {"kind": "ServiceAccount", "name": "ci", "namespace": "serving"}],
                 "priorityClasses": ["business", "batch", "experiment"],
                 "projects": ["serving-prod"],
                 "quotas": [{"flavor": "a100", "resources": [{"name": "nvidia.com/gpu", "nominal": 4}]}]},
                {"name": "shared", "namespaces": ["shared"],
                 "quotas": [{"flavor": "a100", "resources": [{"name": "nvidia.com/gpu", "nominal": 1}]}]},
            ],
        },
    }
    doc["spec"].update(spec)
    return doc


def _team(doc: Doc, name: str) -> Any:
    return next(t for t in parse_policy(doc).spec.teams if t.name == name)


@pytest.mark.parametrize(("username", "label"), [
    ("alice", "alice"),
    ("alice@example.com", "alice_at_example.com"),
    ("system:serviceaccount:serving:ci", "system.serviceaccount.serving.ci"),
    ("oidc:https://issuer.example.com#alice", "oidc.https...issuer.example.com.alice"),
    ("first last", "first-last"),
    ("-dash", None),
    ("élodie", None),
    ("x" * 64, None),
], ids=["plain", "email", "service-account", "oidc-url", "space", "leading-dash", "non-ascii", "too-long"])
def test_a_user_name_becomes_the_label_value_stamped_or_none(username: str, label: str | None) -> None:
    assert label_safe(username) == label


def test_a_team_may_use_the_classes_it_lists_else_every_unprotected_one_minus_the_forbidden() -> None:
    doc = policy_doc()
    policy = parse_policy(doc)
    assert [allowed_classes(policy, t) for t in policy.spec.teams] == [
        ["batch", "experiment"], ["batch", "business", "experiment"], ["batch", "experiment"]]
    doc["spec"]["teams"][2]["forbiddenPriorityClasses"] = ["batch"]
    policy = parse_policy(doc)
    assert allowed_classes(policy, policy.spec.teams[2]) == ["experiment"]


def test_a_team_charges_its_listed_projects_else_any_another_team_does_not_list() -> None:
    policy = parse_policy(policy_doc())
    research, _, shared = policy.spec.teams
    own, others = label_rule(policy, research, "projects"), label_rule(policy, shared, "projects")
    assert (own.allowed, others.claimed) == (
        ("scaling-laws",), {"scaling-laws": "research", "serving-prod": "business"})
    rule = label_rule(policy, shared, "cost_centers")
    assert (rule.permits("cc-research"), rule.permits("cc-anything"), rule.permits("")) == (False, True, True)


def test_a_team_admin_may_name_its_listed_users_and_service_accounts_not_its_groups() -> None:
    assert member_label_values(_team(policy_doc(), "research")) == ["alice_at_example.com", "rita"]
    assert member_label_values(_team(policy_doc(), "business")) == ["bob", "system.serviceaccount.serving.ci"]


INVALID: list[tuple[str, Any, str, str]] = [
    ("a member in two teams",
     lambda d: d["spec"]["teams"][1]["members"].append({"kind": "User", "name": "alice@example.com"}),
     "spec.teams[1].members[2]", "User alice@example.com is already a member of team research"),
    ("an admin of one team and a member of another",
     lambda d: d["spec"]["teams"][1].update(admins=[{"kind": "Group", "name": "oidc:ml-research"}]),
     "spec.teams[1].admins[0]", "Group oidc:ml-research is already a member of team research"),
    ("a service account named as a user too",
     lambda d: d["spec"]["teams"][0]["members"].append(
         {"kind": "User", "name": "system:serviceaccount:serving:ci"}),
     "spec.teams[1].members[1]", "already a member of team research"),
    ("a class both allowed and forbidden",
     lambda d: d["spec"]["teams"][1].update(forbiddenPriorityClasses=["business"]),
     "spec.teams[1].forbiddenPriorityClasses[0]", "both allowed and forbidden to team business"),
    ("an undeclared class",
     lambda d: d["spec"]["teams"][0].update(priorityClasses=["gold"]),
     "spec.teams[0].priorityClasses[0]", "not declared in spec.priorityClasses"),
    ("a service account without its namespace",
     lambda d: d["spec"]["teams"][1]["members"][1].pop("namespace"),
     "spec.teams[1].members[1].namespace", "a ServiceAccount needs its namespace"),
    ("a user with a namespace",
     lambda d: d["spec"]["teams"][1]["members"][0].update(namespace="serving"),
     "spec.teams[1].members[0].namespace", "only a ServiceAccount has a namespace"),
    ("a quote in a user name",
     lambda d: d["spec"]["teams"][0]["members"].append({"kind": "User", "name": 'a"b'}),
     "spec.teams[0].members[2].name", "should match"),
    ("a project listed twice",
     lambda d: d["spec"]["teams"][0].update(projects=["x", "x"]),
     "spec.teams[0].projects", "listed twice"),
]


@pytest.mark.parametrize(("edit", "field", "message"), [row[1:] for row in INVALID],
                         ids=[row[0] for row in INVALID])
def test_qm_policy_check_rejects_a_broken_tenancy_rule_naming_the_field(edit: Any, field: str,
                                                                         message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_policy(edited(policy_doc(), edit))
    line = info.value.one_line()
    assert field in line and message in line, line


def test_without_spec_tenancy_nothing_renders_and_check_warns_about_the_unenforced_fields() -> None:
    doc = policy_doc()
    del doc["spec"]["tenancy"]
    policy = parse_policy(doc)
    assert render_tenancy(policy) == []
    assert tenancy_warnings(policy) == [
        "teams set admins, costCenters, members, priorityClasses, projects but spec.tenancy is not set: "
        "nothing renders or enforces them (add spec.tenancy: {} to enforce them, docs/tenancy.md)"]
    assert tenancy_warnings(parse_policy(policy_doc())) == []


def test_spec_tenancy_renders_a_rule_per_team_one_outside_the_teams_and_a_role_binding_per_member_namespace(
) -> None:
    objects = render_tenancy(parse_policy(policy_doc()), other_namespaces=["elsewhere"])
    keys = [object_key(o) for o in objects]
    vap, vapb, rb = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "RoleBinding"
    assert keys == [
        *(ObjectKey(vap, "", f"queue-manager.gpu.{n}") for n in ("business", "outside-teams", "research",
                                                                  "shared")),
        *(ObjectKey(vapb, "", f"queue-manager.gpu.{n}") for n in ("business", "outside-teams", "research",
                                                                   "shared")),
        ObjectKey(rb, "research", "queue-manager.gpu"), ObjectKey(rb, "research-2", "queue-manager.gpu"),
        ObjectKey(rb, "serving", "queue-manager.gpu"),
    ]
    by_key = {object_key(o): o for o in objects}
    selectors = {k.name: by_key[k]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
                 for k in keys if k.kind == vapb}
    assert selectors == {
        "queue-manager.gpu.business": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                        "values": ["serving"]}],
        "queue-manager.gpu.outside-teams": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                             "values": ["elsewhere", "research", "research-2", "serving",
                                                        "shared"]}],
        "queue-manager.gpu.research": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                        "values": ["research", "research-2"]}],
        "queue-manager.gpu.shared": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                      "values": ["shared"]}],
    }
    binding = by_key[ObjectKey(rb, "serving", "queue-manager.gpu")]
    assert (binding["roleRef"], binding["subjects"]) == (
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MEMBER_CLUSTER_ROLE},
        [{"kind": "ServiceAccount", "name": "ci", "namespace": "serving"},
         {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}])
    exempt = by_key[ObjectKey(vap, "", "queue-manager.gpu.research")]["spec"]["matchConditions"]
    kueue, operator = ("system:serviceaccount:kueue-system:kueue-controller-manager",
                       "system:serviceaccount:queue-manager:queue-manager")
    assert exempt == [{"name": "not-exempt", "expression":
                       f'!(request.userInfo.username in ["{kueue}", "{operator}"]) && '
                       '!request.userInfo.groups.exists(g, g in ["system:masters"])'}]


def test_each_denial_message_names_the_team_and_the_allowed_set() -> None:
    objects = render_tenancy(parse_policy(policy_doc()))
    research = next(o for o in objects if o["metadata"]["name"] == "queue-manager.gpu.research"
                    and o["kind"] == "ValidatingAdmissionPolicy")
    messages = [v["messageExpression"] for v in research["spec"]["validations"]]
    assert all("team research" in m for m in messages)
    for allowed in ("[research]", "[batch, experiment]", "[scaling-laws]", "[cc-research]",
                    "[alice_at_example.com, rita]"):
        assert any(allowed in m for m in messages), allowed
    shared = next(o for o in objects if o["metadata"]["name"] == "queue-manager.gpu.shared"
                  and o["kind"] == "ValidatingAdmissionPolicy")
    assert any("no other team lists (not [scaling-laws, serving-prod])" in v["messageExpression"]
               for v in shared["spec"]["validations"])


def test_the_rendering_does_not_depend_on_the_order_of_teams_members_or_lists() -> None:
    doc = policy_doc()
    expected = render_tenancy(parse_policy(doc))
    rng = random.Random(7)
    for _ in range(5):
        shuffled = edited(doc, lambda d: rng.shuffle(d["spec"]["teams"]))
        for team in shuffled["spec"]["teams"]:
            for key in ("members", "namespaces", "projects", "priorityClasses"):
                if key in team:
                    rng.shuffle(team[key])
        assert render_tenancy(parse_policy(shuffled)) == expected


def test_namespaces_outside_teams_allow_renders_no_outside_rule() -> None:
    objects = render_tenancy(parse_policy(policy_doc(tenancy={"namespacesOutsideTeams": "Allow"})))
    assert not any("outside-teams" in o["metadata"]["name"] for o in objects)


@pytest.mark.parametrize(("what", "generate"), [("stamps", stamp_manifests),
                                                 ("member-role", lambda: [member_cluster_role()])],
                         ids=["stamps", "member-role"])
def test_the_committed_tenancy_manifests_are_the_generated_ones(what: str, generate: Any) -> None:
    path = TENANCY / ("stamps.yaml" if what == "stamps" else "team-member-clusterrole.yaml")
    expected = HEADER.format(what=what) + yaml.safe_dump_all(generate(), sort_keys=False, width=110)
    assert path.read_text() == expected, f"regenerate: python -m fairshare.policy.tenancy {what} > {path}"


def test_members_may_write_only_the_batch_kinds_and_read_their_queues_pods_and_events() -> None:
    rules = member_cluster_role()["rules"]
    writes = sorted(r for rule in rules if "create" in rule["verbs"] for r in rule["resources"])
    assert writes == ["appwrappers", "cronjobs", "jobs", "jobsets", "mpijobs", "rayclusters", "rayjobs",
                      "rayservices", "trainjobs"]
    reads = sorted(r for rule in rules if rule["verbs"] == ["get", "list", "watch"]
                   for r in rule["resources"])
    assert reads == ["events", "localqueues", "pods", "pods/log", "workloads"]
