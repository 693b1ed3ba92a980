"""The Workload fields the ledger needs, parsed from Kueue's API object (fairshare.manifests)."""

from __future__ import annotations

import pytest

from fairshare.errors import InputError
from fairshare.manifests import parse_object
from fairshare.models import Workload

from .kueue_docs import T0, Doc, ts


def test_owner_deletion_time_accumulated_time_and_eviction_counts_are_parsed() -> None:
    doc = Doc().reserved(T0).evicted(T0 + 60).evicted(T0 + 120, reason="PodsReadyTimeout", preempted=None)
    doc = doc.released(T0 + 180).deleting(T0 + 240)
    wl = doc.workload()
    assert (wl.owner_kind, wl.owner_name, wl.deletion_timestamp, wl.accumulated_past_execution_seconds,
            wl.eviction_stats) == ("Job", "train", T0 + 240, 180,
                                   (("PodsReadyTimeout", "", 1), ("Preempted", "", 1)))


def test_the_controller_owner_wins_over_the_first_owner() -> None:
    doc = Doc()
    doc.raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "1"},
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "2",
         "controller": True},
    ]
    wl = doc.workload()
    assert (wl.owner_kind, wl.owner_name) == ("JobSet", "js")


def test_a_workload_without_those_fields_gets_none_and_empty() -> None:
    doc = Doc()
    del doc.raw["metadata"]["ownerReferences"]
    wl = doc.workload()
    assert (wl.owner_kind, wl.owner_name, wl.deletion_timestamp, wl.accumulated_past_execution_seconds,
            wl.eviction_stats) == (None, None, None, None, ())


@pytest.mark.parametrize(("path", "value", "field"), [
    (("status", "schedulingStats"), {"evictions": [{"reason": "Preempted", "count": -1}]},
     "status.schedulingStats.evictions[0].count"),
    (("status", "accumulatedPastExecutionTimeSeconds"), "ten", "status.accumulatedPastExecutionTimeSeconds"),
    (("metadata", "deletionTimestamp"), "yesterday", "metadata.deletionTimestamp"),
    (("metadata", "ownerReferences"), [{"name": "x"}], "metadata.ownerReferences[0].kind"),
], ids=lambda v: str(v) if isinstance(v, str) else "")
def test_a_bad_value_is_one_line_naming_the_field(path: tuple[str, str], value: object, field: str) -> None:
    doc = Doc()
    doc.raw[path[0]][path[1]] = value
    with pytest.raises(InputError) as err:
        parse_object(doc.raw)
    assert f"field {field}" in err.value.one_line()


def test_a_plain_workload_still_parses_as_before() -> None:
    wl = parse_object({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                       "metadata": {"name": "a", "creationTimestamp": ts(T0)},
                       "spec": {"podSets": [{"count": 1, "template": {"spec": {"containers": []}}}]}})
    assert isinstance(wl, Workload) and wl.owner_kind is None and wl.eviction_stats == ()
