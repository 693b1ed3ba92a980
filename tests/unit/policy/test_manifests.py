"""The shipped manifests: kustomize renders the install, least-privilege RBAC, hardened Deployment, alerts and
dashboard on the operator's real metric names."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.policy import load_policy_file, object_key, render
from fairshare.policy.tenancy import MEMBER_CLUSTER_ROLE
from qm.cli import build_parser
from queue_manager.metrics import METRIC_NAMES

from .helpers import REPO

MANIFESTS = REPO / "manifests"
KUBECTL = Path(sys.executable).parent / "kubectl"


def _kustomize(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run([str(KUBECTL), "kustomize", str(path)], check=True, capture_output=True, text=True,
                         timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _docs(relative: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / relative).read_text()) if d]


def test_kubectl_apply_k_installs_the_crd_rbac_and_the_operator() -> None:
    objects = _kustomize(MANIFESTS)
    keys = sorted((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects)
    assert keys == [
        ("ClusterRole", "", "queue-manager"),
        ("ClusterRole", "", "queue-manager-planner"),
        ("ClusterRole", "", "queue-manager-team-member"),
        ("ClusterRoleBinding", "", "queue-manager"),
        ("CustomResourceDefinition", "", "quotapolicies.queuemanager.dev"),
        ("Deployment", "queue-manager", "queue-manager"),
        ("MutatingAdmissionPolicy", "", "queue-manager-policy-editor"),
        ("MutatingAdmissionPolicy", "", "queue-manager-submitter"),
        ("MutatingAdmissionPolicy", "", "queue-manager-submitter-cronjobs"),
        ("MutatingAdmissionPolicy", "", "queue-manager-submitter-pod-templates"),
        ("MutatingAdmissionPolicyBinding", "", "queue-manager-policy-editor"),
        ("MutatingAdmissionPolicyBinding", "", "queue-manager-submitter"),
        ("MutatingAdmissionPolicyBinding", "", "queue-manager-submitter-cronjobs"),
        ("MutatingAdmissionPolicyBinding", "", "queue-manager-submitter-pod-templates"),
        ("Namespace", "", "queue-manager"),
        ("Role", "queue-manager", "queue-manager-leader-election"),
        ("RoleBinding", "queue-manager", "queue-manager-leader-election"),
        ("Service", "queue-manager", "queue-manager-metrics"),
        ("ServiceAccount", "queue-manager", "queue-manager"),
        ("ValidatingAdmissionPolicy", "", "quotapolicies.queuemanager.dev"),
        ("ValidatingAdmissionPolicyBinding", "", "quotapolicies.queuemanager.dev"),
    ]


def test_leader_election_adds_only_the_lease_verbs_in_the_operator_namespace() -> None:
    role, binding = _docs("rbac/leader-election.yaml")
    (account,) = _docs("rbac/serviceaccount.yaml")
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", "queue-manager")
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "create", "update"]}]
    assert (binding["kind"], binding["roleRef"]["name"]) == ("RoleBinding", role["metadata"]["name"])
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_the_cluster_role_grants_only_the_verbs_the_operator_uses() -> None:
    (role,) = _docs("rbac/clusterrole.yaml")
    granted = sorted((g, r, tuple(rule["verbs"]), tuple(rule.get("resourceNames", ())))
                     for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"])
    owned = ("get", "list", "watch", "create", "patch", "delete")
    assert [g[:3] for g in granted if not g[3]] == sorted([
        ("", "events", ("create", "list")),
        ("", "pods", ("list",)),  # spec.idle: pods to Workloads (queue_manager/telemetry.py)
        ("kueue.x-k8s.io", "clusterqueues", owned),
        ("kueue.x-k8s.io", "cohorts", owned),
        ("kueue.x-k8s.io", "localqueues", owned),
        ("kueue.x-k8s.io", "resourceflavors", owned),
        ("kueue.x-k8s.io", "workloadpriorityclasses", owned),
        ("kueue.x-k8s.io", "workloads", ("get", "list", "watch", "patch")),
        ("kueue.x-k8s.io", "workloads/status", ("patch",)),
        ("queuemanager.dev", "quotapolicies", ("get", "list", "watch", "patch")),
        ("queuemanager.dev", "quotapolicies/status", ("get", "patch")),
        # spec.tenancy (fairshare/policy/tenancy.py): the admission rules and RoleBindings it renders.
        ("admissionregistration.k8s.io", "validatingadmissionpolicies", owned),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", owned),
        ("rbac.authorization.k8s.io", "rolebindings", owned),
    ])
    # By name only: Kueue's Configuration (whether it runs fair sharing: queue_manager/kueue_config.py), and
    # the one role those RoleBindings grant (bind, not its permissions, not escalate).
    assert [g for g in granted if g[3]] == [
        ("", "configmaps", ("get",), ("kueue-manager-config",)),
        ("rbac.authorization.k8s.io", "clusterroles", ("bind",), (MEMBER_CLUSTER_ROLE,))]
    assert not any("*" in rule["verbs"] or "*" in rule["resources"] for rule in role["rules"])
    (binding,) = _docs("rbac/clusterrolebinding.yaml")
    (account,) = _docs("rbac/serviceaccount.yaml")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_the_deployment_runs_qm_run_non_root_read_only_with_requests_and_health_probes() -> None:
    deployment = next(d for d in _docs("deployment/deployment.yaml") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == "queue-manager"
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
        assert ports[container[probe]["httpGet"]["port"]] == 8080
    # The arguments are real `qm` flags and they agree with the ports.
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.metrics_port, args.health_port) == ("run", ports["metrics"], ports["health"])
    # Two replicas, one leader; probes and scrapes reach the pod IP, so it listens on every interface.
    role, _ = _docs("rbac/leader-election.yaml")
    assert (deployment["spec"]["replicas"], args.leader_elect, args.lease_namespace, args.bind_address) == (
        2, True, role["metadata"]["namespace"], "0.0.0.0")
    # Both replicas write one ledger: PostgreSQL, its URL from the Secret; the spool on a volume the
    # read-only root filesystem lets it write.
    env = {e["name"]: e for e in container["env"]}
    assert env["QM_LEDGER_URL"]["valueFrom"]["secretKeyRef"] == {"name": "queue-manager-ledger", "key": "url"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[args.ledger_spool] in {v["name"] for v in pod["volumes"]}
    (secret,) = _docs("deployment/ledger-secret.example.yaml")
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"], list(secret["stringData"])) == (
        "queue-manager-ledger", role["metadata"]["namespace"], ["url"])


def test_the_manifests_name_the_image_make_image_builds() -> None:
    version = re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(), re.M)
    makefile = (REPO / "Makefile").read_text()
    registry = re.search(r"^REGISTRY \?= (\S+)", makefile, re.M)
    assert version and registry and "IMAGE ?= $(REGISTRY)/queue-manager:$(VERSION)" in makefile
    deployment = next(d for d in _docs("deployment/deployment.yaml") if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    rendered = next(o for o in _kustomize(MANIFESTS) if o["kind"] == "Deployment")
    (shipped,) = rendered["spec"]["template"]["spec"]["containers"]
    assert shipped["image"] == f"{registry.group(1)}/queue-manager:{version.group(1)}"
    assert container["image"].rsplit(":", 1)[0] == f"{registry.group(1)}/queue-manager"


def _metric_names(text: str) -> set[str]:
    names = set(re.findall(r"\bqm_[a-z_]+", text))
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


@pytest.mark.parametrize("relative", ["monitoring/prometheusrule.yaml", "monitoring/grafana-dashboard.json"])
def test_monitoring_uses_only_metrics_the_operator_exports(relative: str) -> None:
    used = _metric_names((MANIFESTS / relative).read_text())
    assert used
    assert used - set(METRIC_NAMES) == set()


def test_the_prometheus_rule_alerts_on_pending_work_stuck_transitions_and_spent_budget() -> None:
    (rule,) = _docs("monitoring/prometheusrule.yaml")
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"QueueManagerProtectedWorkPendingTooLong", "QueueManagerTransitionStuck",
            "QueueManagerPreemptionBudgetExhausted"} <= set(alerts)
    assert "qm_oldest_pending_workload_age_seconds" in alerts["QueueManagerProtectedWorkPendingTooLong"]
    assert "qm_transition_step_interval_seconds" in alerts["QueueManagerTransitionStuck"]
    assert "priority_class=" not in alerts["QueueManagerProtectedWorkPendingTooLong"]  # no class named
    assert "qm_preemption_budget_remaining" in alerts["QueueManagerPreemptionBudgetExhausted"]


def test_the_dashboard_has_unique_panels_and_the_monitoring_kustomization_renders() -> None:
    dashboard = json.loads((MANIFESTS / "monitoring/grafana-dashboard.json").read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["targets"] for p in dashboard["panels"] if p["type"] != "row")
    kinds = sorted(o["kind"] for o in _kustomize(MANIFESTS / "monitoring"))
    assert kinds == ["ConfigMap", "PrometheusRule"]


def test_the_kind_cluster_labels_and_taints_a_worker_like_the_sample_flavor() -> None:
    (cluster,) = _docs("kind/cluster.yaml")
    (sample,) = _docs("samples/quotapolicy.yaml")
    flavor = sample["spec"]["flavors"][0]
    gpu_workers = [n for n in cluster["nodes"] if n.get("labels") == flavor["nodeLabels"]]
    assert len(gpu_workers) == 1
    join = yaml.safe_load(gpu_workers[0]["kubeadmConfigPatches"][0])
    assert join["nodeRegistration"]["taints"] == flavor["nodeTaints"]


def test_the_image_runs_qm_as_a_non_root_user() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^USER 10001", dockerfile, re.M)
    assert 'ENTRYPOINT ["qm"]' in dockerfile


def test_the_sample_jobs_use_queues_and_classes_the_sample_policy_renders() -> None:
    rendered = {object_key(o) for o in render(load_policy_file(MANIFESTS / "samples/quotapolicy.yaml"))}
    namespaces = {d["metadata"]["name"] for d in _docs("samples/namespaces.yaml")}
    for job in _docs("samples/jobs.yaml"):
        ns, labels = job["metadata"]["namespace"], job["metadata"]["labels"]
        assert ns in namespaces
        assert ("LocalQueue", ns, labels["kueue.x-k8s.io/queue-name"]) in \
            {(k.kind, k.namespace, k.name) for k in rendered}
        assert ("WorkloadPriorityClass", "", labels["kueue.x-k8s.io/priority-class"]) in \
            {(k.kind, k.namespace, k.name) for k in rendered}
        assert job["spec"]["suspend"] is True
    kinds = sorted(o["kind"] for o in _kustomize(MANIFESTS / "samples"))
    assert kinds == ["Namespace", "Namespace", "QuotaPolicy"]
