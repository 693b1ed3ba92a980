"""The QuotaPolicy CRD on a real kube-apiserver, and the rendered objects on real Kueue.

The API server must accept the CRD and the sample, reject every invalid policy with a message naming the
field (the same policies the Python loader rejects, see tests/unit/policy/helpers.py), document the fields in
`kubectl explain`, show the printer columns, and keep/prune status fields as the operator expects. The
objects the renderer produces must be accepted by Kueue's CRDs and webhooks and become active.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.bench_teams import large_policy
from fairshare.errors import InputError
from fairshare.policy import parse_policy, render
from fairshare.policy.admission import NAME as ADMISSION
from fairshare.policy.admission import NAMESPACE_SORT_LIMIT, PROBE_DENIAL, RULES, probe_policy
from fairshare.policy.model import MAX_TEAMS
from fairshare.policy.semantics import check_spec

from ..unit.policy.helpers import INVALID, REPO, Doc, edited, policies, sample, without_tenancy

KUBECTL = Path(sys.executable).parent / "kubectl"
CRD = REPO / "manifests" / "crd" / "quotapolicies.yaml"


def _kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        [str(KUBECTL), *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
    )
    if check and done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}", pytrace=False)
    return done


@pytest.fixture(scope="module")
def crd_installed(kubeconfig: Path, wait_until: Any) -> Path:
    """The CRD and its ValidatingAdmissionPolicy (one file), both in force."""
    _kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    _kubectl(
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/quotapolicies.queuemanager.dev",
    )
    # The API server loads a new admission policy asynchronously: wait until it refuses the probe.
    wait_until(lambda: PROBE_DENIAL in _dry_run(kubeconfig, probe_policy()).stderr,
               timeout=30, what="the QuotaPolicy admission policy in force")
    return kubeconfig


def _dry_run(kubeconfig: Path, doc: Doc) -> subprocess.CompletedProcess[str]:
    return _kubectl(kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc),
                    check=False)


def _unique(doc: Doc) -> Doc:
    """The sample with a unique policy name (the control plane is shared by the session)."""
    return edited(doc, lambda d: d["metadata"].update(name=f"qp-{uuid.uuid4().hex[:8]}"))


@pytest.fixture
def applied_sample(crd_installed: Path) -> Iterator[str]:
    doc = _unique(sample())
    name = doc["metadata"]["name"]
    _kubectl(crd_installed, "apply", "-f", "-", stdin=yaml.safe_dump(doc))
    try:
        yield name
    finally:
        _kubectl(crd_installed, "delete", "quotapolicy", name, "--wait=false", check=False)


def test_the_api_server_accepts_the_sample_and_shows_the_printer_columns(
    crd_installed: Path, applied_sample: str
) -> None:
    out = _kubectl(crd_installed, "get", "qp", applied_sample).stdout.split("\n")[0].split()
    assert out == ["NAME", "TEAMS", "TRANSITIONS", "PHASE", "NEXT", "STEP", "READY", "AGE"]
    stored = json.loads(_kubectl(crd_installed, "get", "quotapolicy", applied_sample, "-o", "json").stdout)
    # What the API server stores (with its schema defaults) is still a valid policy with the same spec.
    assert parse_policy(stored).spec == parse_policy(sample()).spec


# What the API server says for each invalid edit of tests/unit/policy/helpers.py: (field, message fragment).
SERVER: dict[str, tuple[str, str]] = {
    "negative-quota": ("spec.teams[0].quotas[0].resources[0].nominal", "should match"),
    "garbage-quota": ("spec.teams[0].quotas[0].resources[0].nominal", "should match"),
    "unknown-field": ("spec.teams[0].quota", "unknown field"),
    "missing-namespaces": ("spec.teams[0].namespaces", "Required value"),
    "bad-team-name": ("spec.teams[0].name", "should match"),
    "bad-curve": ("spec.transitions.defaults.curve", "Unsupported value"),
    "bad-duration": ("spec.transitions.defaults.duration", "should match"),
    "duplicate-team": ("spec.teams[2]", "Duplicate value"),
    "shared-namespace": ("spec.teams[1].namespaces[1]", "already belongs to team ai-frontier-research; a "
                         "namespace belongs to at most one team"),
    "undeclared-flavor": ("spec.teams[1].quotas[0].flavor", "flavor h100 is not declared in spec.flavors"),
    "borrowing-without-cohort": ("spec.teams[0].quotas", "borrowingLimit and lendingLimit need a cohort"),
    "lending-above-nominal": (
        "spec.teams[0].quotas[0].resources[0].lendingLimit",
        "lendingLimit 5 must not exceed nominal (4)",
    ),
    "undeclared-protected-class": ("spec.preemption.protectedClasses", "declared, non-experiment"),
    "experiment-protected": ("spec.preemption.protectedClasses", "declared, non-experiment"),
    "step-longer-than-duration": ("spec.transitions.defaults.stepInterval", "must not exceed duration"),
    "override-step-longer-than-default-duration": ("spec.teams", "effective transition stepInterval"),
    "flavor-twice-in-a-team": ("spec.teams[0].quotas[1]", "Duplicate value"),
    "priority-out-of-range": ("spec.priorityClasses[0].value", "less than or equal to 1000000000"),
    "price-key-not-a-resource": ("spec.flavors[0].pricePerUnitHour", "every key must be a resource name"),
    "nominal-below-floor": (
        "spec.teams[0].quotas[0].resources[0].nominal",
        "below the transition floor of nvidia.com/gpu (1, spec.transitions.defaults.floor)",
    ),
    "nominal-below-team-floor": (
        "spec.teams[0].quotas[0].resources[0].nominal",
        "below the transition floor of nvidia.com/gpu (5, spec.teams[0].transition.floor)",
    ),
    "threshold-above-a-protected-class": (
        "spec.preemption.experimentPriorityThreshold",
        "must not exceed the value of a protected class",
    ),
    "experiments-reclaim-any": ("spec.teams", "a team's preemption.reclaimWithinCohort must not be Any"),
    "class-allowed-and-forbidden": (
        "spec.teams[1].forbiddenPriorityClasses",
        "a priority class must not be both allowed and forbidden to the team",
    ),
    "undeclared-team-class": ("spec.teams[0].priorityClasses[0]",
                              "priority class gold is not declared in spec.priorityClasses"),
    "cohort-named-like-a-team": ("spec.teams[0].cohort", "cohort biz-model-serving has the name of a team"),
    "service-account-without-namespace": (
        "spec.teams[0].members[0].namespace",
        "namespace is required for a ServiceAccount",
    ),
    "node-label-key-with-a-space": ("spec.flavors[0].nodeLabels", "every key must be a label key"),
    "node-label-value-with-a-space": ("spec.flavors[0].nodeLabels.gpu", "should match"),
    "node-label-prefix-too-long": ("spec.flavors[0].nodeLabels", "prefix of a label key"),
    "nine-node-labels": ("spec.flavors[0].nodeLabels", "must have at most 8 items"),
    "taint-key-not-a-label-key": ("spec.flavors[0].nodeTaints[0].key", "should match"),
    "taint-twice": ("spec.flavors[0].nodeTaints", "taints must be unique by key and effect"),
    "toleration-exists-with-a-value": ("spec.flavors[0].tolerations[0].value",
                                       "operator Exists has no value"),
    "toleration-without-key-or-exists": ("spec.flavors[0].tolerations[0].operator", "needs operator Exists"),
    "toleration-seconds-without-no-execute": ("spec.flavors[0].tolerations[0].tolerationSeconds",
                                              "needs effect NoExecute"),
    "project-label-not-a-label-key": ("spec.fairShare.projectLabel", "should match"),
    "weight-that-collapses": ("spec.teams[0].fairShareWeight", "0 or more than 1n"),
    "dry-run-yes": ("spec.preemption.dryRun", "must be of type boolean"),
    "max-victims-string": ("spec.preemption.budget.maxVictims", "must be of type integer"),
    "ledger-label-twice": ("spec.ledger.labels[1]", "Duplicate value"),
    "ledger-label-prefix-too-long": ("spec.ledger.labels[0]", "prefix of a label key"),
    "forecast-horizon-zero": ("spec.forecasts.horizon", "at least 1m"),
    "forecast-horizon-past-ten-years": ("spec.forecasts.horizon", "at most 3650d (ten years)"),
    "forecast-of-an-unknown-class": ("spec.forecasts.metrics", "must name a team"),
    "forecast-of-an-unknown-team": ("spec.forecasts.metrics", "must name a team"),
    "budget-window-of-seconds": ("spec.budgets[0].period.rolling", "at least 1m"),
    "half-life-past-ten-years": ("spec.fairShare.halfLife", "at most 3650d (ten years)"),
}
# Checked by Python only (cheap there, quadratic over strings or a graph in CEL): a cohort's parent must be
# the same in every path, a duration written in days or weeks is at most ten years (CEL's duration() knows
# Go's units only), a team's flavors make at most 16 resource groups, a subject is in one team (quadratic over
# every team's lists in CEL; docs/policy.md, "Where each rule is checked").
PYTHON_ONLY = {"cohort-with-two-parents", "forecast-horizon-100000d",
               "budget-window-800000d", "seventeen-resource-groups", "member-in-two-teams"}
CASES = {row[0]: row[1] for row in INVALID}


def test_every_invalid_case_is_either_checked_by_the_server_or_declared_python_only() -> None:
    assert set(SERVER) | PYTHON_ONLY == set(CASES)
    assert not set(SERVER) & PYTHON_ONLY


@pytest.mark.parametrize("case", sorted(SERVER), ids=sorted(SERVER))
def test_the_api_server_rejects_an_invalid_policy_naming_the_field(crd_installed: Path, case: str) -> None:
    doc = _unique(edited(sample(), CASES[case]))
    with pytest.raises(InputError):  # the offline verdict agrees
        parse_policy(doc)
    done = _kubectl(crd_installed, "apply", "-f", "-", stdin=yaml.safe_dump(doc), check=False)
    if done.returncode == 0:
        _kubectl(crd_installed, "delete", "quotapolicy", doc["metadata"]["name"], check=False)
    field, fragment = SERVER[case]
    assert done.returncode != 0, f"accepted: {done.stdout}"
    assert field in done.stderr and fragment in done.stderr, done.stderr


# The rules checked by the admission policy (fairshare/policy/admission.py), each by the case that breaks it,
# and the check of fairshare/policy/semantics.py that `qm policy check` runs for it.
MOVED = {
    "shared-namespace": "_check_namespaces",
    "undeclared-flavor": "_check_quotas",
    "lending-above-nominal": "_check_quotas",
    "nominal-below-floor": "_check_floors",
    "nominal-below-team-floor": "_check_floors",
    "cohort-named-like-a-team": "_check_cohorts",
    "undeclared-team-class": "_check_tenancy",
}


def test_every_admission_rule_has_a_moved_case_and_its_python_check() -> None:
    assert {rule.python for rule in RULES} == set(MOVED.values())
    assert set(MOVED) <= set(SERVER)
    import fairshare.policy.semantics as semantics

    assert all(callable(getattr(semantics, rule.python)) for rule in RULES)
    assert callable(check_spec)


def _python_error(doc: Doc) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_policy(doc)
    return caught.value


# Parity: for every moved rule, `qm policy check` and the API server refuse the same object, at the same
# field, naming the same value; on the sample and at the last team of a 500-team policy (the scale this
# move is for), where the offending entry is far from the first.
@pytest.mark.parametrize("case", sorted(MOVED), ids=sorted(MOVED))
def test_qm_policy_check_and_the_admission_policy_refuse_the_same_field_and_value(
    crd_installed: Path, case: str
) -> None:
    doc = _unique(edited(sample(), CASES[case]))
    error = _python_error(doc)
    done = _dry_run(crd_installed, doc)
    assert done.returncode != 0, done.stdout
    assert f"{error.location.field}: " in done.stderr, (error.one_line(), done.stderr)
    assert str(error.value) in done.stderr, (error.one_line(), done.stderr)
    # The same rule broken at the last of 500 teams.
    big = large_policy(500, 1, name=f"qp-{uuid.uuid4().hex[:8]}")
    last = big["spec"]["teams"][-1]
    if case == "shared-namespace":
        last["namespaces"].append(big["spec"]["teams"][0]["namespaces"][0])
    elif case == "undeclared-flavor":
        last["quotas"][0]["flavor"] = "h100"
    elif case == "lending-above-nominal":
        last["quotas"][0]["resources"][0]["lendingLimit"] = 9
    elif case == "nominal-below-floor":
        last["quotas"][0]["resources"][0]["nominal"] = 0
        last["quotas"][0]["resources"][0].pop("lendingLimit")
    elif case == "nominal-below-team-floor":
        last["transition"] = {"floor": {"nvidia.com/gpu": 9}}
    elif case == "cohort-named-like-a-team":
        last["cohort"] = f"scale-org/{big['spec']['teams'][0]['name']}"
    elif case == "undeclared-team-class":
        last["priorityClasses"] = ["gold"]
    error = _python_error(big)
    assert error.location.field.startswith("spec.teams[499]"), error.one_line()
    done = _dry_run(crd_installed, big)
    assert done.returncode != 0, done.stdout
    assert f"{error.location.field}: " in done.stderr, (error.one_line(), done.stderr)
    assert str(error.value) in done.stderr, (error.one_line(), done.stderr)


# Issue 38: a policy of 1,000 teams (1,000 ClusterQueues) passes the CRD's rules and the admission policy,
# whose cost is that of the object sent; a shared namespace is still refused, naming the field and both teams
# up to NAMESPACE_SORT_LIMIT namespaces, and the namespace above it.
@pytest.mark.parametrize(
    ("teams", "namespaces", "message"),
    [(500, 1, "spec.teams[499].namespaces[1]: namespace team-0000-0 already belongs to team team-0000; a "
              "namespace belongs to at most one team"),
     (MAX_TEAMS, 2, 'composited variable "oneTeamPerNamespace" fails to evaluate: insert failed: key '
                    "team-0000-0 already exists")],
    ids=["500-teams-named-fields", "1000-teams-named-namespace"])
def test_the_api_server_takes_a_policy_of_many_teams_and_refuses_a_shared_namespace_in_it(
    crd_installed: Path, teams: int, namespaces: int, message: str
) -> None:
    doc = large_policy(teams, namespaces, name=f"qp-{uuid.uuid4().hex[:8]}")
    assert (teams * namespaces > NAMESPACE_SORT_LIMIT) == (namespaces == 2)
    parse_policy(doc)
    done = _dry_run(crd_installed, doc)
    assert done.returncode == 0, done.stderr
    doc["spec"]["teams"][-1]["namespaces"].append(doc["spec"]["teams"][0]["namespaces"][0])
    with pytest.raises(InputError, match="already belongs to team team-0000"):
        parse_policy(doc)
    done = _dry_run(crd_installed, doc)
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_the_api_server_refuses_more_teams_than_max_teams(crd_installed: Path) -> None:
    doc = large_policy(MAX_TEAMS + 1, 1, name=f"qp-{uuid.uuid4().hex[:8]}")
    with pytest.raises(InputError, match=f"must have at most {MAX_TEAMS} entries"):
        parse_policy(doc)
    done = _dry_run(crd_installed, doc)
    assert done.returncode != 0 and f"must have at most {MAX_TEAMS} items" in done.stderr, done.stderr


def test_a_stored_policy_the_admission_rules_refuse_can_still_lose_its_finalizer(
    crd_installed: Path, wait_until: Any
) -> None:
    # A policy stored before the admission policy was installed: metadata updates (the operator's finalizer,
    # an annotation) must still pass, or it could never be deleted; a spec update is judged.
    doc = _unique(edited(sample(), CASES["undeclared-flavor"]))
    name = doc["metadata"]["name"]
    _kubectl(crd_installed, "delete", "validatingadmissionpolicybinding", ADMISSION)
    try:
        wait_until(lambda: _kubectl(crd_installed, "create", "-f", "-", stdin=yaml.safe_dump(doc),
                                    check=False).returncode == 0,
                   timeout=30, what="the invalid policy stored while the binding is gone")
    finally:
        _kubectl(crd_installed, "apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    try:
        shared = yaml.safe_dump(_unique(edited(sample(), CASES["shared-namespace"])))
        wait_until(lambda: _kubectl(crd_installed, "create", "--dry-run=server", "-f", "-", stdin=shared,
                                    check=False).returncode != 0,
                   timeout=30, what="the admission policy in force again")
        meta = _kubectl(crd_installed, "patch", "quotapolicy", name, "--type=merge", "-p",
                        json.dumps({"metadata": {"finalizers": ["queuemanager.dev/test"],
                                                 "annotations": {"note": "x"}}}), check=False)
        assert meta.returncode == 0, meta.stderr
        spec = _kubectl(crd_installed, "patch", "quotapolicy", name, "--type=merge", "-p",
                        json.dumps({"spec": {"fairShare": {"halfLife": "24h"}}}), check=False)
        assert spec.returncode != 0 and "flavor h100 is not declared in spec.flavors" in spec.stderr
        gone = _kubectl(crd_installed, "patch", "quotapolicy", name, "--type=merge", "-p",
                        json.dumps({"metadata": {"finalizers": None}}), check=False)
        assert gone.returncode == 0, gone.stderr
    finally:
        _kubectl(crd_installed, "delete", "quotapolicy", name, "--wait=false", check=False)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("quotapolicy.spec.teams", ["namespaces", "Cohort path, root first", "fairShareWeight"]),
        ("quotapolicy.spec.teams.quotas.resources.lendingLimit", ["Most of the nominal quota the cohort"]),
        ("quotapolicy.spec.transitions.defaults", ["rampUp", "growth applies at once", "curve"]),
        ("quotapolicy.status.transitions", ["lastAppliedStep", "Plan and progress"]),
    ],
    ids=["teams", "lending-limit", "transition-defaults", "status-transitions"],
)
def test_kubectl_explain_documents_the_fields(crd_installed: Path, path: str, expected: list[str]) -> None:
    out = " ".join(_kubectl(crd_installed, "explain", path).stdout.split())
    assert [e for e in expected if e not in out] == []


def test_status_keeps_the_operator_fields_and_prunes_unknown_top_level_ones(
    crd_installed: Path, applied_sample: str
) -> None:
    status: dict[str, Any] = {
        "status": {
            "observedGeneration": 1,
            "teams": 2,
            "activeTransitions": 1,
            "madeUp": "x",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Rendered",
                    "message": "ok",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "transitions": [
                {
                    "team": "ai-frontier-research",
                    "flavor": "gpu-a100",
                    "resource": "nvidia.com/gpu",
                    "from": 4,
                    "to": "1",
                    "current": "3",
                    "lastAppliedStep": 0,
                    "totalSteps": 3,
                    "plan": {"steps": [{"at": 0, "quota": 3000}]},
                    "operatorExtra": {"k": 1},
                }
            ],
            "history": {"schema": 1, "nodes": {"root": {"usage": {"gpu-a100/nvidia.com/gpu": 12}}}},
            "lastPreemptions": [
                {"time": "2026-01-01T00:00:00Z", "victim": "ns/w", "reason": "r", "dryRun": True}
            ],
        }
    }
    _kubectl(
        crd_installed,
        "patch",
        "quotapolicy",
        applied_sample,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    stored = json.loads(_kubectl(crd_installed, "get", "quotapolicy", applied_sample, "-o", "json").stdout)
    expected = {k: v for k, v in status["status"].items() if k != "madeUp"}
    assert stored["status"] == expected
    row = _kubectl(crd_installed, "get", "qp", applied_sample, "--no-headers").stdout.split()
    assert row[1:4] == ["2", "1", "True"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=policies())
def test_kueue_validation_accepts_whatever_the_renderer_produces(crd_installed: Path, doc: Doc) -> None:
    # Server-side dry run: Kueue's CRD schemas, CEL rules and validating webhooks judge every object, nothing
    # is stored. LocalQueues are left out: their namespaces do not exist (they are applied for real above).
    objects = [o for o in render(parse_policy(doc)) if o["kind"] != "LocalQueue"]
    done = _kubectl(
        crd_installed,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "--field-manager=queue-manager",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(objects),
        check=False,
    )
    assert done.returncode == 0, done.stderr


@st.composite
def _maybe_broken(draw: st.DrawFn) -> Doc:
    """A valid random policy with 0-2 random breakages of rules that both the API server and Python check."""
    doc = draw(policies())
    teams = doc["spec"]["teams"]
    for breakage in draw(
        st.lists(
            st.sampled_from(
                [
                    "share-namespace",
                    "undeclared-flavor",
                    "limit-without-cohort",
                    "lending-above-nominal",
                    "long-step",
                    "long-override-step",
                    "zero-step",
                    "label-key-with-a-space",
                    "label-value-with-a-space",
                    "label-prefix-too-long",
                    "weight-that-collapses",
                    "dry-run-yes",
                    "ledger-label-twice",
                    "rolling-of-seconds",
                    "horizon-of-zero",
                    "unknown-forecast-class",
                    "duration-past-ten-years",
                ]
            ),
            max_size=2,
            unique=True,
        )
    ):
        if breakage == "share-namespace" and len(teams) > 1:
            teams[1]["namespaces"].append(teams[0]["namespaces"][0])
        elif breakage == "undeclared-flavor":
            teams[-1]["quotas"].append({"flavor": "undeclared", "resources": [{"name": "cpu", "nominal": 1}]})
        elif breakage == "limit-without-cohort":
            teams[0].pop("cohort", None)
            teams[0]["quotas"][0]["resources"][0]["borrowingLimit"] = 1
        elif breakage == "lending-above-nominal":
            res = teams[0]["quotas"][0]["resources"][0]
            teams[0]["cohort"] = teams[0].get("cohort", "root")
            res["lendingLimit"] = f"{int(str(res['nominal']).removesuffix('m')) + 1}"
            res["nominal"] = "0"
        elif breakage == "long-step":
            doc["spec"]["transitions"] = {"defaults": {"duration": "1h", "stepInterval": "90m"}}
        elif breakage == "long-override-step":
            teams[0]["transition"] = {"stepInterval": "25h"}
        elif breakage == "zero-step":
            teams[0]["transition"] = {"stepInterval": "0s"}
        elif breakage == "label-key-with-a-space":
            doc["spec"]["flavors"][0]["nodeLabels"] = {"gpu kind": "a100"}
        elif breakage == "label-value-with-a-space":
            doc["spec"]["flavors"][0]["nodeLabels"] = {"gpu": "a 100"}
        elif breakage == "label-prefix-too-long":
            doc["spec"]["ledger"] = {"labels": ["p" * 254 + "/team"]}
        elif breakage == "weight-that-collapses":
            teams[0]["fairShareWeight"] = "0.0000000001"
        elif breakage == "dry-run-yes":
            doc["spec"]["preemption"] = {"dryRun": "yes"}
        elif breakage == "ledger-label-twice":
            doc["spec"]["ledger"] = {"labels": ["team", "team"]}
        elif breakage == "rolling-of-seconds":
            doc["spec"]["budgets"] = [{"name": "b", "selector": {"team": teams[0]["name"]},
                                       "period": {"rolling": "59s"}, "limit": {"gpuHours": 1},
                                       "thresholds": [{"percent": 50, "action": "alert"}]}]
        elif breakage == "horizon-of-zero":
            doc["spec"]["forecasts"] = {"horizon": "0s"}
        elif breakage == "unknown-forecast-class":
            doc["spec"]["forecasts"] = {"metrics": ["wait_p95[nobody]"]}
        elif breakage == "duration-past-ten-years":
            doc["spec"]["fairShare"] = {"halfLife": "87601h"}
    doc["metadata"]["name"] = f"qp-{uuid.uuid4().hex[:8]}"
    return doc


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_maybe_broken())
def test_the_api_server_and_the_python_loader_give_the_same_verdict(crd_installed: Path, doc: Doc) -> None:
    try:
        parse_policy(doc)
        python_accepts = True
    except InputError:
        python_accepts = False
    done = _kubectl(
        crd_installed, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(doc), check=False
    )
    assert (done.returncode == 0) == python_accepts, done.stderr or done.stdout


def _suffixed(suffix: str) -> Doc:
    """The sample with every cluster-scoped name made unique (the control plane is shared), without its
    tenancy (tests/integration/test_tenancy.py)."""
    doc = without_tenancy(sample())
    spec = doc["spec"]
    flavor = spec["flavors"][0]["name"]
    spec["flavors"][0]["name"] = f"{flavor}-{suffix}"
    for team in spec["teams"]:
        team["name"] = f"{team['name'][:40]}-{suffix}"
        team["cohort"] = f"org-{suffix}/{team['cohort']}-{suffix}"
        for quota in team["quotas"]:
            quota["flavor"] = f"{flavor}-{suffix}"
    for klass in spec["priorityClasses"]:
        klass["name"] = f"{klass['name']}-{suffix}"
    spec["preemption"]["protectedClasses"] = [f"{c}-{suffix}" for c in spec["preemption"]["protectedClasses"]]
    return doc


def test_real_kueue_accepts_the_rendered_objects_and_activates_the_cluster_queues(
    crd_installed: Path, namespace: str, wait_until: Any
) -> None:
    suffix = uuid.uuid4().hex[:6]
    doc = _suffixed(suffix)
    for team in doc["spec"]["teams"]:
        team["namespaces"] = [namespace]
        break
    doc["spec"]["teams"] = doc["spec"]["teams"][:1] + [
        dict(t, namespaces=[f"{namespace}-b"]) for t in doc["spec"]["teams"][1:]
    ]
    rendered: list[Any] = render(parse_policy(doc))
    text = yaml.safe_dump_all(rendered)
    _kubectl(crd_installed, "create", "namespace", f"{namespace}-b")
    try:
        _kubectl(
            crd_installed, "apply", "--server-side", "--field-manager=queue-manager", "-f", "-", stdin=text
        )
        queues = [o["metadata"]["name"] for o in rendered if o["kind"] == "ClusterQueue"]

        def active() -> list[str]:
            out = []
            for cq in queues:
                got = json.loads(
                    _kubectl(
                        crd_installed, "get", "clusterqueue.v1beta2.kueue.x-k8s.io", cq, "-o", "json"
                    ).stdout
                )
                conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
                if conds.get("Active") == "True":
                    out.append(cq)
            return out if len(out) == len(queues) else []

        wait_until(active, timeout=30, what="Kueue to mark the rendered ClusterQueues Active")
        cohorts = json.loads(
            _kubectl(crd_installed, "get", "cohorts.v1beta2.kueue.x-k8s.io", "-o", "json").stdout
        )["items"]
        parents = {
            c["metadata"]["name"]: c["spec"].get("parentName")
            for c in cohorts
            if c["metadata"]["name"].endswith(suffix)
        }
        assert parents == {f"org-{suffix}": None, f"gpu-cluster-{suffix}": f"org-{suffix}"}
    finally:
        _kubectl(
            crd_installed, "delete", "--wait=false", "--ignore-not-found", "-f", "-", stdin=text, check=False
        )
        _kubectl(crd_installed, "delete", "namespace", f"{namespace}-b", "--wait=false", check=False)


SERVICE_ACCOUNT = "system:serviceaccount:queue-manager:queue-manager"


@pytest.fixture(scope="module")
def installed(crd_installed: Path) -> Iterator[Path]:
    """`kubectl apply -k manifests/`: the documented install (the Deployment stays inert: no controllers).
    Its admission stamps (manifests/tenancy) are removed afterwards: the control plane is the session's."""
    _kubectl(crd_installed, "apply", "--server-side", "--force-conflicts", "-k", str(REPO / "manifests"))
    yield crd_installed
    _kubectl(crd_installed, "delete", "--ignore-not-found", "-k", str(REPO / "manifests" / "tenancy"),
             check=False)


def test_the_documented_install_applies_on_a_real_api_server(installed: Path) -> None:
    got = _kubectl(
        installed, "get", "-n", "queue-manager", "deployment,service,serviceaccount", "-o", "name"
    ).stdout.split()
    assert sorted(got) == [
        "deployment.apps/queue-manager",
        "service/queue-manager-metrics",
        "serviceaccount/queue-manager",
    ]


# (verb, resource, allowed): what the operator does must be allowed, everything else denied.
CAN_I = [
    ("watch", "quotapolicies.queuemanager.dev", True),
    ("patch", "quotapolicies.queuemanager.dev", True),
    ("patch", "quotapolicies.queuemanager.dev/status", True),
    ("create", "clusterqueues.kueue.x-k8s.io", True),
    ("patch", "clusterqueues.kueue.x-k8s.io", True),
    ("delete", "localqueues.kueue.x-k8s.io", True),
    ("watch", "workloads.kueue.x-k8s.io", True),
    ("patch", "workloads.kueue.x-k8s.io/status", True),
    ("create", "events", True),
    ("create", "quotapolicies.queuemanager.dev", False),
    ("delete", "quotapolicies.queuemanager.dev", False),
    ("update", "clusterqueues.kueue.x-k8s.io", False),
    ("delete", "workloads.kueue.x-k8s.io", False),
    ("patch", "workloads.kueue.x-k8s.io", True),
    ("create", "jobs.batch", False),
    ("get", "secrets", False),
    ("list", "namespaces", False),
    ("create", "leases.coordination.k8s.io", False),
    ("get", "customresourcedefinitions.apiextensions.k8s.io", False),
    # spec.tenancy (docs/tenancy.md): the rules and RoleBindings it renders, nothing that mutates or grants
    # more.
    ("create", "validatingadmissionpolicies.admissionregistration.k8s.io", True),
    ("delete", "validatingadmissionpolicybindings.admissionregistration.k8s.io", True),
    ("create", "rolebindings.rbac.authorization.k8s.io", True),
    ("create", "roles.rbac.authorization.k8s.io", False),
    ("create", "mutatingadmissionpolicies.admissionregistration.k8s.io", False),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", False),
    ("delete", "jobs.batch", False),
    # spec.idle (queue_manager/telemetry.py): the pods Kueue started are listed to map dcgm-exporter's series
    # to Workloads; nothing else of pods.
    ("list", "pods", True),
    ("get", "pods", False),
    ("delete", "pods", False),
]


@pytest.mark.parametrize(("role", "allowed"), [("queue-manager-team-member", True), ("cluster-admin", False),
                                               ("edit", False)])
def test_the_service_account_may_bind_only_the_team_member_role(installed: Path, role: str,
                                                                 allowed: bool) -> None:
    done = _kubectl(installed, "auth", "can-i", "bind", f"clusterroles/{role}", f"--as={SERVICE_ACCOUNT}",
                    check=False)
    assert done.stdout.strip() == ("yes" if allowed else "no")


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    CAN_I,
    ids=[f"{'may' if a else 'may-not'}-{v}-{r.split('.')[0]}" for v, r, a in CAN_I],
)
def test_the_service_account_may_do_exactly_what_the_operator_does(
    installed: Path, verb: str, resource: str, allowed: bool
) -> None:
    subresource = []
    if "/" in resource:
        resource, sub = resource.split("/")
        subresource = [f"--subresource={sub}"]
    done = _kubectl(
        installed,
        "auth",
        "can-i",
        verb,
        resource,
        *subresource,
        "--all-namespaces",
        f"--as={SERVICE_ACCOUNT}",
        check=False,
    )
    assert done.stdout.strip() == ("yes" if allowed else "no")
