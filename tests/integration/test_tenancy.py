"""Tenancy on the real kube-apiserver v1.36 with real identities (client certificates minted by the
control plane's CA): the operator, bound only to the shipped ClusterRole, renders a policy's spec.tenancy
(admission rules and RoleBindings); manifests/tenancy stamps who submitted each Job and who edited the policy;
Kueue copies the stamp to the Workload (labelKeysToCopy) and the ledger bills each job's GPU-hours to that
person.

The matrix below is the issue's: each row is one request by one identity, and whether the API server allows
it, denies it by an admission rule (with the words the denial must carry) or by RBAC. docs/tenancy.md lists
it.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from tests.integration.jobs import gpu_job
from tests.integration.ledger_operator import KUEUE, QP, ledger_admin, ledger_plane, qm_json, workload_of
from tests.integration.test_operator_harness import OperatorProcess

__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures (the control plane with KWOK nodes, labels copied)

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"
GPU = "nvidia.com/gpu"
ADMISSION = ("admissionregistration.k8s.io", "v1")
MERGE = "application/merge-patch+json"


@dataclass
class World:
    """The cluster the matrix runs in: names (suffixed), and one API client per identity."""

    s: str
    research: str
    serving: str
    lonely: str
    clients: dict[str, k8s.ApiClient]
    users: dict[str, str]  # identity -> user name
    operator: OperatorProcess
    policy: str
    kubeconfig: Path  # the cluster admin's
    created: dict[str, dict[str, Any]] = field(default_factory=dict)  # alice's own job and its Workload

    @property
    def names(self) -> dict[str, str]:
        s = self.s
        return {
            "s": s,
            "research": self.research,
            "serving": self.serving,
            "lonely": self.lonely,
            "rq": f"research-{s}",
            "bq": f"business-{s}",
            "business": f"business-{s}",
            "experiment": f"experiment-{s}",
            **{f"user_{k}": v for k, v in self.users.items()},
        }


def _kubectl(kubeconfig: Path, *args: str) -> None:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)}: {done.stderr.strip()}", pytrace=False)


def _policy(s: str, research: str, serving: str, users: dict[str, str]) -> dict[str, Any]:
    flavor = f"kwok-{s}"
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}

    def quotas(gpus: int) -> list[dict[str, Any]]:
        return [
            {"flavor": flavor, "resources": [{"name": GPU, "nominal": gpus}, {"name": "cpu", "nominal": 64}]}
        ]

    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": f"tenancy-{s}"},
        "spec": {
            "tenancy": {},
            "flavors": [{"name": flavor, "nodeLabels": {"type": "kwok"}, "pricePerUnitHour": {GPU: "2.5"}}],
            "priorityClasses": [
                {"name": f"business-{s}", "value": 1000000},
                {"name": f"experiment-{s}", "value": 100, "experiment": True},
            ],
            "preemption": {"protectedClasses": [f"business-{s}"]},
            "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "drain": False}},
            "ledger": {"labels": ["queuemanager.dev/user"]},
            "teams": [
                {
                    "name": f"research-{s}",
                    "namespaces": [research],
                    "cohort": f"org-{s}",
                    "preemption": never,
                    "members": [
                        {"kind": "User", "name": users["alice"]},
                        {"kind": "Group", "name": f"ml-research-{s}"},
                    ],
                    "admins": [{"kind": "User", "name": users["rita"]}],
                    "projects": ["scaling-laws"],
                    "costCenters": ["cc-research"],
                    "quotas": quotas(8),
                },
                {
                    "name": f"business-{s}",
                    "namespaces": [serving],
                    "cohort": f"org-{s}",
                    "preemption": never,
                    "members": [
                        {"kind": "User", "name": users["bob"]},
                        {"kind": "ServiceAccount", "name": "ci", "namespace": serving},
                    ],
                    "priorityClasses": [f"business-{s}", f"experiment-{s}"],
                    "projects": ["serving-prod"],
                    "costCenters": ["cc-business"],
                    "quotas": quotas(8),
                },
            ],
        },
    }


def _message(err: ApiException) -> str:
    body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
    with contextlib.suppress(ValueError):
        return str(json.loads(body).get("message", body))
    return body


def _create(api: k8s.ApiClient, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    group, _, version = str(body["apiVersion"]).rpartition("/")
    plural = {"Job": "jobs", "CronJob": "cronjobs", "Pod": "pods"}[str(body["kind"])]
    ns = body["metadata"]["namespace"]
    kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    if not group:
        return dict(
            k8s.ApiClient.sanitize_for_serialization(
                api, k8s.CoreV1Api(api).create_namespaced_pod(ns, body, **kwargs)
            )
        )
    return dict(
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(group, version, ns, plural, body, **kwargs)
    )


def _job(
    w: World,
    ns: str,
    *,
    queue: str | None = "default",
    klass: str | None = None,
    labels: dict[str, str] | None = None,
    pod_class: str | None = None,
    seconds: float = 600,
    name: str | None = None,
) -> dict[str, Any]:
    n = w.names
    team_queue = n["bq"] if ns == w.serving else n["rq"]
    body = gpu_job(
        name or f"j-{uuid.uuid4().hex[:8]}",
        ns,
        team_queue if queue == "default" else (queue or ""),
        seconds=seconds,
        priority_class=klass,
        labels=None,
    )
    body["metadata"]["labels"].update(labels or {})
    if queue is None:
        del body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    if pod_class is not None:
        body["spec"]["template"]["spec"]["priorityClassName"] = pod_class
    return body


def _cronjob(w: World, klass: str) -> dict[str, Any]:
    job = _job(w, w.research, klass=klass)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": f"c-{uuid.uuid4().hex[:8]}", "namespace": w.research},
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "jobTemplate": {"metadata": {"labels": job["metadata"]["labels"]}, "spec": job["spec"]},
        },
    }


def _patch_labels(
    api: k8s.ApiClient,
    group: str,
    version: str,
    plural: str,
    ns: str,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return dict(
        k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
            group, version, ns, plural, name, {"metadata": meta}, _content_type=MERGE
        )
    )


@pytest.fixture(scope="module")
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, wait_until: Callable[..., Any]
) -> Iterator[World]:
    plane: ControlPlane = request.getfixturevalue("ledger_plane")
    admin, operator_kubeconfig = request.getfixturevalue("ledger_admin")
    s = uuid.uuid4().hex[:6]
    research, serving, lonely = f"research-{s}", f"serving-{s}", f"lonely-{s}"
    core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
    for ns in (research, serving, lonely):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    _kubectl(
        plane.kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "manifests/tenancy")
    )
    users = {
        "alice": f"alice-{s}@example.com",
        "carol": f"carol-{s}",
        "rita": f"rita-{s}",
        "bob": f"bob-{s}",
        "ci": f"system:serviceaccount:{serving}:ci",
        "dave": f"dave-{s}",
        "wendy": f"wendy-{s}",
        "pat": f"pat-{s}",
        "sam": f"sam-{s}",
        "operator": "system:serviceaccount:queue-manager:queue-manager",
    }
    groups = {
        "carol": [f"ml-research-{s}"],
        "ci": ["system:serviceaccounts", f"system:serviceaccounts:{serving}"],
    }
    # Outside the policy, by the cluster admin: dave may submit in a namespace of no team (the member role
    # there); wendy may patch Workloads (as the operator may); pat and sam edit QuotaPolicies.
    rbac.create_namespaced_role_binding(
        lonely,
        {
            "metadata": {"name": "dave"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "queue-manager-team-member",
            },
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": users["dave"]}],
        },
    )
    roles = {
        f"workload-patcher-{s}": (
            [
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["workloads"],
                    "verbs": ["get", "list", "patch"],
                }
            ],
            users["wendy"],
        ),
        f"policy-editor-{s}": (
            [
                {
                    "apiGroups": ["queuemanager.dev"],
                    "resources": ["quotapolicies"],
                    "verbs": ["get", "list", "create", "patch", "update"],
                }
            ],
            None,
        ),
    }
    for name, (rules, user) in roles.items():
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        subjects = [user] if user else [users["pat"], users["sam"]]
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u} for u in subjects
                ],
            }
        )
    clients = {
        who: k8s_config.new_client_from_config(
            config_file=str(plane.mint_kubeconfig(user, groups.get(who, [])))
        )
        for who, user in users.items()
        if who != "operator"
    }
    clients["operator"] = k8s_config.new_client_from_config(config_file=str(operator_kubeconfig))
    clients["admin"] = admin
    operator = OperatorProcess(operator_kubeconfig, tmp_path_factory.mktemp("tenancy")).start()
    body = _policy(s, research, serving, users)
    name = body["metadata"]["name"]
    # New admission policies (the stamps) take seconds before the API server admits the kinds they match:
    # until then it answers ServiceUnavailable (docs/operator.md's walk-through retries the same way).
    def created() -> bool:
        try:
            k8s.CustomObjectsApi(clients["pat"]).create_cluster_custom_object(*QP[:2], QP[2], body)
        except ApiException as err:
            if err.status != 503:
                raise
            return False
        return True

    wait_until(created, timeout=60, what="the stamps to admit QuotaPolicies")
    w = World(s, research, serving, lonely, clients, users, operator, name, plane.kubeconfig)
    try:
        # The rules are in force once the API server's admission plugin has them: a Job of alice's asking
        # for the business class is denied, and one within her team's rules is allowed (dry run).
        def enforced() -> bool:
            try:
                _create(clients["alice"], _job(w, research, klass=f"business-{s}"), dry_run=True)
            except ApiException as err:
                return err.status == 403 and "ValidatingAdmissionPolicy" in _message(err)
            return False

        def admitted() -> bool:
            try:
                _create(clients["alice"], _job(w, research, klass=f"experiment-{s}"), dry_run=True)
            except ApiException:
                return False
            return True

        wait_until(enforced, timeout=60, what="the tenancy rules to be enforced")
        wait_until(admitted, timeout=60, what="alice's RoleBinding to be in force")
        job = _create(
            clients["alice"], _job(w, research, klass=f"experiment-{s}", labels={"project": "scaling-laws"})
        )
        w.created["job"] = job
        w.created["workload"] = wait_until(
            lambda: workload_of(admin, research, job["metadata"]["name"]), timeout=30, what="alice's Workload"
        )
        yield w
    finally:
        operator.stop()
        custom = k8s.CustomObjectsApi(admin)
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(*QP[:2], QP[2], name)
        # The cluster-scoped objects go, so that the control plane's next users meet none of them.
        selector = f"queuemanager.dev/policy={name}"
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            for item in custom.list_cluster_custom_object(*ADMISSION, plural, label_selector=selector)[
                "items"
            ]:
                with contextlib.suppress(ApiException):
                    custom.delete_cluster_custom_object(*ADMISSION, plural, item["metadata"]["name"])
        subprocess.run(
            [
                str(KUBECTL),
                "--kubeconfig",
                str(plane.kubeconfig),
                "delete",
                "--ignore-not-found",
                "-k",
                str(ROOT / "manifests/tenancy"),
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        for name_ in roles:
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role_binding(name_)
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role(name_)
        for ns in (research, serving, lonely):
            with contextlib.suppress(ApiException):
                core.delete_namespace(ns)
        for who, c in clients.items():
            if who != "admin":
                c.close()


# --------------------------------------------------------------------------------------------- the matrix


@dataclass(frozen=True)
class Case:
    """`who` does `act`; the API server answers `expect`: allowed, denied (an admission rule; its message
    carries every fragment of `says`, formatted with World.names) or forbidden (RBAC). For an allowed
    create, `stamp` is the (queuemanager.dev/user label, queuemanager.dev/submitted-by) it must carry."""

    sentence: str
    who: str
    act: Callable[[World, k8s.ApiClient], dict[str, Any]]
    expect: str
    says: tuple[str, ...] = ()
    stamp: tuple[str, str] | None = None


def _label_own_job(
    labels: dict[str, str], annotations: dict[str, str] | None = None
) -> Callable[[World, k8s.ApiClient], dict[str, Any]]:
    def act(w: World, api: k8s.ApiClient) -> dict[str, Any]:
        meta = w.created["job"]["metadata"]
        return _patch_labels(
            api,
            "batch",
            "v1",
            "jobs",
            meta["namespace"],
            meta["name"],
            {k: v.format(**w.names) for k, v in labels.items()},
            annotations,
        )

    return act


def _label_workload(labels: dict[str, str]) -> Callable[[World, k8s.ApiClient], dict[str, Any]]:
    def act(w: World, api: k8s.ApiClient) -> dict[str, Any]:
        meta = w.created["workload"]["metadata"]
        return _patch_labels(api, *KUEUE, "workloads", meta["namespace"], meta["name"], labels)

    return act


def _pod(w: World, api: k8s.ApiClient) -> dict[str, Any]:
    return _create(
        api,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}", "namespace": w.research},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/x"}]},
        },
    )


ALICE_LABEL = "alice-{s}_at_example.com"
MATRIX = [
    Case(
        "a member submits to her team's LocalQueue with its class, project and cost-center",
        "alice",
        lambda w, a: _create(
            a,
            _job(
                w,
                w.research,
                klass=w.names["experiment"],
                labels={"project": "scaling-laws", "cost-center": "cc-research"},
            ),
        ),
        "allowed",
        stamp=(ALICE_LABEL, "{user_alice}"),
    ),
    Case(
        "a member names another team's LocalQueue",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, queue=w.names["bq"])),
        "denied",
        ("team research-{s}", "names LocalQueue business-{s}", "may use only LocalQueue [research-{s}]"),
    ),
    Case(
        "a member submits in another team's namespace",
        "alice",
        lambda w, a: _create(a, _job(w, w.serving)),
        "forbidden",
        ("cannot create resource",),
    ),
    Case(
        "a research member asks for the business class",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, klass=w.names["business"])),
        "denied",
        ("asks for priority class business-{s}", "team research-{s} may use [experiment-{s}]"),
    ),
    Case(
        "a research member asks for a pod priorityClassName Kueue would take the priority from",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, pod_class="system-cluster-critical")),
        "denied",
        ("pod priorityClassName system-cluster-critical", "may use [experiment-{s}]"),
    ),
    Case(
        "a research member's CronJob asks for the business class for its Jobs",
        "alice",
        lambda w, a: _create(a, _cronjob(w, w.names["business"])),
        "denied",
        ("CronJob", "asks for priority class business-{s}"),
    ),
    Case(
        "a member charges another team's project",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, labels={"project": "serving-prod"})),
        "denied",
        ("charges project serving-prod", "team research-{s} may charge [scaling-laws]"),
    ),
    Case(
        "a member charges another team's cost-center",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, labels={"cost-center": "cc-business"})),
        "denied",
        ("charges cost-center cc-business", "may charge [cc-research]"),
    ),
    Case(
        "a member forges another person's user label",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, labels={"queuemanager.dev/user": f"bob-{w.s}"})),
        "denied",
        ("queuemanager.dev/user: bob-{s}", "submitted by {user_alice}", "only an admin of team research-{s}"),
    ),
    Case(
        "a member writes her own user label",
        "alice",
        lambda w, a: _create(
            a, _job(w, w.research, labels={"queuemanager.dev/user": ALICE_LABEL.format(s=w.s)})
        ),
        "allowed",
        stamp=(ALICE_LABEL, "{user_alice}"),
    ),
    Case(
        "a member's Job names no LocalQueue (it would run outside Kueue)",
        "alice",
        lambda w, a: _create(a, _job(w, w.research, queue=None)),
        "denied",
        ("names no LocalQueue", "must name [research-{s}]"),
    ),
    Case(
        "a member relabels her admitted Job with the business class",
        "alice",
        _label_own_job({"kueue.x-k8s.io/priority-class": "{business}"}),
        "denied",
        ("asks for priority class business-{s}",),
    ),
    Case(
        "a member relabels her Job as someone else's",
        "alice",
        _label_own_job({"queuemanager.dev/user": "bob-{s}"}),
        "denied",
        ("queuemanager.dev/user: bob-{s}",),
    ),
    Case(
        "a member rewrites the submitter stamp",
        "alice",
        _label_own_job({}, {"queuemanager.dev/submitted-by": "bob"}),
        "denied",
        ("queuemanager.dev/submitted-by is stamped at creation",),
    ),
    Case(
        "a member creates a bare Pod (outside Kueue)", "alice", _pod, "forbidden", ("cannot create resource",)
    ),
    Case(
        "a member through her SSO group submits to the team's LocalQueue",
        "carol",
        lambda w, a: _create(a, _job(w, w.research)),
        "allowed",
        stamp=("carol-{s}", "carol-{s}"),
    ),
    Case(
        "a team admin attributes a Job to a member of the team",
        "rita",
        lambda w, a: _create(
            a, _job(w, w.research, labels={"queuemanager.dev/user": ALICE_LABEL.format(s=w.s)})
        ),
        "allowed",
        stamp=(ALICE_LABEL, "rita-{s}"),
    ),
    Case(
        "a team admin attributes a Job to someone outside the team",
        "rita",
        lambda w, a: _create(a, _job(w, w.research, labels={"queuemanager.dev/user": f"bob-{w.s}"})),
        "denied",
        ("queuemanager.dev/user: bob-{s}", "may name another member: [" + ALICE_LABEL + ", rita-{s}]"),
    ),
    Case(
        "a team admin charges another team's project",
        "rita",
        lambda w, a: _create(a, _job(w, w.research, labels={"project": "serving-prod"})),
        "denied",
        ("charges project serving-prod",),
    ),
    Case(
        "a team admin asks for the business class",
        "rita",
        lambda w, a: _create(a, _job(w, w.research, klass=w.names["business"])),
        "denied",
        ("asks for priority class business-{s}",),
    ),
    Case(
        "a business member uses the business class and project",
        "bob",
        lambda w, a: _create(
            a, _job(w, w.serving, klass=w.names["business"], labels={"project": "serving-prod"})
        ),
        "allowed",
        stamp=("bob-{s}", "bob-{s}"),
    ),
    Case(
        "a business member submits in research's namespace",
        "bob",
        lambda w, a: _create(a, _job(w, w.research)),
        "forbidden",
        ("cannot create resource",),
    ),
    Case(
        "a member ServiceAccount submits (stamped by its user name)",
        "ci",
        lambda w, a: _create(a, _job(w, w.serving, klass=w.names["business"])),
        "allowed",
        stamp=("system.serviceaccount.{serving}.ci", "system:serviceaccount:{serving}:ci"),
    ),
    Case(
        "a namespace in no team submits to a LocalQueue",
        "dave",
        lambda w, a: _create(a, _job(w, w.lonely, queue=w.names["rq"])),
        "denied",
        ("names LocalQueue research-{s}", "namespace {lonely} is in no team", "[] (none)"),
    ),
    Case(
        "a namespace in no team runs a Job outside Kueue",
        "dave",
        lambda w, a: _create(a, _job(w, w.lonely, queue=None)),
        "allowed",
        stamp=("dave-{s}", "dave-{s}"),
    ),
    Case(
        "the operator's own Workload edit is exempt",
        "operator",
        _label_workload({"project": "serving-prod"}),
        "allowed",
    ),
    Case(
        "the same Workload edit by another identity with the same RBAC",
        "wendy",
        _label_workload({"cost-center": "cc-business"}),
        "denied",
        ("charges cost-center cc-business",),
    ),
    Case(
        "a cluster admin is unaffected (another team's queue, the business class, a forged user)",
        "admin",
        lambda w, a: _create(
            a,
            _job(
                w,
                w.research,
                queue=w.names["bq"],
                klass=w.names["business"],
                labels={"queuemanager.dev/user": f"bob-{w.s}"},
            ),
        ),
        "allowed",
        stamp=("bob-{s}", "qm-admin"),
    ),
    Case(
        "a cluster admin submits in a namespace of no team",
        "admin",
        lambda w, a: _create(a, _job(w, w.lonely, queue=w.names["rq"])),
        "allowed",
        stamp=("qm-admin", "qm-admin"),
    ),
]


@pytest.mark.parametrize("case", MATRIX, ids=[c.sentence for c in MATRIX])
def test_the_api_server_enforces_the_tenancy_matrix(world: World, case: Case) -> None:
    names = world.names
    try:
        out = case.act(world, world.clients[case.who])
        outcome, message = "allowed", ""
    except ApiException as err:
        message = _message(err)
        if err.status != 403:
            raise
        outcome = "denied" if "ValidatingAdmissionPolicy" in message else "forbidden"
    assert outcome == case.expect, message
    assert [f for f in (x.format(**names) for x in case.says) if f not in message] == [], message
    if case.stamp is not None:
        meta = out["metadata"]
        assert (
            (meta.get("labels") or {}).get("queuemanager.dev/user"),
            (meta.get("annotations") or {}).get("queuemanager.dev/submitted-by"),
        ) == tuple(x.format(**names) for x in case.stamp)


def test_the_matrix_has_every_case_the_issue_asks_for() -> None:
    outcomes = {c.expect for c in MATRIX}
    assert len(MATRIX) >= 20 and outcomes == {"allowed", "denied", "forbidden"}


# ------------------------------------------------------------------------------------------- what it renders


def test_the_operator_renders_the_rules_and_role_bindings_with_only_its_shipped_rbac(world: World) -> None:
    admin = k8s.CustomObjectsApi(world.clients["admin"])
    selector = f"queuemanager.dev/policy={world.policy}"
    names = {
        plural: sorted(
            i["metadata"]["name"]
            for i in admin.list_cluster_custom_object(*ADMISSION, plural, label_selector=selector)["items"]
        )
        for plural in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
    }
    p, s = world.policy, world.s
    expected = [
        f"queue-manager.{p}.business-{s}",
        f"queue-manager.{p}.outside-teams",
        f"queue-manager.{p}.research-{s}",
    ]
    assert names == {"validatingadmissionpolicies": expected, "validatingadmissionpolicybindings": expected}
    rbac = k8s.RbacAuthorizationV1Api(world.clients["admin"])
    bindings = {
        ns: rbac.list_namespaced_role_binding(ns, label_selector=selector).items
        for ns in (world.research, world.serving)
    }
    subjects = {
        ns: sorted((x.kind, x.name) for b in items for x in b.subjects) for ns, items in bindings.items()
    }
    assert subjects == {
        world.research: [
            ("Group", f"ml-research-{s}"),
            ("User", world.users["alice"]),
            ("User", world.users["rita"]),
        ],
        world.serving: [("ServiceAccount", "ci"), ("User", world.users["bob"])],
    }
    assert all(b.role_ref.name == "queue-manager-team-member" for items in bindings.values() for b in items)
    # Nothing failed: the operator created all of it as the ServiceAccount bound to the shipped ClusterRole.
    assert not [r for r in world.operator.log_records() if r.get("levelname") == "ERROR"], (
        world.operator.log_text()[-3000:]
    )


def test_a_hand_edit_that_would_turn_a_rule_off_is_reverted(world: World,
                                                             wait_until: Callable[..., Any]) -> None:
    admin = k8s.CustomObjectsApi(world.clients["admin"])
    name = f"queue-manager.{world.policy}.research-{world.s}"
    plural = "validatingadmissionpolicybindings"
    admin.patch_cluster_custom_object(*ADMISSION, plural, name, {"spec": {"validationActions": ["Warn"]}},
                                      _content_type=MERGE)
    wait_until(lambda: admin.get_cluster_custom_object(*ADMISSION, plural, name)["spec"]["validationActions"]
               == ["Deny"], timeout=30, what="the operator to revert the binding to Deny")


def test_qm_plan_shows_the_rendered_rule_a_policy_edit_changes(world: World, tmp_path: Path) -> None:
    admin = k8s.CustomObjectsApi(world.clients["admin"])
    live = admin.get_cluster_custom_object(*QP[:2], QP[2], world.policy)
    doc = {"apiVersion": live["apiVersion"], "kind": live["kind"], "metadata": {"name": world.policy},
           "spec": live["spec"]}
    doc["spec"]["teams"][0]["projects"] = ["scaling-laws", "agents"]
    path = tmp_path / "policy.yaml"
    path.write_text(json.dumps(doc))
    done = subprocess.run([sys.executable, "-m", "qm", "plan", str(path), "--kubeconfig",
                           str(world.kubeconfig), "--no-ledger", "--replications", "2", "--horizon", "10m",
                           "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    # qm plan's diff: a header line per object ("ValidatingAdmissionPolicy NAME: update"), then one indented
    # line per changed field (qm/planning/semantic.py).
    rule = f"ValidatingAdmissionPolicy queue-manager.{world.policy}."
    now, _, later = done.stdout.partition("== transition plan")
    diffs = [block for block in re.split(r"\n(?=\S)", now) if block.startswith(rule)]
    assert rule not in later  # once the transitions are done, the rules are what they are now
    assert [b.split(":")[0].rsplit(".", 1)[-1] for b in diffs] == [f"research-{world.s}"], done.stdout[-3000:]
    assert "agents" in diffs[0] and "scaling-laws" in diffs[0]


# --------------------------------------------------------------------------------------------- the ledger


def test_the_ledger_bills_each_job_to_the_person_who_submitted_it(
    world: World, wait_until: Callable[..., Any]
) -> None:
    admin = world.clients["admin"]
    runs = {"alice": (world.research, 2), "bob": (world.serving, 1)}
    names = {}
    for who, (ns, _) in runs.items():
        body = _job(world, ns, seconds=4, name=f"bill-{who}-{world.s}")
        body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {GPU: str(runs[who][1]), "cpu": "1"},
            "limits": {GPU: str(runs[who][1])},
        }
        names[who] = _create(world.clients[who], body)["metadata"]["name"]

    def finished() -> bool:
        done = []
        for who, (ns, _) in runs.items():
            wl = workload_of(admin, ns, names[who]) or {}
            done.append(
                any(
                    c.get("type") == "Finished" and c.get("status") == "True"
                    for c in (wl.get("status") or {}).get("conditions") or []
                )
            )
        return all(done)

    wait_until(finished, timeout=120, what="both Jobs to run on KWOK and finish")
    ledger = str(world.operator.logdir / "ledger.db")
    expected = {world.users["alice"].replace("@", "_at_"): "alice", world.users["bob"]: "bob"}

    def billed() -> dict[str, float] | None:
        rows = qm_json(
            "usage", "--db", ledger, "--since", "1h", "--by", "user", "--where", f"resource={GPU}"
        )["rows"]
        found = {r["user"]: float(r["useful_h"]) for r in rows if r["user"] in expected}
        return found if len(found) == 2 and all(v > 0 for v in found.values()) else None

    got = wait_until(billed, timeout=60, what="qm usage --by user to show both people")
    # Each used its job's GPUs for about 4 s (KWOK's completion delay): alice 2 GPUs, bob 1.
    alice, bob = got[world.users["alice"].replace("@", "_at_")], got[world.users["bob"]]
    assert 2 * 3.5 / 3600 <= alice <= 2 * 30 / 3600 and 3.5 / 3600 <= bob <= 30 / 3600, got


def test_a_policy_edit_is_audited_with_the_person_who_made_it(
    world: World, wait_until: Callable[..., Any]
) -> None:
    custom = k8s.CustomObjectsApi(world.clients["sam"])
    body = custom.get_cluster_custom_object(*QP[:2], QP[2], world.policy)
    assert body["metadata"]["annotations"]["queuemanager.dev/edited-by"] == world.users["pat"]
    teams = body["spec"]["teams"]
    teams[0]["quotas"][0]["resources"][0]["nominal"] = 7  # research: 8 -> 7 GPUs, a transition
    custom.patch_cluster_custom_object(
        *QP[:2],
        QP[2],
        world.policy,
        {"spec": {"teams": teams}},
        _content_type=MERGE,
        field_manager="kubectl-client-side-apply",
    )
    edited = custom.get_cluster_custom_object(*QP[:2], QP[2], world.policy)
    assert edited["metadata"]["annotations"]["queuemanager.dev/edited-by"] == world.users["sam"]
    # A forged editor is put back at admission (the spec did not change).
    with contextlib.suppress(ApiException):
        custom.patch_cluster_custom_object(
            *QP[:2],
            QP[2],
            world.policy,
            {"metadata": {"annotations": {"queuemanager.dev/edited-by": "someone-else"}}},
            _content_type=MERGE,
        )
    again = custom.get_cluster_custom_object(*QP[:2], QP[2], world.policy)
    assert again["metadata"]["annotations"]["queuemanager.dev/edited-by"] == world.users["sam"]
    ledger = str(world.operator.logdir / "ledger.db")

    def started() -> list[dict[str, Any]]:
        rows = qm_json("audit", "--db", ledger, "--since", "1h", "--action", "transition-started")["rows"]
        return [r for r in rows if r["team"] == f"research-{world.s}"]

    rows = wait_until(started, timeout=60, what="the transition's audit row")
    assert [r["editor"] for r in rows] == [world.users["sam"]]
