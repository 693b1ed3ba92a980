"""Loading QuotaPolicies: the sample is valid; every bad input is one InputError naming field and value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.errors import InputError
from fairshare.models import QuotaKey, ResourceQuota
from fairshare.policy import (
    load_policies_yaml,
    load_policy_file,
    load_policy_yaml,
    parse_policy,
    preemption_settings,
    spec_quotas,
    transition_settings,
)
from fairshare.policy.settings import PreemptionSettings, TransitionSettings

from .helpers import INVALID, SAMPLE, edited, minimal, sample, set_path

GPU = "nvidia.com/gpu"


def test_the_sample_policy_loads_with_the_quotas_of_both_teams() -> None:
    policy = load_policy_file(SAMPLE)
    assert policy.name == "gpu-cluster"
    assert spec_quotas(policy) == {
        QuotaKey.of("ai-frontier-research", "gpu-a100", GPU): ResourceQuota(4000),
        QuotaKey.of("ai-frontier-research", "gpu-a100", "cpu"): ResourceQuota(32000),
        QuotaKey.of("ai-frontier-research", "gpu-a100", "memory"): ResourceQuota(256 * 2**30 * 1000),
        QuotaKey.of("biz-model-serving", "gpu-a100", GPU): ResourceQuota(16000),
        QuotaKey.of("biz-model-serving", "gpu-a100", "cpu"): ResourceQuota(128000),
        QuotaKey.of("biz-model-serving", "gpu-a100", "memory"): ResourceQuota(2**40 * 1000),
    }
    assert {c.name: (c.value, c.experiment) for c in policy.spec.priority_classes} == {
        "high-priority-business": (1_000_000, False), "low-priority-experiment": (100, True)}


def test_settings_merge_the_team_override_into_the_defaults_in_seconds() -> None:
    doc = edited(sample(), lambda d: d["spec"]["teams"][0].update(
        transition={"duration": "40s", "stepInterval": "10s", "drain": False}))
    policy = parse_policy(doc)
    assert transition_settings(policy, "ai-frontier-research") == TransitionSettings(
        duration_s=40.0, step_interval_s=10.0, curve="linear", floor_milli=((GPU, 1000),), drain=False,
        deadline_s=408 * 3600.0, max_victims_per_hour=2, ramp_up=False)
    assert transition_settings(policy, "biz-model-serving").duration_s == 336 * 3600.0
    assert preemption_settings(policy) == PreemptionSettings(
        experiment_priority_threshold=1000, experiment_classes=frozenset({"low-priority-experiment"}),
        protected_classes=frozenset({"high-priority-business"}), min_runtime_s=600.0,
        starvation_grace_s=30.0, victim_hold_s=60.0, max_victims=8, window_s=3600.0, dry_run=False)


@pytest.mark.parametrize(("priority", "klass", "expected"), [
    (100, "low-priority-experiment", True),
    (500, None, True),
    (1000, None, False),
    (1_000_000, "high-priority-business", False),
], ids=["marked-class", "below-threshold", "at-threshold", "business"])
def test_a_workload_is_an_experiment_by_class_or_by_priority_below_the_threshold(
        priority: int, klass: str | None, expected: bool) -> None:
    assert preemption_settings(load_policy_file(SAMPLE)).is_experiment(priority, klass) is expected


def test_defaults_fill_every_optional_section() -> None:
    policy = parse_policy(minimal(a={}))
    spec = policy.spec
    assert (spec.fair_share.half_life, spec.fair_share.push_weights_to_kueue) == ("168h", False)
    assert (spec.preemption.min_runtime, spec.preemption.budget.max_victims, spec.preemption.dry_run) == \
        ("10m", 10, False)
    assert transition_settings(policy, "a") == TransitionSettings(
        duration_s=86400.0, step_interval_s=3600.0, curve="linear", floor_milli=(), drain=True,
        deadline_s=None, max_victims_per_hour=0, ramp_up=False)
    assert spec.teams[0].fair_share_weight == "1"


@pytest.mark.parametrize(("edit", "field", "fragment", "value"), [row[1:] for row in INVALID],
                         ids=[row[0] for row in INVALID])
def test_an_invalid_policy_is_rejected_with_the_field_and_value(edit: Any, field: str, fragment: str,
                                                                 value: object) -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(edited(sample(), edit), file="policy.yaml")
    err = caught.value
    assert (err.location.file, err.location.document, err.location.field) == \
        ("policy.yaml", "QuotaPolicy gpu-cluster", field)
    assert fragment in err.message
    if value is not None:
        assert err.value == value
    assert "\n" not in err.one_line()


def test_quantities_may_be_yaml_numbers_and_keep_their_text() -> None:
    policy = parse_policy(edited(sample(), set_path("spec.teams.0.quotas.0.resources.0.nominal", 1.5)))
    assert policy.spec.teams[0].quotas[0].resources[0].nominal == "1.5"
    assert spec_quotas(policy)[QuotaKey.of("ai-frontier-research", "gpu-a100", GPU)] == ResourceQuota(1500)


@pytest.mark.parametrize(("text", "fragment"), [
    ("spec: [unclosed", "x.yaml: invalid YAML at line 1, column 16"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "expected exactly one QuotaPolicy"),
    ("- 1\n- 2\n", "a QuotaPolicy must be a mapping"),
    ("apiVersion: queuemanager.dev/v1beta9\nkind: QuotaPolicy\nmetadata: {name: x}\nspec: {}\n",
     "expected apiVersion queuemanager.dev/v1alpha1"),
], ids=["bad-yaml", "no-policy", "not-a-mapping", "wrong-version"])
def test_unreadable_documents_are_one_line_errors(text: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        load_policy_yaml(text, file="x.yaml")
    assert fragment in caught.value.one_line()
    assert caught.value.location.file == "x.yaml"


def test_a_multi_document_file_yields_its_policies_and_skips_other_kinds(tmp_path: Path) -> None:
    docs = [minimal(a={}), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
            edited(minimal(b={}), set_path("metadata.name", "q"))]
    text = yaml.safe_dump_all(docs)
    assert [p.name for p in load_policies_yaml(text)] == ["p", "q"]
    with pytest.raises(InputError, match="expected exactly one QuotaPolicy"):
        load_policy_yaml(text)
    with pytest.raises(InputError, match="cannot read file"):
        load_policy_file(tmp_path / "missing.yaml")


def test_status_written_by_a_newer_operator_is_kept_not_rejected() -> None:
    doc = sample()
    doc["status"] = {"observedGeneration": 3, "futureField": {"x": 1},
                     "transitions": [{"team": "a", "flavor": "f", "resource": "cpu", "from": "4", "to": 1,
                                      "plan": {"steps": [1, 2]}, "extra": True}]}
    policy = parse_policy(doc)
    assert policy.status is not None
    assert policy.status.observed_generation == 3
    assert policy.status.transitions[0].from_ == "4"
    assert policy.status.model_dump(by_alias=True, exclude_none=True)["futureField"] == {"x": 1}
