"""The fake nodes of `qm dev-cluster up --policy FILE`: for each flavor of a QuotaPolicy, KWOK nodes that
carry the flavor's `nodeLabels` and `nodeTaints` and hold what its teams' quotas add up to, so that the
policy's sample Jobs run on the local cluster as written (Kueue adds the flavor's nodeLabels to an admitted
pod's nodeSelector and its tolerations to the pod: a node without the labels keeps the pod Pending).

Pure: the policy in, `devcluster.nodes.NodeGroup`s out.
"""

from __future__ import annotations

from dataclasses import dataclass

from devcluster.nodes import GPU_RESOURCE, NodeGroup, NodeShape, Taint
from fairshare.policy import QuotaPolicy
from fairshare.quantity import parse_quantity

# GPUs per node come in eights (a GPU server), so that jobs of 1, 2, 4 or 8 GPUs whose total fits the quota
# also fit the nodes: a node of 10 GPUs holding two 4-GPU pods has 2 left that no 4-GPU pod can use, and
# Kueue, which admits by quota, would start a pod the scheduler cannot place.
GPUS_PER_SERVER = 8
GI = 2**30
# Labels Kueue copies from a Job to its Workload (integrations.labelKeysToCopy) so that the ledger can
# account them (docs/ledger.md, "What is recorded"): the ledger's own, plus the policy's.
ACCOUNTED_LABELS = ("project", "team", "cost-center", "queuemanager.dev/user")


@dataclass(frozen=True, slots=True)
class FlavorNeeds:
    """What the teams' nominal quotas of one flavor add up to (milli-units)."""

    flavor: str
    gpus: int = 0
    cpu: int = 0
    memory: int = 0


def needs(policy: QuotaPolicy) -> list[FlavorNeeds]:
    """Per flavor, in the policy's order, the sum of every team's nominal quota of GPUs, CPU and memory
    (the cohort's capacity: what the teams may hold at once, borrowing included)."""
    out = []
    for flavor in policy.spec.flavors:
        totals = {GPU_RESOURCE: 0, "cpu": 0, "memory": 0}
        for team in policy.spec.teams:
            for quota in team.quotas:
                if quota.flavor != flavor.name:
                    continue
                for r in quota.resources:
                    if r.name in totals:
                        totals[r.name] += parse_quantity(r.nominal)
        out.append(FlavorNeeds(flavor.name, totals[GPU_RESOURCE], totals["cpu"], totals["memory"]))
    return out


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def node_groups(policy: QuotaPolicy, nodes: int | None = None) -> list[NodeGroup]:
    """One group of nodes per flavor: `nodes` nodes each (default: as many 8-GPU nodes as the flavor's GPU
    quota needs, at least one), every node with the flavor's labels and taints and an equal share of the
    quota, GPUs rounded up to a multiple of 8 and CPU and memory by the same factor; never less than the
    default fake node (8 GPUs, 64 CPUs, 512Gi)."""
    default = NodeShape()
    groups = []
    by_name = {f.name: f for f in policy.spec.flavors}
    for need in needs(policy):
        gpus = _ceil_div(need.gpus, 1000)
        count = nodes if nodes is not None else max(1, _ceil_div(gpus, GPUS_PER_SERVER))
        per_node = max(GPUS_PER_SERVER, _ceil_div(_ceil_div(gpus, count), GPUS_PER_SERVER) * GPUS_PER_SERVER)
        # CPU and memory scaled as the GPUs were (2 nodes of 16 GPUs for 20 GPUs of quota: x1.6 each).
        slack = (per_node * count, gpus) if gpus else (1, 1)
        cpu = max(int(default.cpu), _ceil_div(need.cpu * slack[0], count * slack[1] * 1000))
        memory_gi = max(512, _ceil_div(need.memory * slack[0], count * slack[1] * 1000 * GI))
        flavor = by_name[need.flavor]
        groups.append(NodeGroup(
            count=count,
            shape=NodeShape(gpus=per_node if gpus else 0, cpu=str(cpu), memory=f"{memory_gi}Gi"),
            labels=dict(flavor.node_labels),
            taints=tuple(Taint(t.key, t.effect, t.value) for t in flavor.node_taints),
            prefix=f"kwok-{need.flavor}",
        ))
    return groups


def labels_to_copy(policy: QuotaPolicy) -> list[str]:
    """The Workload labels the ledger and the usage history read: Kueue copies them from the Job."""
    keys = list(ACCOUNTED_LABELS)
    extra = [policy.spec.fair_share.project_label, *policy.spec.ledger.labels]
    keys += [k for k in extra if k and k not in keys]
    return keys
