"""References to the Kubernetes objects the operator reads and writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fairshare.policy import ObjectKey

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"  # the storage version since Kueue 0.16 (DESIGN.md)
QM_GROUP = "queuemanager.dev"
QM_VERSION = "v1alpha1"


@dataclass(frozen=True, slots=True)
class Kind:
    """A resource kind: how to address it in the API."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCE_FLAVOR = Kind(KUEUE_GROUP, KUEUE_VERSION, "ResourceFlavor", "resourceflavors", False)
COHORT = Kind(KUEUE_GROUP, KUEUE_VERSION, "Cohort", "cohorts", False)
CLUSTER_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "ClusterQueue", "clusterqueues", False)
LOCAL_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "LocalQueue", "localqueues", True)
WORKLOAD_PRIORITY_CLASS = Kind(KUEUE_GROUP, KUEUE_VERSION, "WorkloadPriorityClass", "workloadpriorityclasses",
                               False)
WORKLOAD = Kind(KUEUE_GROUP, KUEUE_VERSION, "Workload", "workloads", True)
QUOTA_POLICY = Kind(QM_GROUP, QM_VERSION, "QuotaPolicy", "quotapolicies", False)
# What a policy's spec.tenancy renders (fairshare/policy/tenancy.py): admission rules and RoleBindings.
VALIDATING_POLICY = Kind("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
                         "validatingadmissionpolicies", False)
VALIDATING_POLICY_BINDING = Kind("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
                                 "validatingadmissionpolicybindings", False)
ROLE_BINDING = Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True)
# Read (its Events name it), never written: a Workload's owner (spec.idle's warning is posted on it too).
JOB = Kind("batch", "v1", "Job", "jobs", True)

# Owned kinds in apply order: flavors and priority classes before the queues that name
# them, cohorts before ClusterQueues, ClusterQueues before LocalQueues (Kueue marks a
# LocalQueue inactive while its ClusterQueue is missing). Pruning goes in reverse.
OWNED_KINDS: tuple[Kind, ...] = (RESOURCE_FLAVOR, WORKLOAD_PRIORITY_CLASS, COHORT, CLUSTER_QUEUE, LOCAL_QUEUE,
                                 VALIDATING_POLICY, VALIDATING_POLICY_BINDING, ROLE_BINDING)
_BY_KIND = {k.kind: k for k in (*OWNED_KINDS, WORKLOAD, QUOTA_POLICY, JOB)}


def kind_of(kind: str) -> Kind:
    found = _BY_KIND.get(kind)
    if found is None:
        raise KeyError(f"not a kind the operator handles: {kind}")
    return found


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """kind + namespace + name (+ uid when known, for Events)."""

    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace or "", self.name)

    @staticmethod
    def of(obj: dict[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return ObjectRef(kind=str(obj.get("kind", "")), name=str(meta.get("name", "")),
                         namespace=meta.get("namespace"), uid=meta.get("uid"))


def key_of(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return ObjectKey(str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def ref_of(key: ObjectKey) -> ObjectRef:
    return ObjectRef(kind=key.kind, name=key.name, namespace=key.namespace or None)
