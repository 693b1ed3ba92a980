"""When the harness counts a submission as evaluated by Kueue (no control plane: RealCluster.evaluated
reads only the Workloads given to it).

Seed 227 in fair-sharing mode, the state the 130:300 run found: in every cycle cq1's StrictFIFO head
w03 reserves the quota it waits for, so cq0's head w07 (priority 800) is skipped ("no longer fits after
processing another workload") and requeued at once; w08 (priority 0, same BestEffortFIFO queue) is never
popped and never gets a condition. Kueue is settled; before, the harness waited 25 s and called the
state "not settled".
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from tests.differential.cluster import RealCluster, workload_body
from tests.differential.generator import GeneratedState, generate

Obj = dict[str, Any]


def _pending(g: GeneratedState, name: str, message: str | None, created: str) -> Obj:
    spec = next(w for w in g.workloads if w.name == name)
    body = workload_body(spec)
    body["metadata"].update(namespace=g.namespace, creationTimestamp=created)
    if message is not None:
        body["status"] = {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
            ]
        }
    return body


def _evaluated(w07_message: str | None) -> bool:
    g = generate(227, "fair-sharing")
    w07 = _pending(g, "w07", w07_message, "2026-12-01T18:30:43Z")
    w08 = _pending(g, "w08", None, "2026-12-01T18:30:44Z")
    assert w07["spec"]["queueName"] == w08["spec"]["queueName"]
    assert w07["spec"]["priority"] > w08["spec"]["priority"]
    return RealCluster(k8s.ApiClient(), g).evaluated("w08", [w07, w08])


def test_a_submission_behind_a_head_kueue_requeues_at_once_is_evaluated() -> None:
    assert _evaluated("Workload no longer fits after processing another workload")


def test_a_submission_behind_a_parked_head_of_a_best_effort_queue_is_not_evaluated_yet() -> None:
    # A parked workload leaves the heap: Kueue pops the submission next.
    assert not _evaluated("couldn't assign flavors to pod set main: insufficient unused quota")


def test_a_submission_behind_a_head_not_evaluated_yet_is_not_evaluated() -> None:
    assert not _evaluated(None)
