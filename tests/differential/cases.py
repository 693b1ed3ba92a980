"""A disagreement saved as a reproduction case in the conformance format (tests/conformance).

The case is the real state just before the step (what Kueue held, the pending workloads, which
of them it had parked) plus the submission, run with ``spec.cycles: UntilSettled``; the
expectation is what the real Kueue did (who holds quota on which flavors after it settled, whom
it preempted and why, or that it preempted in a loop). A disagreement of a timing class keeps
``spec.expectedFailure`` with its class, so the corpus stays green while it records it.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import yaml

from tests.differential.cluster import holds_quota
from tests.differential.model import clean_workload, key_names
from tests.differential.runner import StateRecord, StepRecord

Obj = dict[str, Any]
KUEUE_VERSION = "v0.19.2"


def _rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def case_documents(state: StateRecord, step: StepRecord) -> list[Obj]:
    generated = state.generated
    if generated is None:  # pragma: no cover - run_state always sets it
        raise ValueError("no generated state")
    verdict = step.resynced_verdict
    names = {v: k for k, v in key_names([*step.pre_state, step.new_workload]).items()}  # submission -> key
    expect: Obj = {}
    if step.real.livelock:
        expect["livelock"] = sorted(names[n] for n in step.real.preempted)
    else:
        admitted = {}
        for w in step.real.workloads:
            if holds_quota(w):
                key = f"{w['metadata']['namespace']}/{w['metadata']['name']}"
                admitted[key] = {
                    psa["name"]: dict(psa.get("flavors", {}))
                    for psa in w["status"]["admission"]["podSetAssignments"]
                }
        expect["admitted"] = dict(sorted(admitted.items()))
        expect["preempted"] = {names[n]: reason for n, (_, reason) in sorted(step.real.preempted.items())}
    spec: Obj = {
        "source": (
            f"tests/differential: real Kueue {KUEUE_VERSION}, {state.mode} seed {state.seed}, "
            f"step {step.index} (submission {step.name}); model: {verdict.difference}"
        ),
        "now": _rfc3339(step.now),
        "cycles": "UntilSettled",
        "expect": expect,
    }
    if generated.fair_sharing:
        spec["config"] = {
            "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
        }
    if step.parked:
        spec["parked"] = list(step.parked)
    if verdict.cls.startswith("timing"):
        spec["expectedFailure"] = verdict.cls
    header = {
        "apiVersion": "conformance.queuemanager.dev/v1",
        "kind": "CycleCase",
        "metadata": {"name": case_name(state, step)},
        "spec": spec,
    }
    workloads = [clean_workload(w) for w in step.pre_state] + [
        clean_workload(step.new_workload, pending=True)
    ]
    return [header, *generated.objects, *workloads]


def case_name(state: StateRecord, step: StepRecord) -> str:
    cls = step.resynced_verdict.cls or ("livelock" if step.real.livelock else "agrees")
    return f"differential {state.mode} seed {state.seed} step {step.index} ({cls})"


def file_name(state: StateRecord, step: StepRecord) -> str:
    return re.sub(r"[^a-z0-9]+", "-", case_name(state, step).lower()).strip("-") + ".yaml"


def save_case(directory: Path, state: StateRecord, step: StepRecord) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(state, step)
    path.write_text(yaml.safe_dump_all(case_documents(state, step), sort_keys=False), encoding="utf-8")
    return path
