"""Whose a workload is, by a policy: its team (ClusterQueue), LocalQueue and project. One rule for every
shell that needs it (the operator's metrics and audit records, the ledger's accounting), so that `qm audit
--team`, `qm usage --by team` and the operator's gauges name the same team for the same workload.

The team is the ClusterQueue Kueue charges the workload to (Kueue `pkg/workload`: the admission's
`status.admission.clusterQueue` once quota is reserved; before that, the ClusterQueue of the LocalQueue
`spec.queueName` in the workload's namespace, `LocalQueue.spec.clusterQueue`). The policy renders one
LocalQueue per team and namespace (`local_queue_name`, fairshare/policy/render.py), pointing at the
team's ClusterQueue; a workload queued in a LocalQueue the policy did not render is not the policy's.
"""

from __future__ import annotations

from fairshare.models import Workload

from .model import QuotaPolicy, Team

DEFAULT_PROJECT_LABEL = "project"


def team_of(policy: QuotaPolicy, wl: Workload) -> str | None:
    """The team of `policy` that `wl` is charged to, or None when it is not the policy's."""
    teams = policy.spec.teams
    if wl.admission is not None:
        admitted = wl.admission.cluster_queue
        return admitted if any(t.name == admitted for t in teams) else None
    return queue_team(policy, wl.namespace, wl.queue_name)


Ownership = tuple[tuple[str, tuple[str, ...], str], ...]  # per team: name, namespaces, LocalQueue name


def ownership(policy: QuotaPolicy) -> Ownership:
    """All that team_of reads of the policy, in its order: two policies with the same ownership own the
    same Workloads, as the same teams (a quota edit changes none of it)."""
    return tuple((t.name, tuple(t.namespaces), local_queue_name(t)) for t in policy.spec.teams)


def queue_team(policy: QuotaPolicy, namespace: str, local_queue: str) -> str | None:
    """The team whose rendered LocalQueue is `namespace`/`local_queue`, if any."""
    for t in policy.spec.teams:
        if namespace in t.namespaces and local_queue == local_queue_name(t):
            return t.name
    return None


def local_queue_name(team: Team) -> str:
    """The name of the LocalQueue the policy renders for `team` in each of its namespaces."""
    return team.local_queue_name or team.name


def local_queue_keys(team: Team) -> tuple[str, ...]:
    """The team's LocalQueues, "namespace/name", in namespace order."""
    name = local_queue_name(team)
    return tuple(f"{ns}/{name}" for ns in sorted(team.namespaces))


def project_label(policy: QuotaPolicy) -> str:
    """The workload label that names its project: `spec.fairShare.projectLabel` (the label the usage
    history already groups by, e.g. queuemanager.dev/project), else "project"."""
    return policy.spec.fair_share.project_label or DEFAULT_PROJECT_LABEL


def project_of(policy: QuotaPolicy, wl: Workload) -> str | None:
    """The value of the policy's project label on `wl` (None when the label is absent)."""
    key = project_label(policy)
    return next((v for k, v in wl.labels if k == key), None)
