"""Drift detection and correction of owned Kueue objects (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.policy import owner_labels
from queue_manager.ownership import (
    differs_from_desired,
    managed_content,
    owning_policy,
    restore_patch,
    spec_drift,
)


def _cq(nominal: Any, *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cohortName": "org",
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}],
        "queueingStrategy": "BestEffortFIFO",
    }
    spec.update(extra or {})
    return {"spec": spec}


@pytest.mark.parametrize(("applied", "live", "expected"), [
    (_cq("4"), _cq("4"), []),
    (_cq("4"), _cq("4000m"), []),
    (_cq("4"), _cq("3"), ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"]),
    (_cq("4"), _cq("4", extra={"stopPolicy": "Hold"}), ["spec.stopPolicy"]),
    ({"spec": {"a": [1, 2]}}, {"spec": {"a": [1]}}, ["spec.a"]),
    ({"spec": {"a": 1, "b": 2}}, {"spec": {"b": 2}}, ["spec.a"]),
], ids=["identical", "same-quantity-other-spelling", "quota-edited-by-hand", "field-added-by-hand",
        "list-shortened", "field-removed-by-hand"])
def test_drift_names_every_path_a_hand_edit_changed(applied: Any, live: Any, expected: list[str]) -> None:
    assert [p.lstrip(".") for p in spec_drift(applied, live, path="")] == expected


@pytest.mark.parametrize(("applied", "live", "patch"), [
    (_cq("4")["spec"], _cq("1")["spec"], {"resourceGroups": _cq("4")["spec"]["resourceGroups"]}),
    (_cq("4")["spec"], _cq("4", extra={"stopPolicy": "Hold"})["spec"], {"stopPolicy": None}),
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": 5, "c": 2}}, {"a": {"b": 1}}),
    ({"a": 1}, {}, {"a": 1}),
], ids=["quota-restored", "added-field-removed", "nested-key-restored", "removed-key-restored"])
def test_restore_patch_turns_the_live_object_back_into_the_applied_one(
        applied: dict[str, Any], live: dict[str, Any], patch: dict[str, Any]) -> None:
    assert restore_patch(applied, live) == patch


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch, to check restore_patch end to end."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


@pytest.mark.parametrize(("applied", "live"), [
    (_cq("4")["spec"], _cq("1", extra={"stopPolicy": "HoldAndDrain", "x": {"y": 1}})["spec"]),
    ({"a": {"b": [1, 2], "c": "x"}}, {"a": {"b": [3], "d": "y"}, "e": 1}),
], ids=["cluster-queue", "nested"])
def test_applying_the_restore_patch_leaves_no_drift(applied: dict[str, Any], live: dict[str, Any]) -> None:
    assert spec_drift(applied, _merge(live, restore_patch(applied, live))) == []


@pytest.mark.parametrize(("desired", "live", "differs"), [
    (_cq("4"), _cq("4", extra={"flavorFungibility": {"whenCanBorrow": "MayStopSearch"}}), False),
    (_cq("4"), _cq("2"), True),
    ({"value": 100}, {"value": 100, "description": "x"}, False),
    ({"spec": {"a": [{"n": 1}]}}, {"spec": {"a": [{"n": 1, "default": 0}]}}, False),
    ({"spec": {"a": [{"n": 1}]}}, {"spec": {"a": []}}, True),
], ids=["server-defaults-do-not-count", "changed-value", "priority-class-extra-field",
        "defaults-inside-list-items", "missing-list-item"])
def test_an_apply_is_needed_only_when_live_lacks_or_changes_a_desired_value(
        desired: Any, live: Any, differs: bool) -> None:
    assert differs_from_desired(desired, live) is differs


def test_ownership_labels_identify_the_owning_policy() -> None:
    obj = {"kind": "ClusterQueue", "metadata": {"name": "a", "labels": {"x": "y", **owner_labels("p1")}}}
    assert owning_policy(obj) == "p1"
    assert owning_policy({"metadata": {"labels": {"queuemanager.dev/policy": "p1"}}}) is None


def test_managed_content_is_everything_but_identity_and_status() -> None:
    obj = {"apiVersion": "v", "kind": "WorkloadPriorityClass", "metadata": {"name": "x"}, "value": 5,
           "description": "d", "status": {}}
    assert managed_content(obj) == {"value": 5, "description": "d"}
