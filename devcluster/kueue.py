"""Kueue out of cluster: its configuration, its webhook registrations by URL, and its CRDs.

Everything is derived from the manifests shipped in the Kueue module (copied to the cache by
build.sh), never from hand-written copies.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import yaml

from devcluster.kueue_config import KueueConfig, merge_configuration
from devcluster.rest import JSON

# Kueue's job integrations and the (API group, resource) their webhooks match. Only the
# webhooks of enabled integrations are registered: the others would be served by nobody and,
# being failurePolicy=Fail, would reject every object of their kind.
FRAMEWORK_RESOURCES: dict[str, tuple[str, str]] = {
    "batch/job": ("batch", "jobs"),
    "ray.io/raycluster": ("ray.io", "rayclusters"),
}
# The CRDs an integration's objects need beyond Kubernetes' own, as (Go module, file in it). Kueue v0.19.2's
# go.mod requires github.com/ray-project/kuberay/ray-operator v1.6.2 (the RayCluster API its integration is
# built against), so building Kueue put that module, and its CRD YAML, in the Go module cache.
FRAMEWORK_CRDS: dict[str, tuple[str, str]] = {
    "ray.io/raycluster": ("github.com/ray-project/kuberay/ray-operator@v1.6.2",
                          "config/crd/bases/ray.io_rayclusters.yaml"),
}
KUEUE_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True, slots=True)
class KueueEndpoints:
    webhook_port: int
    health_port: int


def configuration(
    endpoints: KueueEndpoints, cert_dir: Path, frameworks: Sequence[str], user: KueueConfig | None = None
) -> JSON:
    """The ``config.kueue.x-k8s.io/v1beta2`` Configuration for a loopback, out-of-cluster manager,
    with the scheduling fields of ``user`` (``devcluster.kueue_config``) on top."""
    base: JSON = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{endpoints.health_port}"},
        # "0" turns the metrics listener off (what Kueue's integration framework does).
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": endpoints.webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        # Internal cert management issues certs for <svc>.<ns>.svc, which the apiserver cannot
        # reach out of cluster (no kube-proxy; Endpoints reject loopback IPs), so it is off and the
        # launcher signs a loopback serving cert instead (as envtest does).
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 100, "burst": 200},
        "integrations": {"frameworks": list(frameworks)},
        # VisibilityOnDemand starts an aggregated API server; nothing here uses it.
        "featureGates": {"VisibilityOnDemand": False},
    }
    return merge_configuration(base, user or {})


CONFIG_NAMESPACE = "kueue-system"
CONFIG_MAP = "kueue-manager-config"  # the name Kueue's release manifests give it
VERSION_ANNOTATION = "queuemanager.dev/kueue-version"


def config_map(configuration_yaml: str, version: str) -> JSON:
    """ConfigMap kueue-system/kueue-manager-config holding the Configuration Kueue runs with (under Kueue's
    own key, controller_manager_config.yaml) and the binary's version (an annotation)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": CONFIG_NAMESPACE,
                     "annotations": {VERSION_ANNOTATION: version}},
        "data": {"controller_manager_config.yaml": configuration_yaml},
    }


def _matches(webhook: dict[str, object], frameworks: Iterable[str]) -> bool:
    wanted = {FRAMEWORK_RESOURCES[f] for f in frameworks if f in FRAMEWORK_RESOURCES}
    for rule in cast(list[dict[str, list[str]]], webhook.get("rules") or []):
        for group in rule.get("apiGroups", []):
            if group == KUEUE_GROUP:
                return True
            if any((group, res) in wanted for res in rule.get("resources", [])):
                return True
    return False


def webhook_configurations(
    manifests: Path, webhook_port: int, ca_pem: bytes, frameworks: Sequence[str]
) -> list[JSON]:
    """Kueue's Mutating/ValidatingWebhookConfigurations, re-pointed at ``https://127.0.0.1:<port><path>``.

    Names get the ``kueue-`` prefix kustomize would add; each service reference becomes a URL with
    our CA bundle.
    """
    ca_bundle = base64.b64encode(ca_pem).decode("ascii")
    out: list[JSON] = []
    for doc in yaml.safe_load_all(manifests.read_text(encoding="utf-8")):
        if not isinstance(doc, dict):
            continue
        hooks: list[dict[str, object]] = []
        for hook in cast(list[dict[str, object]], doc.get("webhooks") or []):
            if not _matches(hook, frameworks):
                continue
            client = cast(dict[str, object], hook.get("clientConfig") or {})
            service = cast(dict[str, object], client.get("service") or {})
            path = str(service.get("path", ""))
            hooks.append(
                {
                    **hook,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{webhook_port}{path}",
                        "caBundle": ca_bundle,
                    },
                    "timeoutSeconds": 5,
                }
            )
        metadata = cast(dict[str, object], doc.get("metadata") or {})
        out.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": f"kueue-{metadata['name']}"},
                "webhooks": hooks,
            }
        )
    return out


# libyaml when available: the Workload CRD is 1.4 MB of YAML, ~2 s in pure Python, ~0.2 s in C.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crds(directory: Path) -> list[JSON]:
    """Kueue's CRDs as shipped in config/components/crd/bases (v1beta1 served, v1beta2 storage).

    They carry no conversion stanza (strategy None), so clients must use v1beta2 only.
    """
    docs: list[JSON] = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(cast(JSON, doc))
    return docs


def go_module_cache() -> Path:
    """Where `go` keeps modules: $GOMODCACHE, else the first $GOPATH entry /pkg/mod, else ~/go/pkg/mod."""
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0]
    return (Path(gopath) if gopath else Path.home() / "go") / "pkg" / "mod"


def framework_crd_files(frameworks: Iterable[str]) -> list[Path]:
    """The CRD files the enabled integrations need (FRAMEWORK_CRDS), in the Go module cache."""
    return [go_module_cache() / module / file for module, file in
            (FRAMEWORK_CRDS[f] for f in frameworks if f in FRAMEWORK_CRDS)]


def crd_file(path: Path) -> list[JSON]:
    """The CustomResourceDefinitions of one YAML file."""
    return [cast(JSON, doc) for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader)
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"]


def crd_established(crd: JSON) -> bool:
    status = cast(dict[str, object], crd.get("status") or {})
    for cond in cast(list[dict[str, str]], status.get("conditions") or []):
        if cond.get("type") == "Established" and cond.get("status") == "True":
            return True
    return False
