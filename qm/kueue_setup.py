"""Which Kueue a forecast is for: the live Kueue's version and Configuration, read read-only, against the
matrix the differential verifies (tests/differential: Kueue v0.19.2, its default Configuration and
`fairSharing` with the default strategies). `qm plan` and `qm explain --kubeconfig` print one line saying what
they read and refuse (another minor version) or warn (another patch version, settings outside the matrix,
nothing readable) in one line.

Where it is read (the objects Kueue's release manifests install, namespace `kueue-system`):

- the version: the image tag of Deployment `kueue-controller-manager` (container `manager`); else the
  annotation `queuemanager.dev/kueue-version` of ConfigMap `kueue-manager-config`, which the local control
  plane (`devcluster`, where Kueue is a binary run outside the cluster) sets to its binary's version;
- the Configuration: that ConfigMap's `controller_manager_config.yaml`.

Neither readable (not installed that way, or no permission): the version is unknown, one warning line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairshare.models import ClusterState, quotas_of
from fairshare.quantity import format_quantity
from fairshare.scheduler import SchedulerConfig
from queue_manager.kueue_config import (
    CONFIGMAP,
    NAMESPACE,
    ReadConfiguration,
    configuration_of,
    fair_sharing_of,
    setting_from,
    strategies_of,
)

DEPLOYMENT = "kueue-controller-manager"
VERSION_ANNOTATION = "queuemanager.dev/kueue-version"

# The matrix `make differential` runs (tools/controlplane/versions.env; tests/differential/targets.py).
VERIFIED_VERSIONS = ("v0.19.2",)
VERIFIED_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")  # Kueue's default S2-a, S2-b
# Feature gates whose settings no scheduling decision reads: VisibilityOnDemand serves the pending-workloads
# API (the local control plane turns it off).
NEUTRAL_GATES = frozenset({"VisibilityOnDemand"})
# Configuration fields that change admission and that the differential does not run.
UNVERIFIED_FIELDS = ("admissionFairSharing", "waitForPodsReady", "resources", "manageJobsWithoutQueueName",
                     "objectRetentionPolicies", "multiKueue")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class KueueSetup:
    version: str | None  # "v0.19.2", or None when not readable
    version_from: str  # where it was read, or why not
    configuration: Mapping[str, Any] | None  # the Configuration, None when not readable
    configuration_from: str
    problems: tuple[str, ...] = field(default=())

    @property
    def fair_sharing(self) -> bool:
        """Kueue's switch for fair sharing (queue_manager.kueue_config.fair_sharing_of)."""
        return self.configuration is not None and fair_sharing_of(self.configuration)

    def scheduler_config(self) -> SchedulerConfig:
        """What the model follows of this Configuration, as the operator follows it: fair sharing and its
        strategies (the rest of SchedulerConfig at Kueue's defaults; `unverified` names what else differs)."""
        return setting_from(ReadConfiguration(self.configuration, self.configuration_from)).scheduler_config()

    @property
    def strategies(self) -> tuple[str, ...]:
        return strategies_of(self.configuration or {}) or VERIFIED_STRATEGIES

    @property
    def feature_gates(self) -> dict[str, bool]:
        gates = (self.configuration or {}).get("featureGates")
        return {str(k): bool(v) for k, v in gates.items()} if isinstance(gates, Mapping) else {}

    def settings(self) -> str:
        """The settings that change a forecast, in words."""
        if self.configuration is None:
            return "Configuration unknown"
        fair = f"fair sharing on ({', '.join(self.strategies)})" if self.fair_sharing else "fair sharing off"
        gates = {k: v for k, v in sorted(self.feature_gates.items()) if k not in NEUTRAL_GATES}
        shown = ", ".join(f"{k}={'true' if v else 'false'}" for k, v in gates.items()) or "Kueue's defaults"
        return f"{fair}; feature gates: {shown}"


def _minor(version: str) -> tuple[int, int] | None:
    m = _VERSION.match(version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def unverified(setup: KueueSetup) -> list[str]:
    """What is outside the verified matrix, in words (empty: inside it)."""
    out: list[str] = []
    if setup.version is None:
        out.append(f"Kueue's version is unknown ({setup.version_from})")
    elif setup.version not in VERIFIED_VERSIONS:
        out.append(f"Kueue {setup.version}")
    if setup.configuration is None:
        out.append(f"its Configuration is unknown ({setup.configuration_from})")
        return out
    if setup.fair_sharing and setup.strategies != VERIFIED_STRATEGIES:
        out.append(f"fairSharing.preemptionStrategies {list(setup.strategies)}")
    gates = sorted(k for k in setup.feature_gates if k not in NEUTRAL_GATES)
    if gates:
        out.append("feature gates " + ", ".join(f"{k}={str(setup.feature_gates[k]).lower()}" for k in gates))
    out += [name for name in UNVERIFIED_FIELDS if setup.configuration.get(name) not in (None, {}, [])]
    return out


@dataclass(frozen=True)
class Verdict:
    line: str  # what was read, and whether it is verified
    warning: str | None  # one line, or None
    refuse: str | None  # one line: the command stops (exit 2) unless told to go on


def verdict(setup: KueueSetup, *, allow_unverified: bool) -> Verdict:
    """Refuse a Kueue of another minor version than the verified ones (its rules may differ: v0.20 adds
    effective quotas, preemption gates, ...), unless `allow_unverified`; warn for anything else outside the
    matrix. qm plan and qm explain model the live fairSharing setting; the operator follows it too
    (queue_manager/kueue_config.py)."""
    matrix = ", ".join(VERIFIED_VERSIONS)
    read = (f"Kueue {setup.version or 'version unknown'} ({setup.version_from}); {setup.settings()} "
            f"({setup.configuration_from})")
    outside = unverified(setup)
    if not outside:
        return Verdict(f"{read}: verified (the differential runs Kueue {matrix} with these settings)",
                       None, None)
    what = "; ".join(outside)
    verified = _minor(setup.version or "") in {_minor(v) for v in VERIFIED_VERSIONS}
    if setup.version is not None and not verified and not allow_unverified:
        return Verdict(read, None, f"the forecast is verified for Kueue {matrix} only, and this cluster runs "
                       f"{what}: its scheduling rules may differ; run with --allow-unverified-kueue to "
                       "forecast anyway")
    return Verdict(read, f"warning: not verified: {what} (the differential runs Kueue {matrix}, default "
                   "Configuration or fairSharing with the default strategies); the forecast may differ", None)


def setup_from(deployment: Mapping[str, Any] | None, configmap: Mapping[str, Any] | None,
               *, why_no_deployment: str = "no Deployment",
               why_no_configmap: str = "no ConfigMap") -> KueueSetup:
    """Pure: the setup from the Deployment and ConfigMap as read (None: absent or not readable)."""
    version: str | None = None
    version_from = why_no_deployment
    problems: list[str] = []
    if deployment is not None:
        containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers") or []
        first = containers[0] if containers else {}
        manager = next((c for c in containers if c.get("name") == "manager"), first)
        image = str(manager.get("image") or "")
        named = image.split("@", 1)[0].rsplit("/", 1)[-1]  # registry/path/name:tag@digest -> name:tag
        tag = named.rsplit(":", 1)[1] if ":" in named else ""
        if _VERSION.match(tag):
            version, version_from = tag, f"image of Deployment {NAMESPACE}/{DEPLOYMENT}"
        else:
            version_from = f"Deployment {NAMESPACE}/{DEPLOYMENT} has image {image!r}, no version tag"
    if configmap is not None:
        annotations = (configmap.get("metadata") or {}).get("annotations") or {}
        if version is None and isinstance(annotations.get(VERSION_ANNOTATION), str):
            version = annotations[VERSION_ANNOTATION]
            version_from = f"annotation {VERSION_ANNOTATION} of ConfigMap {NAMESPACE}/{CONFIGMAP}"
    read = configuration_of(configmap, why_absent=why_no_configmap)
    if read.problem is not None:
        problems.append(read.problem)
    return KueueSetup(version, version_from, read.configuration, read.source, tuple(problems))


def read_setup(reader: Any) -> KueueSetup:
    """The live setup through a `qm.live.LiveReader` (read only; 401/403/404 mean "not readable")."""
    from kubernetes import client as k8s

    apps, core = k8s.AppsV1Api(reader.api), k8s.CoreV1Api(reader.api)
    deployment = reader._call(
        f"get Deployment {NAMESPACE}/{DEPLOYMENT}",
        lambda: reader.api.sanitize_for_serialization(apps.read_namespaced_deployment(
            DEPLOYMENT, NAMESPACE, _request_timeout=reader.timeout)), absent=(401, 403, 404))
    configmap = reader._call(
        f"get ConfigMap {NAMESPACE}/{CONFIGMAP}",
        lambda: reader.api.sanitize_for_serialization(core.read_namespaced_config_map(
            CONFIGMAP, NAMESPACE, _request_timeout=reader.timeout)), absent=(401, 403, 404))
    return setup_from(deployment, configmap,
                      why_no_deployment=f"no readable Deployment {NAMESPACE}/{DEPLOYMENT}",
                      why_no_configmap=f"no readable ConfigMap {NAMESPACE}/{CONFIGMAP}")


def effective_quota_lines(state: ClusterState) -> list[str]:
    """One line per ClusterQueue whose `status.effectiveQuota` differs from its spec: Kueue schedules with the
    effective quota, and so do the model and the forecast."""
    out: list[str] = []
    for name in sorted(state.cluster_queues):
        cq = state.cluster_queues[name]
        if cq.spec_resource_groups is None:
            continue
        effective, declared = cq.quotas(), quotas_of(cq.spec_resource_groups)
        diffs = []
        for fr in sorted(set(effective) | set(declared)):
            e, d = effective.get(fr), declared.get(fr)
            if e is None or d is None or e.nominal != d.nominal:
                shown_e = "none" if e is None else format_quantity(e.nominal)
                shown_d = "none" if d is None else format_quantity(d.nominal)
                diffs.append(f"{fr.flavor}/{fr.resource} {shown_e} (spec {shown_d})")
        if diffs:
            out.append(f"ClusterQueue {name}: effective quota (status.effectiveQuota) in force: "
                       + ", ".join(diffs))
    return out
