"""The smallest looping state of issue 32 (docs/control.md, "Eviction storms"), as a QuotaPolicy and its
workloads: three teams of 4 GPUs in one cohort with fair sharing; team b runs five experiments (4, 2, 1, 4
and 1 GPUs: 12, borrowing 8); a 6-GPU training job of team a arrives. Under the weights a=545m, b=1, c=1834m
Kueue's fair sharing preempts three of b's experiments for it (S2-a twice, then S2-b), and one of them wins
the next tournament back (b's share with it, 3/12, is below a's with the trainer, 2/12 / 0.545): the trainer
no longer fits and preempts again after the 1 s requeue, forever. Under the policy's weights (all 1) it is
admitted after one preemption. The unit tests, the differential test on the real Kueue and the docs'
reproduction use it."""

from __future__ import annotations

from typing import Any

from fairshare.policy import QuotaPolicy, parse_policy

GPU = "nvidia.com/gpu"
LOOPING_WEIGHTS = {"a": "545m", "b": "1", "c": "1834m"}
EXPERIMENTS = (("exp-0", 4), ("exp-1", 2), ("exp-2", 1), ("exp-3", 4), ("exp-4", 1))  # team b, in order
TRAINER = ("train", 6)  # team a


def storm_policy(*, push: bool = True, weights: dict[str, str] | None = None,
                 cool_down: str | None = None) -> QuotaPolicy:
    """`weights`: the teams' own fairShareWeight (the policy's weights loop), else 1 each; `cool_down`:
    spec.preemption.stormCoolDown (default: the CRD's)."""

    def team(name: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": name, "namespaces": [name], "localQueueName": "main", "cohort": "pool",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4}]}]}
        if weights is not None:
            out["fairShareWeight"] = weights[name]
        return out

    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "storm"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "priorityClasses": [{"name": "train", "value": 1000},
                                {"name": "exp", "value": 100, "experiment": True}],
            "teams": [team("a"), team("b"), team("c")],
            "fairShare": {"halfLife": "3d", "pushWeightsToKueue": push},
            **({"preemption": {"stormCoolDown": cool_down}} if cool_down is not None else {}),
        }})
