"""`qm plan`'s diff shows exactly the user's change (qm/planning/semantic.py): no key order, no API-server or
Kueue defaults, no field the edit leaves alone. The live side is the sample as the API server returns it
after `kubectl apply` (its CRD's defaults set, keys sorted, server metadata); the file side is the shipped
edit as written. tests/integration/test_plan.py compares the same edit with `kubectl diff` on a real API
server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from qm.planning import diff
from qm.planning.inputs import PolicyFile
from qm.planning.semantic import Change, changes, defaulted, leaves, policy_spec_schema
from tests.unit.plan.sample import (
    BUSINESS,
    FLAVOR,
    GPU,
    RESEARCH,
    busy,
    live,
    sample,
    shift,
)

GPU_OF = f"quotas[{FLAVOR}].resources[{GPU}]"
BUDGET = "spec.budgets[research-month]"
# The shipped edit: research 4 -> 1 GPU and no borrowing, business 16 -> 19, a transition of a minute, and a
# monthly cost budget on research, as its file writes it (the budget's defaulted dryRun and limit.resource
# are the server's, not the edit's).
THE_SHIFT = [
    ("~", f"spec.teams[{RESEARCH}].{GPU_OF}.nominal", 4, 1),
    ("+", f"spec.teams[{RESEARCH}].{GPU_OF}.borrowingLimit", None, 0),
    ("~", f"spec.teams[{BUSINESS}].{GPU_OF}.nominal", 16, 19),
    ("~", "spec.transitions.defaults.duration", "336h", "1m"),
    ("~", "spec.transitions.defaults.stepInterval", "24h", "20s"),
    ("~", "spec.transitions.defaults.deadline", "408h", "90s"),
    ("+", f"{BUDGET}.selector.team", None, RESEARCH),
    ("+", f"{BUDGET}.period.calendar", None, "Month"),
    ("+", f"{BUDGET}.period.timeZone", None, "UTC"),
    ("+", f"{BUDGET}.limit.cost", None, "2000"),
    ("+", f"{BUDGET}.thresholds", None,
     [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "alert"}]),
]


def test_the_shipped_edit_diffs_as_exactly_the_fields_its_file_changes() -> None:
    here = live(sample(), busy())
    new = shift()
    decided = diff.decide_now(new, here, {})
    shown = diff.policy_diff(new, here, decided.generation)
    assert [(c.op, c.path, c.before, c.after) for c in shown.changes] == THE_SHIFT
    assert shown.text.splitlines()[:3] == [
        "QuotaPolicy gpu-cluster: update (generation 1 -> 2)",
        f"  ~ spec.teams[{RESEARCH}].{GPU_OF}.nominal: 4 -> 1",
        f"  + spec.teams[{RESEARCH}].{GPU_OF}.borrowingLimit: 0"]
    # The server's defaults are there on the live side (so a textual diff would show them as deletions).
    live_team = here.doc["spec"]["teams"][0]
    assert live_team["queueingStrategy"] == "BestEffortFIFO"
    assert "queueingStrategy" not in new.doc["spec"]["teams"][0]


def test_the_same_file_applied_again_changes_nothing_and_no_kueue_object_changes_at_once() -> None:
    here = live(sample(), busy())
    again = PolicyFile("again.yaml", sample(), live(sample(), []).current)
    decided = diff.decide_now(again, here, {})
    shown = diff.policy_diff(again, here, decided.generation)
    assert shown.changes == () and shown.action == "unchanged"
    assert diff.object_diffs(decided, here) == []
    assert diff.object_diffs(decided, here, final=True) == []


def test_the_shift_sets_researchs_borrowing_limit_at_once_and_its_quotas_once_done() -> None:
    here = live(sample(), busy())
    decided = diff.decide_now(shift(), here, {})
    cq = f"spec.resourceGroups[0].flavors[{FLAVOR}].resources[{GPU}]"
    now = diff.object_diffs(decided, here)
    assert [(d.key.name, [(c.op, c.path, c.after) for c in d.changes]) for d in now] == [
        (RESEARCH, [("+", f"{cq}.borrowingLimit", "0")])]
    final = diff.object_diffs(decided, here, final=True)
    assert [(d.key.kind, d.key.name, [(c.path, c.before, c.after) for c in d.changes]) for d in final] == [
        ("ClusterQueue", RESEARCH, [(f"{cq}.nominalQuota", "4", "1"), (f"{cq}.borrowingLimit", None, "0")]),
        ("ClusterQueue", BUSINESS, [(f"{cq}.nominalQuota", "16", "19")]),
    ]
    # Kueue's defaults on the live ClusterQueues (flavorFungibility, stopPolicy, borrowWithinCohort) stay out.
    assert not any("flavorFungibility" in c.path or "stopPolicy" in c.path for d in final for c in d.changes)


SCHEMA: dict[str, Any] = {"properties": {"spec": {"properties": {
    "teams": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"properties": {"name": {"type": "string"},
                                       "weight": {"type": "integer", "default": 1},
                                       "namespaces": {"type": "array", "x-kubernetes-list-type": "set"},
                                       "nominal": {"x-kubernetes-int-or-string": True}}}},
    "order": {"type": "array"}}}}}


def _team(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespaces": [name], **extra}


@pytest.mark.parametrize(("before", "after", "expected"), [
    pytest.param({"spec": {"teams": [_team("a", weight=1)]}}, {"spec": {"teams": [_team("a")]}}, [],
                 id="a default the file leaves out is no change"),
    pytest.param({"spec": {"teams": [_team("a"), _team("b")]}},
                 {"spec": {"teams": [_team("b"), _team("a")]}}, [],
                 id="items of a list-map in another order are no change"),
    pytest.param({"spec": {"teams": [_team("a", namespaces=["x", "y"])]}},
                 {"spec": {"teams": [_team("a", namespaces=["y", "x"])]}}, [],
                 id="a set in another order is no change"),
    pytest.param({"spec": {"teams": [_team("a", nominal="4")]}},
                 {"spec": {"teams": [_team("a", nominal=4)]}}, [],
                 id="the same quantity written otherwise is no change"),
    pytest.param({"spec": {"teams": [{"namespaces": ["a"], "name": "a"}]}},
                 {"spec": {"teams": [_team("a")]}}, [],
                 id="keys in another order are no change"),
    pytest.param({"spec": {"teams": [_team("a", nominal=4)]}},
                 {"spec": {"teams": [_team("a", nominal="3500m")]}},
                 [Change("~", "spec.teams[a].nominal", 4, "3500m")],
                 id="a changed value is one line by path"),
    pytest.param({"spec": {"teams": [_team("a")]}},
                 {"spec": {"teams": [_team("a"), _team("b", nominal=2)]}},
                 [Change("+", "spec.teams[b].namespaces", None, ["b"]),
                  Change("+", "spec.teams[b].nominal", None, 2),
                  Change("+", "spec.teams[b].weight", None, 1)],
                 id="an added item is its fields, its defaults included"),
    pytest.param({"spec": {"teams": [_team("a"), _team("b")]}}, {"spec": {"teams": [_team("a")]}},
                 [Change("-", "spec.teams[b].namespaces", ["b"], None),
                  Change("-", "spec.teams[b].weight", 1, None)],
                 id="a removed item is its fields"),
    pytest.param({"spec": {"order": [1, 2]}}, {"spec": {"order": [2, 1]}},
                 [Change("~", "spec.order", [1, 2], [2, 1])],
                 id="an atomic list in another order is a change"),
])
def test_a_semantic_diff_shows_what_changes_and_nothing_else(
    before: dict[str, Any], after: dict[str, Any], expected: list[Change]
) -> None:
    spec = SCHEMA["properties"]["spec"]
    b = {"spec": defaulted(before["spec"], spec)}
    a = {"spec": defaulted(after["spec"], spec)}
    assert changes(b, a, SCHEMA) == expected


def test_defaulting_follows_the_crd_schema_as_the_api_server_does() -> None:
    doc = sample()["spec"]
    served = defaulted(doc, policy_spec_schema())
    assert served["teams"][0]["queueingStrategy"] == "BestEffortFIFO"
    assert served["fairShare"]["halfLife"] == "168h"  # written, kept
    assert defaulted(served, policy_spec_schema()) == served  # idempotent
    assert doc == sample()["spec"]  # a copy: the input is not changed
    untouched = copy.deepcopy(served)
    assert changes(untouched, served, policy_spec_schema()) == []


def test_a_created_object_is_listed_field_by_field_with_named_items_by_their_names() -> None:
    obj = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}
    assert leaves(obj) == [("spec.resourceGroups", obj["spec"]["resourceGroups"])]
    flat = leaves({"flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]})
    assert flat == [("flavors[f].resources[cpu].nominalQuota", "4")]
