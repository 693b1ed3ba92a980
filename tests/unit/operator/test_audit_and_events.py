"""Audit records, Event bodies, eviction requests and status conditions (pure builders)."""

from __future__ import annotations

import json
import logging

import pytest

from fairshare.control import AuditAction as Action
from fairshare.policy.status import Condition
from queue_manager.audit import AuditRecord, log_audit
from queue_manager.conditions import condition, merge_conditions
from queue_manager.events import event_body
from queue_manager.eviction import EvictionRequest, deactivate_patch, evicted_condition_apply
from queue_manager.logs import JsonFormatter
from queue_manager.metrics import METRIC_NAMES, Metrics
from queue_manager.refs import ObjectRef

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _record(action: Action) -> AuditRecord:
    return AuditRecord(action, ObjectRef("ClusterQueue", "ai-frontier-research"), "nominalQuota 4 -> 3",
                       "transition step 1 of 3", "gpu-policy", 7)


@pytest.mark.parametrize(("action", "reason", "event_type"), [
    (Action.TRANSITION_STEP, "TransitionStep", "Normal"),
    (Action.DRIFT, "DriftCorrected", "Warning"),
    (Action.PREEMPT, "PreemptionRequested", "Warning"),
    (Action.PREEMPT_DRY_RUN, "PreemptionDryRun", "Normal"),
    (Action.POLICY_REJECTED, "PolicyRejected", "Warning"),
], ids=["step", "drift", "preempt", "dry-run", "rejected"])
def test_every_audit_action_maps_to_an_event_reason_and_type(action: Action, reason: str,
                                                             event_type: str) -> None:
    rec = _record(action)
    assert (rec.event_reason, rec.event_type) == (reason, event_type)


def test_an_audit_message_says_what_why_and_which_policy_generation() -> None:
    assert _record(Action.TRANSITION_STEP).message() == (
        "nominalQuota 4 -> 3; why: transition step 1 of 3; policy gpu-policy generation 7")


def test_every_action_has_an_event_reason() -> None:
    assert all(_record(a).event_reason for a in Action)


def test_an_audit_log_line_is_one_json_object_with_the_structured_fields() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("test.audit")
    logger.propagate = False
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    log_audit(logger, _record(Action.TRANSITION_STEP))
    doc = json.loads(JsonFormatter().format(records[0]))
    del doc["time"]
    assert doc == {
        "level": "INFO", "logger": "test.audit",
        "message": "transition-step: nominalQuota 4 -> 3 (transition step 1 of 3)",
        "action": "transition-step", "audit": True, "policy": "gpu-policy", "policyGeneration": 7,
        "target": "ClusterQueue ai-frontier-research", "what": "nominalQuota 4 -> 3",
        "why": "transition step 1 of 3",
    }


def test_an_event_on_a_cluster_scoped_object_lives_in_default() -> None:
    body = event_body(ObjectRef("ClusterQueue", "cq-a", uid="u1"), reason="DriftCorrected", message="m",
                      event_type="Warning", now=T0, name_suffix="abc", reporting_instance="pod-1")
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "cq-a.abc", "namespace": "default",
                     "labels": {"app.kubernetes.io/managed-by": "queue-manager"}},
        "involvedObject": {"kind": "ClusterQueue", "name": "cq-a", "apiVersion": "kueue.x-k8s.io/v1beta2",
                           "uid": "u1"},
        "reason": "DriftCorrected", "message": "m", "type": "Warning",
        "firstTimestamp": "2027-01-15T08:00:00Z", "lastTimestamp": "2027-01-15T08:00:00Z", "count": 1,
        "source": {"component": "queue-manager"}, "reportingComponent": "queue-manager",
        "reportingInstance": "pod-1",
    }


def test_an_event_on_a_workload_lives_in_its_namespace() -> None:
    body = event_body(ObjectRef("Workload", "exp-42", namespace="research"), reason="PreemptionRequested",
                      message="m", event_type="Warning", now=T0, name_suffix="1", reporting_instance="p")
    assert (body["metadata"]["namespace"], body["involvedObject"]["namespace"]) == ("research", "research")


def test_an_eviction_request_sets_only_the_evicted_condition_with_the_reason_as_message() -> None:
    req = EvictionRequest("research", "exp-42", "preempt research/exp-42: priority 100 < 1000", 3)
    assert evicted_condition_apply(req, now=T0) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "exp-42", "namespace": "research"},
        "status": {"conditions": [{
            "type": "Evicted", "status": "True", "reason": "Preempted",
            "message": "preempt research/exp-42: priority 100 < 1000",
            "lastTransitionTime": "2027-01-15T08:00:00Z", "observedGeneration": 3}]},
    }
    assert deactivate_patch() == {"spec": {"active": False}}


def test_a_long_eviction_reason_is_truncated_to_the_condition_limit() -> None:
    body = evicted_condition_apply(EvictionRequest("n", "w", "x" * 5000, 1), now=T0)
    assert len(body["status"]["conditions"][0]["message"]) == 1024


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = condition("Ready", True, "Applied", "ok", generation=1, now=T0)
    later = condition("Ready", True, "Applied", "ok", generation=2, now=T0 + 60, previous=[first])
    flipped = condition("Ready", False, "InvalidPolicy", "bad", generation=3, now=T0 + 120, previous=[later])
    assert [c.last_transition_time for c in (first, later, flipped)] == [
        "2027-01-15T08:00:00Z", "2027-01-15T08:00:00Z", "2027-01-15T08:02:00Z"]


def test_merging_conditions_replaces_by_type_and_sorts() -> None:
    old = [Condition(type="Ready", status="False"), Condition(type="Degraded", status="True")]
    new = [Condition(type="Ready", status="True"), Condition(type="Transitioning", status="True")]
    assert merge_conditions(old, new) == [Condition(type="Degraded", status="True"),
                                          Condition(type="Ready", status="True"),
                                          Condition(type="Transitioning", status="True")]


def test_the_documented_metric_names_are_exactly_the_registered_ones() -> None:
    names = set()
    for metric in Metrics().registry.collect():
        names.add(metric.name)
    # prometheus_client strips _total from counter family names.
    documented = {n.removesuffix("_total") for n in METRIC_NAMES}
    assert names == documented


def test_every_metric_is_documented_in_docs_operator_md() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "operator.md").read_text()
    assert [n for n in METRIC_NAMES if f"`{n}`" not in doc] == []
