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
]


# ------------------------------------------------------------------ random valid policies (hypothesis)

GPU = "nvidia.com/gpu"
_names = st.sampled_from(["a", "b", "c", "d", "e"])
_resources = st.lists(st.sampled_from(["cpu", "memory", GPU, "example.com/fpga"]), min_size=1, max_size=3,
                      unique=True)


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
        team: dict[str, object] = {"name": name, "namespaces": [f"ns-{name}", f"ns-{name}-2"],
                                   "quotas": quotas}
        if cohort is not None:
            team["cohort"] = cohort
        teams.append(team)
    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
            "spec": {"flavors": [{"name": f} for f in flavors], "teams": teams,
                     "priorityClasses": [{"name": "hi", "value": 1000}, {"name": "lo", "value": 1,
                                                                          "experiment": True}]}}
