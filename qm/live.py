"""Reading the live cluster into the core's types: SHARED by the commands that look at a running cluster
(`qm explain --kubeconfig`, `qm plan`). Read only: it lists and gets, never writes.

One `LiveCluster` is one consistent-enough read: every Kueue kind listed once (ResourceFlavors, Cohorts,
ClusterQueues, LocalQueues, WorkloadPriorityClasses, Workloads), the Namespaces' labels (a ClusterQueue's
namespaceSelector matches on them; without permission to list Namespaces, Kubernetes' own name label is
assumed) and the QuotaPolicies (absent when the CRD is not installed or not readable). The objects become
a `fairshare.models.ClusterState` through the core's own parser (`fairshare.manifests`), so the model sees
exactly what a file of the same YAML would give; an object the core cannot model is left out and named in
`skipped` (one line each), never a crash.

Errors are one line (`InputError`): a kubeconfig the client cannot use, a server that does not answer
within `timeout` seconds (a TCP connection that never answers, a refused connection, a TLS failure), an
identity the server refuses (401/403, naming the kind). The kubeconfig is checked the way `qm run` checks
it (`qm.commands.run._check_kubeconfig` reads it with the project's one file reader); the client
configuration is built here rather than by `queue_manager.kube`, which imports kopf (1.4 s) for the
operator's login.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from fairshare.errors import InputError, Location
from fairshare.manifests import StateBuilder
from fairshare.models import ClusterState

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"  # the storage version since Kueue 0.16 (DESIGN.md)
QM_GROUP = "queuemanager.dev"
QM_VERSION = "v1alpha1"
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LiveKind:
    kind: str
    plural: str
    namespaced: bool


# Apply order (flavors and classes before the queues naming them), as the state builder wants nothing else.
KUEUE_KINDS: tuple[LiveKind, ...] = (
    LiveKind("ResourceFlavor", "resourceflavors", False),
    LiveKind("WorkloadPriorityClass", "workloadpriorityclasses", False),
    LiveKind("Cohort", "cohorts", False),
    LiveKind("ClusterQueue", "clusterqueues", False),
    LiveKind("LocalQueue", "localqueues", True),
    LiveKind("Workload", "workloads", True),
)


@dataclass(frozen=True)
class LiveCluster:
    """What one read of the cluster saw."""

    server: str
    read_at: float  # epoch seconds, the reader's clock when the lists were made
    state: ClusterState
    documents: tuple[dict[str, Any], ...]  # the Kueue objects as listed (apiVersion and kind set)
    policies: tuple[dict[str, Any], ...] = ()  # QuotaPolicies (empty: no CRD, or not readable)
    skipped: tuple[str, ...] = ()  # objects the core cannot model, one line each
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)

def client_configuration(kubeconfig: str | None, context: str | None = None) -> k8s.Configuration:
    """The client configuration of `kubeconfig` (else $KUBECONFIG / ~/.kube/config, else the in-cluster
    service account); a file the client cannot use is one InputError naming it."""
    where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise InputError("no such file", location=Location(file=kubeconfig))
        from qm.commands.run import _check_kubeconfig

        _check_kubeconfig(kubeconfig)
    cfg = k8s.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and not os.environ.get("KUBECONFIG"):
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            k8s_config.load_kube_config(context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
    except (ConfigException, ValueError, TypeError, AttributeError, KeyError, OSError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        raise InputError(f"not a usable kubeconfig: {detail[:300]}", location=Location(file=where)) from None
    host = str(cfg.host or "")
    if not host.startswith(("https://", "http://")) or not host.split("://", 1)[1].strip("/"):
        raise InputError("not a usable kubeconfig: the context's cluster has no server URL (https://host:port)",
                         location=Location(file=where), value=host, has_value=True)
    # One attempt per request: urllib3's default retries would turn a server that never answers into
    # several timeouts in a row (the bound the caller gave is the bound it gets).
    cfg.retries = False
    return cfg


def connect(kubeconfig: str | None, context: str | None = None, *,
            timeout: float = DEFAULT_TIMEOUT_S) -> LiveReader:
    cfg = client_configuration(kubeconfig, context)
    return LiveReader(k8s.ApiClient(cfg), server=str(cfg.host), timeout=timeout)


T = TypeVar("T")


class LiveReader:
    """Lists and gets with a bound on each request; every failure is one InputError line."""

    def __init__(self, api: k8s.ApiClient, *, server: str, timeout: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.server = server
        self.timeout = timeout
        self.clock = clock
        self._custom = k8s.CustomObjectsApi(api)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> LiveReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[], T], *, absent: tuple[int, ...] = (),
              default: T | None = None) -> T | None:
        """`fn()`; an API status in `absent` gives `default`, any other failure one InputError."""
        try:
            return fn()
        except ApiException as err:
            if err.status in absent:
                return default
            raise InputError(f"the API server refused to {what}: {err.status} {err.reason}"
                             f"{_message(err)}", location=Location(file=self.server)) from None
        except Exception as err:  # urllib3's errors: timeouts, refused connections, TLS, bad responses
            if not _is_transport_error(err):
                raise
            why = _transport(err, self.timeout)
            raise InputError(f"cannot {what}: the API server does not answer ({why})",
                             location=Location(file=self.server)) from None

    def list_kind(self, group: str, version: str, plural: str, what: str, *,
                  absent: tuple[int, ...] = ()) -> list[dict[str, Any]]:
        """Every object of a custom resource; [] when the API status is in `absent`."""
        resp = self._call(f"list {what}", lambda: self._custom.list_cluster_custom_object(
            group, version, plural, _request_timeout=self.timeout), absent=absent)
        items = resp.get("items", []) if isinstance(resp, dict) else []
        return [dict(i) for i in items if isinstance(i, dict)]

    def tenancy_objects(self) -> list[dict[str, Any]] | None:
        """The admission rules and RoleBindings the operator renders from policies' spec.tenancy
        (fairshare.policy.tenancy), apiVersion and kind set; None when the identity may not list them."""
        from fairshare.policy import owner_selector
        from fairshare.policy.tenancy import TENANCY_KINDS

        selector = owner_selector("").split(",")[0]  # app.kubernetes.io/managed-by=queue-manager
        out: list[dict[str, Any]] = []
        for kind, group, version, plural in TENANCY_KINDS:
            def listed(g: str = group, v: str = version, p: str = plural) -> Any:
                return self._custom.list_cluster_custom_object(g, v, p, label_selector=selector,
                                                               _request_timeout=self.timeout)

            resp = self._call(f"list {kind}s", listed, absent=(401, 403, 404))
            if resp is None:
                return None
            for item in resp.get("items", []) if isinstance(resp, dict) else []:
                out.append({**item, "apiVersion": f"{group}/{version}", "kind": kind})
        return out

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Every Namespace's labels; {} when the identity may not list Namespaces (the state builder then
        gives each namespace Kubernetes' name label, which is what the rendered selectors match)."""
        core = k8s.CoreV1Api(self.api)
        resp = self._call("list Namespaces", lambda: core.list_namespace(_request_timeout=self.timeout),
                          absent=(401, 403))
        if resp is None:
            return {}
        return {str(n.metadata.name): dict(n.metadata.labels or {}) for n in resp.items if n.metadata}

    def policies(self) -> list[dict[str, Any]]:
        """The QuotaPolicies; [] when the CRD is not installed (404) or the identity may not read it."""
        return self.list_kind(QM_GROUP, QM_VERSION, "quotapolicies", "QuotaPolicies", absent=(401, 403, 404))

    def policy(self, name: str) -> dict[str, Any] | None:
        """The QuotaPolicy `name` (status included), or None when there is none of that name; unlike
        `policies()`, an identity that may not read QuotaPolicies is an error (qm plan needs it)."""
        obj = self._call(f"get QuotaPolicy {name}", lambda: self._custom.get_cluster_custom_object(
            QM_GROUP, QM_VERSION, "quotapolicies", name, _request_timeout=self.timeout), absent=(404,))
        return dict(obj) if isinstance(obj, dict) else None

    def capacity(self, resource: str) -> int | None:
        """Σ allocatable `resource` over the Nodes, in milli-units (None when no Node has it, or the identity
        may not list Nodes)."""
        from fairshare.quantity import parse_quantity

        core = k8s.CoreV1Api(self.api)
        resp = self._call("list Nodes", lambda: core.list_node(_request_timeout=self.timeout),
                          absent=(401, 403))
        if resp is None:
            return None
        total, found = 0, False
        for node in resp.items:
            value = ((node.status.allocatable if node.status else None) or {}).get(resource)
            if value is not None:
                total += parse_quantity(value)
                found = True
        return total if found else None

    def read_cluster(self, *, with_policies: bool = True) -> LiveCluster:
        """Every Kueue object, the Namespaces' labels and (optionally) the QuotaPolicies."""
        documents: list[dict[str, Any]] = []
        for kind in KUEUE_KINDS:
            for item in self.list_kind(KUEUE_GROUP, KUEUE_VERSION, kind.plural, f"{kind.kind}s"):
                item["apiVersion"] = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
                item["kind"] = kind.kind
                documents.append(item)
        read_at = self.clock()
        labels = self.namespace_labels()
        policies = self.policies() if with_policies else []
        state, skipped = build_state(documents, labels, source=self.server)
        return LiveCluster(server=self.server, read_at=read_at, state=state, documents=tuple(documents),
                           policies=tuple(policies), skipped=tuple(skipped), namespace_labels=labels)


def build_state(documents: list[dict[str, Any]], namespace_labels: dict[str, dict[str, str]], *,
                source: str) -> tuple[ClusterState, list[str]]:
    """The core's state of the listed objects (references not checked: a live cluster may hold a
    LocalQueue whose ClusterQueue is gone, which Kueue reports as inactive); objects it cannot model are
    left out, one line each."""
    builder = StateBuilder()
    skipped: list[str] = []
    for doc in documents:
        try:
            builder.add_documents([doc], file=source)
        except InputError as err:
            meta = doc.get("metadata") or {}
            where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
            skipped.append(f"{doc.get('kind')} {where} left out: {err.message}")
    for ns, labels in namespace_labels.items():
        builder.namespace_labels[ns] = labels
    # A Workload whose priority class is gone (or was changed after Kueue copied its value) is a fact of a
    # live cluster, not a broken file: it is left out, named, and the rest is built.
    while True:
        try:
            return builder.build(check_references=False), skipped
        except InputError as err:
            m = re.search(r"\(Workload (\S+)\)", err.location.document or "")
            if m is None or m.group(1) not in builder.workloads:
                raise
            del builder.workloads[m.group(1)]
            skipped.append(f"Workload {m.group(1)} left out: {err.message}")


def _message(err: ApiException) -> str:
    import json

    body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    message = doc.get("message") if isinstance(doc, dict) else None
    return f": {' '.join(str(message).split())[:300]}" if message else ""


def _is_transport_error(err: BaseException) -> bool:
    import urllib3.exceptions

    return isinstance(err, (urllib3.exceptions.HTTPError, OSError))


def _transport(err: BaseException, timeout: float) -> str:
    import urllib3.exceptions

    reason: BaseException | None = getattr(err, "reason", None) if isinstance(
        err, urllib3.exceptions.MaxRetryError) else err
    if isinstance(reason, (urllib3.exceptions.TimeoutError, TimeoutError)) or "timed out" in str(reason):
        return f"no answer within {timeout:g}s"
    if isinstance(reason, urllib3.exceptions.NewConnectionError) or "refused" in str(reason).lower():
        return "connection refused"
    if isinstance(reason, urllib3.exceptions.SSLError):
        return "TLS failed: " + " ".join(str(reason).split())[:200]
    return " ".join(str(reason or err).split())[:200] or type(err).__name__
