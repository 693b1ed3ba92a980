"""Kubernetes client configuration and READ access (lists and gets).

Writes live in writer.py only. The same client configuration feeds kopf's login, so
the operator acts as one identity (the one bound to manifests/rbac's ClusterRole).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from fairshare.errors import InputError, Location

from .fanout import WORKERS
from .refs import Kind, ObjectRef, kind_of

# Connections the operator's API client keeps open for reuse. The client's default is 5 per CPU (10 on 2
# cores), but one reconcile fans out WORKERS requests at once (fanout.py) while kopf's handler threads, the
# ledger and telemetry feeds and the forecasts share the same client: beyond the pool, urllib3 opens a
# connection per request, discards it and logs "Connection pool is full" (about 150 WARNING lines per
# operator benchmark run, 2026-12-07). Room for 4 reconciles fanning out at once.
POOL_CONNECTIONS = 4 * WORKERS


def load_configuration(kubeconfig: str | None, context: str | None = None) -> k8s.Configuration:
    """Client configuration from a kubeconfig file, else the in-cluster service account,
    else $KUBECONFIG / ~/.kube/config. A file the client cannot use is one InputError naming it."""
    cfg = k8s.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            k8s_config.load_kube_config(context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    except (ConfigException, ValueError, TypeError, AttributeError, KeyError, OSError) as err:
        # The client raises all of these for a kubeconfig it cannot use (a missing context, a list where a
        # mapping belongs, base64 that is not, a certificate file that is not there).
        detail = " ".join(str(err).split()) or type(err).__name__
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise InputError(f"not a usable kubeconfig: {detail[:300]}", location=Location(file=where)) from None
    host = str(cfg.host or "")
    if not host.startswith(("https://", "http://")) or len(host.split("://", 1)[1].strip("/")) == 0:
        # The client accepts a cluster without `server`; kopf would then retry requests to "/api" for ever.
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise InputError("not a usable kubeconfig: the context's cluster has no server URL (https://host:port)",
                         location=Location(file=where), value=host, has_value=True)
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, POOL_CONNECTIONS)
    return cfg


def connection_info(cfg: k8s.Configuration) -> kopf.ConnectionInfo:
    """kopf credentials equal to the client's (certificates, token or both)."""
    token: str | None = None
    auth = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
    if auth:
        token = str(auth).removeprefix("Bearer ").strip()
    return kopf.ConnectionInfo(
        server=str(cfg.host),
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        token=token,
    )


def _read_raw(read: Callable[..., Any], namespace: str, name: str,
              timeout: float | None) -> dict[str, Any] | None:
    """One namespaced object as stored (raw JSON; None when it does not exist)."""
    try:
        out = read(name, namespace, _preload_content=False, _request_timeout=timeout)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    doc = json.loads(getattr(out, "data", b"") or b"null")
    return dict(doc) if isinstance(doc, dict) else None


class Reader:
    """Reads the objects the operator reconciles; never writes."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self._custom = k8s.CustomObjectsApi(api)
        self._coordination = k8s.CoordinationV1Api(api)
        self._core = k8s.CoreV1Api(api)

    def lease(self, namespace: str, name: str, *, timeout: float | None = None) -> dict[str, Any] | None:
        """The leader-election Lease as stored (None when it does not exist yet)."""
        return _read_raw(self._coordination.read_namespaced_lease, namespace, name, timeout)

    def config_map(self, namespace: str, name: str, *, timeout: float = 5.0) -> dict[str, Any] | None:
        """A core/v1 ConfigMap as stored (None when it does not exist)."""
        return _read_raw(self._core.read_namespaced_config_map, namespace, name, timeout)

    def events(self, *, label_selector: str) -> list[dict[str, Any]]:
        """core/v1 Events of every namespace with the label (as stored: raw JSON, annotations included)."""
        out = self._core.list_event_for_all_namespaces(label_selector=label_selector, _preload_content=False)
        doc = json.loads(getattr(out, "data", b"") or b"null")
        items = doc.get("items", []) if isinstance(doc, dict) else []
        return [dict(i) for i in items if isinstance(i, dict)]

    def pods(self, namespace: str, *, label_selector: str | None = None,
             timeout: float = 10.0) -> list[dict[str, Any]]:
        """core/v1 Pods of a namespace with the label (as stored: raw JSON)."""
        out = self._core.list_namespaced_pod(namespace, label_selector=label_selector, _preload_content=False,
                                             _request_timeout=timeout)
        doc = json.loads(getattr(out, "data", b"") or b"null")
        items = doc.get("items", []) if isinstance(doc, dict) else []
        return [dict(i) for i in items if isinstance(i, dict)]

    def list(self, kind: Kind, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        # Cluster-wide list works for namespaced kinds too (all namespaces).
        resp = self._custom.list_cluster_custom_object(
            kind.group, kind.version, kind.plural, label_selector=label_selector)
        items = resp.get("items", []) if isinstance(resp, dict) else []
        for item in items:
            item.setdefault("kind", kind.kind)
            item.setdefault("apiVersion", kind.api_version)
        return [dict(i) for i in items]

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        kind = kind_of(ref.kind)
        try:
            if kind.namespaced:
                obj = self._custom.get_namespaced_custom_object(
                    kind.group, kind.version, ref.namespace or "", kind.plural, ref.name)
            else:
                obj = self._custom.get_cluster_custom_object(kind.group, kind.version, kind.plural, ref.name)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return dict(obj) if isinstance(obj, dict) else None
