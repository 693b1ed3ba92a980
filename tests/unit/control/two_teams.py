"""The two-team QuotaPolicy the controller's twin tests build on: research and business in one cohort, one
GPU flavor, no Kueue preemption (the controller's planner is the only one), an experiment class below a
protected one. Each test module passes what it varies."""

from __future__ import annotations

from fairshare.policy import QuotaPolicy, parse_policy

GPU = "nvidia.com/gpu"


def two_team_policy(*, research: int, business: int, max_victims: int = 5, min_runtime: str = "0s",
                    grace: str, duration: str, step: str, drain: bool) -> QuotaPolicy:
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "priorityClasses": [{"name": "biz", "value": 1000},
                                {"name": "exp", "value": 10, "experiment": True}],
            "teams": [
                {"name": "research", "namespaces": ["r"], "cohort": "org", "preemption": never,
                 "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": research}]}]},
                {"name": "business", "namespaces": ["b"], "cohort": "org", "preemption": never,
                 "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": business}]}]}],
            "preemption": {"protectedClasses": ["biz"], "minRuntime": min_runtime, "starvationGrace": grace,
                           "victimHold": "30s", "budget": {"maxVictims": max_victims, "window": "1h"}},
            "transitions": {"defaults": {"duration": duration, "stepInterval": step, "drain": drain}},
        }})
