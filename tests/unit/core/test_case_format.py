"""The case format's extensions (fairshare.conformance): parked workloads, evictions in progress,
cycles until settled, livelocks and expected failures."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fairshare.conformance import load_case, run_case, summary_lines
from fairshare.errors import InputError

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}


def _cq(name: str, cpu: int, *, within: str = "Never", cohort: str | None = None) -> dict[str, object]:
    spec: dict[str, object] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": within},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _lq(cq: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": cq},
        "spec": {"clusterQueue": cq},
    }


def _wl(
    cq: str,
    name: str,
    cpu: int,
    *,
    priority: int = 0,
    created: str = "00:00:00",
    admitted: str | None = None,
    evicted: bool = False,
) -> dict[str, object]:
    wl: dict[str, object] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": cq, "creationTimestamp": f"2026-01-01T{created}Z"},
        "spec": {
            "queueName": "main",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}
                    },
                }
            ],
        },
    }
    if admitted is not None:
        conds = [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": f"2026-01-01T{admitted}Z",
            }
        ]
        if evicted:
            conds.append(
                {
                    "type": "Evicted",
                    "status": "True",
                    "reason": "Preempted",
                    "lastTransitionTime": "2026-01-01T00:09:00Z",
                }
            )
        wl["status"] = {
            "conditions": conds,
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [
                    {"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": str(cpu)}, "count": 1}
                ],
            },
        }
    return wl


def _write(tmp_path: Path, spec: dict[str, object], objects: list[dict[str, object]]) -> Path:
    header = {
        "apiVersion": "conformance.queuemanager.dev/v1",
        "kind": "CycleCase",
        "metadata": {"name": "a case"},
        "spec": {"now": "2026-01-01T00:10:00Z", **spec},
    }
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump_all([header, FLAVOR, *objects]))
    return path


BEHIND_PARKED = [
    _cq("q", 4),
    _lq("q"),
    _wl("q", "running", 3, admitted="00:01:00"),
    _wl("q", "big", 2, created="00:02:00"),
    _wl("q", "small", 1, created="00:03:00"),
]


def test_a_parked_workload_is_not_a_head_of_the_cycle(tmp_path: Path) -> None:
    # Without spec.parked "big" is the head and "small" waits; parked, "small" is the head and fits.
    plain = run_case(load_case(_write(tmp_path, {"expect": {"admitted": {}}}, BEHIND_PARKED)))
    parked = run_case(
        load_case(
            _write(tmp_path, {"parked": ["q/big"], "expect": {"admitted": {"q/small": None}}}, BEHIND_PARKED)
        )
    )
    assert (plain.passed, parked.passed) == (True, True)


def test_until_settled_expects_everything_holding_quota_and_every_eviction(tmp_path: Path) -> None:
    objects = [
        _cq("q", 4, within="LowerPriority"),
        _lq("q"),
        _wl("q", "low", 4, admitted="00:01:00"),
        _wl("q", "high", 3, priority=10, created="00:05:00"),
    ]
    spec = {
        "cycles": "UntilSettled",
        "expect": {"admitted": {"q/high": {"main": {"cpu": "f"}}}, "preempted": {"q/low": "InClusterQueue"}},
    }
    assert run_case(load_case(_write(tmp_path, spec, objects))).passed is True


def test_an_eviction_in_progress_is_charged_and_not_preempted_again(tmp_path: Path) -> None:
    # "going" (Evicted=True, still holding 3 cpu) is what "high" waits for: one cycle preempts no
    # one new and admits nobody; once settled, "going" has released its quota and "high" holds it.
    objects = [
        _cq("q", 4, within="LowerPriority"),
        _lq("q"),
        _wl("q", "going", 3, admitted="00:01:00", evicted=True),
        _wl("q", "high", 3, priority=10, created="00:05:00"),
    ]
    one = run_case(
        load_case(
            _write(
                tmp_path, {"expect": {"admitted": {}, "preempted": {}}}, objects
            )
        )
    )
    settled = run_case(
        load_case(
            _write(tmp_path, {"cycles": "UntilSettled", "expect": {"admitted": {"q/high": None}}}, objects)
        )
    )
    assert (one.passed, settled.passed, settled.message) == (True, True, "")


def test_an_expected_failure_passes_as_xfail_and_fails_once_the_model_agrees(tmp_path: Path) -> None:
    wrong = {"expectedFailure": "timing: why", "expect": {"admitted": {"q/big": None}}}
    right = {"expectedFailure": "timing: why", "parked": ["q/big"], "expect": {"admitted": {"q/small": None}}}
    xfail = run_case(load_case(_write(tmp_path, wrong, BEHIND_PARKED)))
    xpass = run_case(load_case(_write(tmp_path, right, BEHIND_PARKED)))
    assert (
        xfail.passed,
        summary_lines([xfail])[0].startswith("XFAIL a case: timing: why"),
        xpass.passed,
        "remove spec.expectedFailure" in xpass.message,
    ) == (True, True, False, True)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"cycles": "Twice"}, "spec.cycles"),
        ({"parked": ["q/running"]}, "spec.parked"),
        ({"parked": "q/big"}, "spec.parked"),
        ({"expect": {"livelock": ["q/big"]}}, "spec.expect.livelock"),
        (
            {"cycles": "UntilSettled", "timing": {"requeueBatchPeriod": "soon"}},
            "spec.timing.requeueBatchPeriod",
        ),
        ({"cycles": "UntilSettled", "timing": {"releaseVictims": "AllAtOnce"}}, "spec.timing.releaseVictims"),
        ({"expectedFailure": 3}, "spec.expectedFailure"),
    ],
    ids=[
        "unknown-cycles",
        "parked-not-pending",
        "parked-not-a-list",
        "livelock-needs-until-settled",
        "bad-batch-period",
        "bad-release",
        "xfail-not-a-string",
    ],
)
def test_a_bad_extension_field_is_one_located_error(
    tmp_path: Path, spec: dict[str, object], field: str
) -> None:
    with pytest.raises(InputError) as err:
        load_case(_write(tmp_path, spec, BEHIND_PARKED))
    assert field in str(err.value) and "\n" not in str(err.value)
