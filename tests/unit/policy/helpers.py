"""Builders of QuotaPolicy documents for the policy tests (dicts, as YAML or the API server gives them)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "manifests" / "samples" / "quotapolicy.yaml"

Doc = dict[str, Any]


def sample() -> Doc:
    """A fresh copy of the shipped sample policy."""
    doc: Doc = yaml.safe_load(SAMPLE.read_text())
    return doc


TENANCY_TEAM_FIELDS = ("members", "admins", "priorityClasses", "forbiddenPriorityClasses", "projects",
                       "costCenters")


def without_tenancy(doc: Doc) -> Doc:
    """`doc` without spec.tenancy and the teams' tenancy fields (docs/tenancy.md): for tests of other
    things on a shared control plane, where a policy's rule for the namespaces outside its teams would
    outlive the test."""
    doc["spec"].pop("tenancy", None)
    for team in doc["spec"]["teams"]:
        for key in TENANCY_TEAM_FIELDS:
            team.pop(key, None)
    return doc


def minimal(**teams: dict[str, Any]) -> Doc:
    """A small valid policy: one flavor `default` and the given teams (name -> fields to set)."""
    team_list = []
    for name, fields in teams.items():
        team = {"name": name, "namespaces": [name],
                "quotas": [{"flavor": "default", "resources": [{"name": "nvidia.com/gpu", "nominal": 1}]}]}
        team.update(fields)
        team_list.append(team)
    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
            "spec": {"flavors": [{"name": "default"}], "teams": team_list}}


def edited(doc: Doc, edit: Callable[[Doc], object]) -> Doc:
    """A copy of `doc` after `edit(copy)`."""
    out = copy.deepcopy(doc)
    edit(out)
    return out


def set_path(path: str, value: object) -> Any:
    """An edit that sets a dotted path (list indexes as numbers) in a document."""
    def edit(doc: Doc) -> None:
        node: Any = doc
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return edit


def team_update(index: int, **fields: object) -> Any:
    return lambda d: d["spec"]["teams"][index].update(fields)


# Invalid edits of the sample: (id, edit, field path, fragment of the message, value) as the Python loader
# reports them. tests/integration/test_policy_crd.py applies the same edits to a real API server.
INVALID: list[tuple[str, Any, str, str, object]] = [
    ("negative-quota", set_path("spec.teams.0.quotas.0.resources.0.nominal", "-4"),
     "spec.teams[0].quotas[0].resources[0].nominal", "non-negative Kubernetes quantity", "-4"),
    ("garbage-quota", set_path("spec.teams.0.quotas.0.resources.0.nominal", "four"),
     "spec.teams[0].quotas[0].resources[0].nominal", "Kubernetes quantity", "four"),
    ("unknown-field", team_update(0, quota=[]), "spec.teams[0].quota", "unknown field", None),
    ("missing-namespaces", lambda d: d["spec"]["teams"][0].pop("namespaces"),
     "spec.teams[0].namespaces", "required field is missing", None),
    ("bad-team-name", team_update(0, name="AI_Frontier"), "spec.teams[0].name", "must be a DNS label",
     "AI_Frontier"),
    ("bad-curve", set_path("spec.transitions.defaults.curve", "cubic"), "spec.transitions.defaults.curve",
     "'linear', 'geometric' or 'immediate'", "cubic"),
    ("bad-duration", set_path("spec.transitions.defaults.duration", "14 days"),
     "spec.transitions.defaults.duration", "must be a duration", "14 days"),
    ("duplicate-team", lambda d: d["spec"]["teams"].append(dict(d["spec"]["teams"][0], namespaces=["x"])),
     "spec.teams[2].name", "duplicate name", "ai-frontier-research"),
    ("shared-namespace", team_update(1, namespaces=["biz-model-serving", "ai-frontier-research"]),
     "spec.teams[1].namespaces[1]", "already belongs to team ai-frontier-research", "ai-frontier-research"),
    ("undeclared-flavor", set_path("spec.teams.1.quotas.0.flavor", "h100"), "spec.teams[1].quotas[0].flavor",
     "not declared in spec.flavors", "h100"),
    ("borrowing-without-cohort",
     lambda d: (d["spec"]["teams"][0].pop("cohort"),
                d["spec"]["teams"][0]["quotas"][0]["resources"][0].update(borrowingLimit=2)),
     "spec.teams[0].quotas[0].resources[0].borrowingLimit", "needs a cohort", "2"),
    ("lending-above-nominal", lambda d: d["spec"]["teams"][0]["quotas"][0]["resources"][0].update(
        lendingLimit="5"), "spec.teams[0].quotas[0].resources[0].lendingLimit", "must not exceed nominal",
     "5"),
    ("undeclared-protected-class", set_path("spec.preemption.protectedClasses", ["vip"]),
     "spec.preemption.protectedClasses[0]", "not declared in spec.priorityClasses", "vip"),
    ("experiment-protected", set_path("spec.preemption.protectedClasses", ["low-priority-experiment"]),
     "spec.preemption.protectedClasses[0]", "marked experiment", "low-priority-experiment"),
    ("step-longer-than-duration", set_path("spec.transitions.defaults.stepInterval", "400h"),
     "spec.transitions.defaults.stepInterval", "must not exceed duration", "400h"),
    ("override-step-longer-than-default-duration", team_update(0, transition={"stepInterval": "337h"}),
     "spec.teams[0].transition.stepInterval", "must not exceed duration (336h)", "337h"),
    ("cohort-with-two-parents", lambda d: (d["spec"]["teams"][0].update(cohort="org/gpu"),
                                           d["spec"]["teams"][1].update(cohort="lab/gpu")),
     "spec.teams[1].cohort", "cohort gpu has parent lab here but org", "lab/gpu"),
    ("cohort-named-like-a-team", team_update(0, cohort="biz-model-serving"), "spec.teams[0].cohort",
     "name of a team", "biz-model-serving"),
    ("flavor-twice-in-a-team",
     lambda d: d["spec"]["teams"][0]["quotas"].append(d["spec"]["teams"][0]["quotas"][0]),
     "spec.teams[0].quotas[1].flavor", "flavor listed twice", "gpu-a100"),
    ("priority-out-of-range", set_path("spec.priorityClasses.0.value", 2**31),
     "spec.priorityClasses[0].value", "less than or equal to 1000000000", 2**31),
    ("price-key-not-a-resource", set_path("spec.flavors.0.pricePerUnitHour", {"GPU!": "1"}),
     "spec.flavors[0].pricePerUnitHour['GPU!']", "must be a resource name", "GPU!"),
    ("nominal-below-floor", set_path("spec.teams.0.quotas.0.resources.0.nominal", 0),
     "spec.teams[0].quotas[0].resources[0].nominal",
     "below the transition floor of nvidia.com/gpu (1 GPU, spec.transitions.defaults.floor)", "0"),
    ("nominal-below-team-floor", team_update(0, transition={"floor": {"nvidia.com/gpu": 5}}),
     "spec.teams[0].quotas[0].resources[0].nominal",
     "below the transition floor of nvidia.com/gpu (5 GPUs, spec.teams[0].transition.floor)", "4"),
    ("threshold-above-a-protected-class", set_path("spec.preemption.experimentPriorityThreshold", 2000000),
     "spec.preemption.experimentPriorityThreshold",
     "must not exceed the value of protected class high-priority-business (1000000)", 2000000),
    ("experiments-reclaim-any", team_update(0, preemption={"reclaimWithinCohort": "Any"}),
     "spec.teams[0].preemption.reclaimWithinCohort",
     "Any lets ai-frontier-research's experiments reclaim at once the quota experiment preemption frees",
     "Any"),
    # Tenancy (docs/tenancy.md).
    ("class-allowed-and-forbidden", team_update(1, priorityClasses=["high-priority-business"],
                                                forbiddenPriorityClasses=["high-priority-business"]),
     "spec.teams[1].forbiddenPriorityClasses[0]", "both allowed and forbidden to team biz-model-serving",
     "high-priority-business"),
    ("undeclared-team-class", team_update(0, priorityClasses=["gold"]), "spec.teams[0].priorityClasses[0]",
     "not declared in spec.priorityClasses", "gold"),
    ("member-in-two-teams", lambda d: (d["spec"]["teams"][0].update(members=[{"kind": "User", "name": "al"}]),
                                       d["spec"]["teams"][1].update(admins=[{"kind": "User", "name": "al"}])),
     "spec.teams[1].admins[0]", "User al is already a member of team ai-frontier-research", "al"),
    ("service-account-without-namespace", team_update(0, members=[{"kind": "ServiceAccount", "name": "ci"}]),
     "spec.teams[0].members[0].namespace", "a ServiceAccount needs its namespace", "ci"),
    # Issue 33: what Kueue's webhooks, the API server's schema or the controller would refuse later.
    ("node-label-key-with-a-space", set_path("spec.flavors.0.nodeLabels", {"gpu type": "a100"}),
     "spec.flavors[0].nodeLabels['gpu type']", "must be a label key", "gpu type"),
    ("node-label-value-with-a-space", set_path("spec.flavors.0.nodeLabels", {"gpu": "a 100"}),
     "spec.flavors[0].nodeLabels.gpu", "must be a label value", "a 100"),
    ("node-label-prefix-too-long", set_path("spec.flavors.0.nodeLabels", {"a" * 254 + "/gpu": "a100"}),
     f"spec.flavors[0].nodeLabels['{'a' * 254}/gpu']", "prefix of a label key", "a" * 254 + "/gpu"),
    ("nine-node-labels", set_path("spec.flavors.0.nodeLabels", {f"k{i}": "v" for i in range(9)}),
     "spec.flavors[0].nodeLabels", "must have at most 8 entries", None),
    ("taint-key-not-a-label-key", set_path("spec.flavors.0.nodeTaints.0.key", "nvidia gpu"),
     "spec.flavors[0].nodeTaints[0].key", "must be a label key", "nvidia gpu"),
    ("taint-twice", lambda d: d["spec"]["flavors"][0]["nodeTaints"].append(
        dict(d["spec"]["flavors"][0]["nodeTaints"][0], value="again")),
     "spec.flavors[0].nodeTaints[1]", "unique by key and effect", "nvidia.com/gpu:NoSchedule"),
    ("toleration-exists-with-a-value", set_path("spec.flavors.0.tolerations.0.value", "present"),
     "spec.flavors[0].tolerations[0].value", "operator Exists has no value", "present"),
    ("toleration-without-key-or-exists", set_path("spec.flavors.0.tolerations", [{"operator": "Equal"}]),
     "spec.flavors[0].tolerations[0].operator", "needs operator Exists", "Equal"),
    ("toleration-seconds-without-no-execute",
     set_path("spec.flavors.0.tolerations.0.tolerationSeconds", 60),
     "spec.flavors[0].tolerations[0].tolerationSeconds", "needs effect NoExecute", 60),
    ("project-label-not-a-label-key", set_path("spec.fairShare", {"projectLabel": "my project"}),
     "spec.fairShare.projectLabel", "must be a label key", "my project"),
    ("weight-that-collapses", team_update(0, fairShareWeight="1n"), "spec.teams[0].fairShareWeight",
     "0 or more than 1n", "1n"),
    ("dry-run-yes", set_path("spec.preemption.dryRun", "yes"), "spec.preemption.dryRun",
     "must be true or false", "yes"),
    ("max-victims-string", set_path("spec.preemption.budget.maxVictims", "5"),
     "spec.preemption.budget.maxVictims", "must be an integer", "5"),
    ("ledger-label-twice", set_path("spec.ledger", {"labels": ["team", "team"]}), "spec.ledger.labels[1]",
     "listed twice", "team"),
    ("ledger-label-prefix-too-long", set_path("spec.ledger", {"labels": ["a" * 254 + "/team"]}),
     "spec.ledger.labels[0]", "prefix of a label key", "a" * 254 + "/team"),
    ("forecast-horizon-zero", set_path("spec.forecasts", {"horizon": "0s"}), "spec.forecasts.horizon",
     "at least 1m", "0s"),
    ("forecast-horizon-past-ten-years", set_path("spec.forecasts", {"horizon": "87601h"}),
     "spec.forecasts.horizon", "at most 3650d (ten years)", "87601h"),
    ("forecast-horizon-100000d", set_path("spec.forecasts", {"horizon": "100000d"}),
     "spec.forecasts.horizon", "at most 3650d (ten years)", "100000d"),
    ("forecast-of-an-unknown-class", set_path("spec.forecasts", {"metrics": ["wait_p95[vip]"]}),
     "spec.forecasts.metrics[0]", "names a priority class", "wait_p95[vip]"),
    ("forecast-of-an-unknown-team", set_path("spec.forecasts", {"metrics": ["gpu_hours[nobody]"]}),
     "spec.forecasts.metrics[0]", "names a team", "gpu_hours[nobody]"),
    ("budget-window-of-seconds", set_path("spec.budgets", [
        {"name": "b", "selector": {"team": "ai-frontier-research"}, "period": {"rolling": "2s"},
         "limit": {"gpuHours": 10}, "thresholds": [{"percent": 80, "action": "alert"}]}]),
     "spec.budgets[0].period.rolling", "at least 1m", "2s"),
    ("budget-window-800000d", set_path("spec.budgets", [
        {"name": "b", "selector": {"team": "ai-frontier-research"}, "period": {"rolling": "800000d"},
         "limit": {"gpuHours": 10}, "thresholds": [{"percent": 80, "action": "alert"}]}]),
     "spec.budgets[0].period.rolling", "at most 3650d (ten years)", "800000d"),
    ("half-life-past-ten-years", set_path("spec.fairShare", {"halfLife": "87601h"}),
     "spec.fairShare.halfLife", "at most 3650d (ten years)", "87601h"),
    ("seventeen-resource-groups", lambda d: (
        d["spec"]["flavors"].extend({"name": f"f{i}"} for i in range(17)),
        d["spec"]["teams"][0]["quotas"].extend(
            {"flavor": f"f{i}", "resources": [{"name": f"example.com/r{i}", "nominal": 1}]}
            for i in range(17))),
     "spec.teams[0].quotas", "Kueue allows 16", 18),
]


# ------------------------------------------------------------------ random valid policies (hypothesis)

GPU = "nvidia.com/gpu"
_names = st.sampled_from(["a", "b", "c", "d", "e"])
_resources = st.lists(st.sampled_from(["cpu", "memory", GPU, "example.com/fpga"]), min_size=1, max_size=3,
                      unique=True)


# Label keys and values at Kubernetes' limits (a 253-character prefix, a 63-character name or value, '_' and
# '.' inside), which Kueue's ResourceFlavor webhook checks (issue 33).
_PREFIX = "a" * 61 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 63  # 253 characters
_label_keys = st.sampled_from(["gpu", "cloud.google.com/gke-accelerator", "A_b.c-D", "x" * 63,
                               f"{_PREFIX}/{'n' * 63}", "example.com/z9"])
_label_values = st.sampled_from(["", "a100", "v" * 63, "Z_z.9-x", "1"])


@st.composite
def _flavor(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A flavor with node labels, taints and tolerations Kueue accepts."""
    flavor: dict[str, Any] = {"name": name}
    labels = draw(st.dictionaries(_label_keys, _label_values, max_size=8))
    if labels:
        flavor["nodeLabels"] = labels
    effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    taints = draw(st.lists(st.tuples(_label_keys, _label_values, st.sampled_from(effects)), max_size=3,
                           unique_by=lambda t: (t[0], t[2])))
    if taints:
        flavor["nodeTaints"] = [{"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e}
                                for k, v, e in taints]
    tolerations = []
    for key, value, effect in draw(st.lists(st.tuples(_label_keys, _label_values, st.sampled_from(effects)),
                                            max_size=3)):
        if draw(st.booleans()):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
        else:
            tolerations.append({"key": key, "operator": "Equal", "value": value, "effect": "NoExecute",
                                "tolerationSeconds": draw(st.integers(0, 2**40))})
    if draw(st.booleans()):
        tolerations.append({"operator": "Exists"})
    if tolerations:
        flavor["tolerations"] = tolerations
    return flavor


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    """Valid policies: 1-3 flavors, 1-4 teams in nested cohorts (or none), limits only with a cohort."""
    flavors = draw(st.lists(st.sampled_from(["f1", "f2", "f3"]), min_size=1, max_size=3, unique=True))
    team_names = draw(st.lists(_names, min_size=1, max_size=4, unique=True))
    teams = []
    for name in team_names:
        cohort = draw(st.sampled_from([None, "root", "root/mid", "root/mid/leaf", "other"]))
        quotas = []
        chosen = draw(st.lists(st.sampled_from(flavors), min_size=1, max_size=len(flavors), unique=True))
        for flavor in chosen:
            resources = []
            for res in draw(_resources):
                nominal = draw(st.integers(0, 64))
                entry: dict[str, object] = {"name": res, "nominal": draw(st.sampled_from(
                    [nominal, str(nominal), f"{nominal * 1000}m"]))}
                if cohort is not None and draw(st.booleans()):
                    entry["borrowingLimit"] = draw(st.integers(0, 8))
                if cohort is not None and draw(st.booleans()):
                    entry["lendingLimit"] = draw(st.integers(0, nominal))
                resources.append(entry)
            quotas.append({"flavor": flavor, "resources": resources})
        weight = draw(st.sampled_from([1, "0", "2n", "500m", "1.5", 64]))
        team: dict[str, object] = {"name": name, "namespaces": [f"ns-{name}", f"ns-{name}-2"],
                                   "quotas": quotas, "fairShareWeight": weight}
        if cohort is not None:
            team["cohort"] = cohort
        teams.append(team)
    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
            "spec": {"flavors": [draw(_flavor(f)) for f in flavors], "teams": teams,
                     "priorityClasses": [{"name": "hi", "value": 1000}, {"name": "lo", "value": 1,
                                                                          "experiment": True}]}}
