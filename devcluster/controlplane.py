"""etcd + kube-apiserver (TLS, RBAC) + the Kueue manager on loopback, started and torn down as one.

Start order and readiness (each step polls with a deadline, never a fixed sleep):
  1. PKI (serving CA, client CA, apiserver/webhook/admin certs, SA keys) and free loopback ports;
  2. etcd and kube-apiserver are launched together (the apiserver retries etcd until it answers);
     ready = etcd ``/health`` and the apiserver's ``/readyz`` (post-start hooks such as RBAC bootstrap done);
  3. Kueue's CRDs are created and awaited until Established; namespace kueue-system is created;
  4. the Kueue manager starts out of cluster and its webhooks are registered by URL + caBundle;
     ready = Kueue's ``/readyz`` answers and a ResourceFlavor can be created through its webhooks.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import cast

import yaml

from devcluster import kubeconfig, kueue, nodes
from devcluster.binaries import Binaries
from devcluster.kueue_config import KueueConfig, describe, frameworks_of, validate_kueue_config
from devcluster.pki import CertificateAuthority, service_account_keys
from devcluster.process import Component, Supervisor, free_ports, kill_group, pid_alive, rss_kib
from devcluster.rest import RestClient

STATE_FILE = "state.json"
PROBE_FLAVOR = "devcluster-readiness-probe"
# Where Kueue (v0.15+) hard-codes its metrics certificate when internal cert management is off
# (cmd/kueue/main.go: certwatcher.New("/etc/kueue/metrics/certs/tls.crt", ...)); it exits when
# the files are missing, whatever metrics.bindAddress says.
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


class ControlPlaneError(Exception):
    """Start-up failed or timed out; the message names the component and its log."""


@dataclass(frozen=True, slots=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    webhook: int
    health: int


@dataclass(frozen=True, slots=True)
class State:
    """What a detached control plane leaves in ``<workdir>/state.json`` for `status` and `down`."""

    workdir: str
    server: str
    kubeconfig: str
    ports: Ports
    pids: dict[str, int]
    logs: dict[str, str]
    versions: dict[str, str]
    started_at: float
    ready_seconds: float
    kueue_config: dict[str, object] | None = None  # the user's Configuration fields (None: defaults)
    nodes: list[str] | None = None  # the fake node groups, described (NodeGroup.describe)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> State:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return cls(**{**raw, "ports": Ports(**raw["ports"])})


def _stderr(message: str) -> None:
    print(f"[devcluster] {message}", file=sys.stderr, flush=True)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


class ControlPlane:
    """A local control plane. ``start()``/``stop()`` or ``with ControlPlane(...) as cp:``.

    ``workdir`` (created if missing; a temp dir when None) holds the PKI, etcd's data, the
    kubeconfigs and ``logs/<component>.log``. ``stop()`` removes it unless ``keep_logs``; a failed
    start keeps it and names the log to read. With ``detach=True`` the processes outlive this
    Python process (for ``qm dev-cluster up``) and :func:`stop_detached` ends them.

    ``kueue_config`` holds the scheduling fields of a Kueue ``Configuration`` (``fairSharing``,
    ``admissionFairSharing``, ``waitForPodsReady``, ``featureGates``, ...; see
    :mod:`devcluster.kueue_config`); None or ``{}`` runs Kueue with its defaults.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        binaries: Binaries | None = None,
        *,
        frameworks: Sequence[str] = ("batch/job",),
        fake_nodes: int = 0,
        node_shape: nodes.NodeShape | None = None,
        node_groups: Sequence[nodes.NodeGroup] = (),
        keep_logs: bool = False,
        detach: bool = False,
        timeout: float = 90.0,
        log: Callable[[str], None] = _stderr,
        kueue_config: KueueConfig | None = None,
    ) -> None:
        self.kueue_config: dict[str, object] = validate_kueue_config(
            dict(kueue_config) if kueue_config is not None else None, file="kueue_config"
        )
        self.frameworks = frameworks_of(self.kueue_config, tuple(frameworks))
        unknown = [f for f in self.frameworks if f not in kueue.FRAMEWORK_RESOURCES]
        if unknown:
            raise ControlPlaneError(
                f"integrations.frameworks: the launcher registers webhooks for "
                f"{', '.join(sorted(kueue.FRAMEWORK_RESOURCES))} only (got {unknown[0]!r})"
            )
        self.binaries = binaries if binaries is not None else Binaries.discover()
        self.workdir = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="qm-cp-"))
        self.node_shape = node_shape if node_shape is not None else nodes.NodeShape()
        # `fake_nodes` plain nodes of `node_shape`, or the given groups (e.g. one per ResourceFlavor of a
        # policy: its node labels and taints, `qm dev-cluster up --policy`).
        self.node_groups: tuple[nodes.NodeGroup, ...] = (
            tuple(node_groups) if node_groups else
            ((nodes.NodeGroup(fake_nodes, self.node_shape),) if fake_nodes else ()))
        self.fake_nodes = sum(g.count for g in self.node_groups)
        self.keep_logs = keep_logs
        self.detach = detach
        self.timeout = timeout
        self._log = log
        self._sup = Supervisor(die_with_parent=not detach)
        self._client_ca: CertificateAuthority | None = None
        self._serving_ca_pem = b""
        self._rest: RestClient | None = None
        self._ports: Ports | None = None
        self._stopped = True
        self._old_handlers: dict[int, object] = {}
        self.timings: dict[str, float] = {}
        self._began = 0.0

    # ----------------------------------------------------------------- public API
    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client cert in group system:masters)."""
        return self.workdir / "kubeconfig"

    @property
    def ports(self) -> Ports:
        if self._ports is None:
            raise ControlPlaneError("control plane not started")
        return self._ports

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def components(self) -> list[Component]:
        return self._sup.components

    def rss_kib(self) -> dict[str, int]:
        """Resident memory per component in KiB (from /proc)."""
        return {c.name: rss_kib(c.pid) for c in self._sup.components}

    def mint_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for ``user`` in ``groups`` (client cert signed by the client CA); RBAC applies."""
        if self._client_ca is None:
            raise ControlPlaneError("control plane not started")
        return mint_kubeconfig_with(
            self._client_ca, self._serving_ca_pem, self.server, self.workdir, user, groups
        )

    def start(self) -> ControlPlane:
        began = time.monotonic()
        self._began = began
        self._stopped = False
        if not self.detach:
            self._install_teardown_hooks()
        try:
            self._start(began)
        except BaseException as err:
            logs = ", ".join(str(c.log) for c in self._sup.components) or str(self.logs_dir)
            self.keep_logs = True
            self.stop()
            if isinstance(err, ControlPlaneError):
                raise ControlPlaneError(f"{err}\n(logs kept: {logs})") from None
            raise
        self.timings["ready"] = time.monotonic() - began
        self._log(
            f"control plane ready in {self.timings['ready']:.1f}s: {self.server} (workdir {self.workdir}; "
            f"Kueue: {describe(self.kueue_config)})"
        )
        if self.detach:
            self._write_state(began)
        return self

    # ----------------------------------------------------------------- faults (tests/integration)
    def restart(self, component: str, *, timeout: float | None = None) -> float:
        """Restart one component (``kube-apiserver``, ``kueue`` or ``etcd``) with its command line and wait
        until it serves again; returns the seconds that took. Its clients see it go away and come back."""
        began = time.monotonic()
        deadline = began + (self.timeout if timeout is None else timeout)
        self._sup.restart(component)
        self._wait(f"{component} ready after a restart", self._ready_probe(component), deadline)
        return time.monotonic() - began

    def pause(self, component: str) -> None:
        """SIGSTOP one component's process group: it holds its connections and answers nothing."""
        self._sup.signal(component, signal.SIGSTOP)

    def resume(self, component: str) -> None:
        self._sup.signal(component, signal.SIGCONT)

    def _ready_probe(self, component: str) -> Callable[[], bool]:
        ports = self.ports
        if component == "etcd":
            return lambda: _http_ok(f"http://127.0.0.1:{ports.etcd_client}/health")
        if component == "kube-apiserver":
            rest = self._rest or self._rest_client()
            return lambda: rest.get("/readyz", timeout=2).status == 200
        if component == "kueue":
            return lambda: _http_ok(f"http://127.0.0.1:{ports.health}/readyz")
        raise ControlPlaneError(f"no readiness probe for component {component!r}")

    def stop(self) -> None:
        """Kill every component's process group, then remove the workdir unless keep_logs."""
        if self._stopped:
            return
        self._stopped = True
        self._sup.stop_all()
        self._remove_teardown_hooks()
        if not self.keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ----------------------------------------------------------------- teardown hooks
    def _install_teardown_hooks(self) -> None:
        atexit.register(self.stop)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                self._old_handlers[sig] = signal.signal(sig, _raise_system_exit)

    def _remove_teardown_hooks(self) -> None:
        atexit.unregister(self.stop)
        if threading.current_thread() is threading.main_thread():
            for sig, old in self._old_handlers.items():
                signal.signal(sig, cast(signal.Handlers, old))
        self._old_handlers.clear()

    # ----------------------------------------------------------------- start-up steps
    def _deadline(self) -> float:
        return time.monotonic() + self.timeout

    def _check_alive(self) -> None:
        for comp, rc in self._sup.exited():
            raise ControlPlaneError(
                f"{comp.name} exited with code {rc} during start-up; log {comp.log}:\n{_tail(comp.log)}"
            )

    def _wait(self, what: str, probe: Callable[[], bool], deadline: float) -> None:
        delay = 0.05
        while True:
            self._check_alive()
            try:
                if probe():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"timed out waiting for {what}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _start(self, began: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        deadline = self._deadline()
        p = free_ports(5)
        self._ports = Ports(etcd_client=p[0], etcd_peer=p[1], apiserver=p[2], webhook=p[3], health=p[4])
        self._write_pki()
        self.timings["pki"] = time.monotonic() - began

        self._start_etcd()
        self._start_apiserver()
        etcd_health = f"http://127.0.0.1:{self.ports.etcd_client}/health"
        self._wait("etcd /health", lambda: _http_ok(etcd_health), deadline)
        self.timings["etcd"] = time.monotonic() - began
        rest = self._rest_client()
        self._wait("kube-apiserver /readyz", lambda: rest.get("/readyz", timeout=2).status == 200, deadline)
        self.timings["apiserver"] = time.monotonic() - began

        if self.fake_nodes:
            self._start_node_components()
        self._install_crds(rest, deadline)
        self.timings["crds"] = time.monotonic() - began
        self._start_kueue(rest)
        if self.fake_nodes:
            self._create_fake_nodes(rest)
        self._wait_kueue(rest, deadline)
        self.timings["kueue"] = time.monotonic() - began
        if self.fake_nodes:
            self._wait_nodes_ready(rest, deadline)
            self.timings["nodes"] = time.monotonic() - began

    def _write_pki(self) -> None:
        d = self.pki_dir
        serving_ca = CertificateAuthority("qm-dev-serving-ca")
        client_ca = CertificateAuthority("qm-dev-client-ca")
        serving_ca.write(d, "serving-ca")
        client_ca.write(d, "client-ca")
        self._client_ca = client_ca
        self._serving_ca_pem = serving_ca.cert_pem
        ips, dns = ["127.0.0.1"], ["localhost"]
        serving_ca.issue(
            "kube-apiserver",
            dns_names=["localhost", "kubernetes", "kubernetes.default"],
            ip_addresses=["127.0.0.1"],
            server=True,
        ).write(d, "apiserver")
        serving_ca.issue("kueue-webhook", server=True, ip_addresses=ips, dns_names=dns).write(
            self.workdir / "kueue", "webhook"
        )
        # Never served (metrics are off); it only has to exist for Kueue's cert watcher.
        serving_ca.issue("kueue-metrics", server=True, ip_addresses=ips, dns_names=dns).write(
            d, "kueue-metrics"
        )
        sa_key, sa_pub = service_account_keys()
        (d / "sa.key").write_bytes(sa_key)
        (d / "sa.pub").write_bytes(sa_pub)
        admin = client_ca.issue("qm-admin", ["system:masters"], client=True)
        admin.write(d, "admin")
        kubeconfig.write(
            self.kubeconfig, kubeconfig.render(self.server, serving_ca.cert_pem, "qm-admin", admin)
        )

    def _rest_client(self) -> RestClient:
        # The admin client cert written to pki/admin.{crt,key} by _write_pki.
        d = self.pki_dir
        self._rest = RestClient(
            "127.0.0.1", self.ports.apiserver, d / "serving-ca.crt", d / "admin.crt", d / "admin.key"
        )
        return self._rest

    def _start_etcd(self) -> None:
        ports = self.ports
        client, peer = f"http://127.0.0.1:{ports.etcd_client}", f"http://127.0.0.1:{ports.etcd_peer}"
        self._sup.start(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # Throw-away data: skip fsync (envtest does the same on etcd >= 3.5).
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            self.logs_dir / "etcd.log",
        )

    def _start_apiserver(self) -> None:
        ports, d = self.ports, self.pki_dir
        self._sup.start(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports.apiserver}",
                f"--cert-dir={d}",
                f"--tls-cert-file={d / 'apiserver.crt'}",
                f"--tls-private-key-file={d / 'apiserver.key'}",
                f"--client-ca-file={d / 'client-ca.crt'}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # No kube-controller-manager, hence no token controller: the ServiceAccount
                # admission plugin would reject pods without a token (envtest disables it too).
                "--disable-admission-plugins=ServiceAccount",
                f"--service-account-issuer=https://127.0.0.1:{ports.apiserver}",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                # Loopback cannot be an Endpoints address; no 'kubernetes' Service endpoints needed.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
            ],
            self.logs_dir / "kube-apiserver.log",
        )

    def _install_crds(self, rest: RestClient, deadline: float) -> None:
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        docs = kueue.crds(self.binaries.kueue_crds)
        for path in kueue.framework_crd_files(self.frameworks):  # before Kueue starts: it looks for them then
            if not path.is_file():
                raise ControlPlaneError(f"the integrations need {path}, which is not in the Go module cache "
                                        f"(the Kueue build downloads it)")
            docs.extend(kueue.crd_file(path))
        names = {str(cast(dict[str, object], crd["metadata"])["name"]) for crd in docs}
        # In parallel: the apiserver spends most of a CRD create on schema processing.
        with ThreadPoolExecutor(max_workers=4) as pool:
            responses = list(pool.map(lambda crd: rest.post(base, crd), docs))
        for resp in responses:
            if resp.status not in (201, 409):
                raise ControlPlaneError(f"creating CRD failed ({resp.status}): {resp.text[:300]}")
        self.timings["crds_posted"] = time.monotonic() - self._began

        def established() -> bool:
            items = cast(list[dict[str, object]], rest.get(base).body.get("items") or [])
            done = {
                str(cast(dict[str, object], i["metadata"])["name"]) for i in items if kueue.crd_established(i)
            }
            return names <= done

        self._wait("Kueue CRDs Established", established, deadline)
        ns = rest.post(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
        )
        if ns.status not in (201, 409):
            raise ControlPlaneError(f"creating namespace kueue-system failed ({ns.status}): {ns.text[:300]}")

    def _kueue_argv(self, config: Path) -> list[str]:
        argv = [str(self.binaries.kueue), f"--config={config}", f"--kubeconfig={self.kubeconfig}"]
        host_cert = KUEUE_METRICS_CERT_DIR / "tls.crt"
        if host_cert.is_file() and (KUEUE_METRICS_CERT_DIR / "tls.key").is_file():
            return argv
        # Give Kueue its metrics cert in a private mount namespace: a read-only overlay of /etc
        # whose top layer adds kueue/metrics/certs. Nothing on the host changes, and each control
        # plane has its own cert. Without root, a user namespace grants the mount privilege.
        layer = self.workdir / "kueue" / "etc-layer"
        certs = layer / "kueue" / "metrics" / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.pki_dir / "kueue-metrics.crt", certs / "tls.crt")
        shutil.copyfile(self.pki_dir / "kueue-metrics.key", certs / "tls.key")
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ControlPlaneError(
                "Kueue needs /etc/kueue/metrics/certs/tls.{crt,key} when its internal cert management is "
                "off; `unshare` (util-linux) is missing, so create those files (any self-signed pair)"
            )
        userns = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        script = f'mount -t overlay qm-etc -o "lowerdir={layer}:/etc" /etc && exec "$0" "$@"'
        return [unshare, "--mount", "--propagation", "private", *userns, "--", "/bin/sh", "-c", script, *argv]

    def _start_kueue(self, rest: RestClient) -> None:
        ports = self.ports
        endpoints = kueue.KueueEndpoints(webhook_port=ports.webhook, health_port=ports.health)
        kdir = self.workdir / "kueue"
        cert_dir = kdir / "webhook-certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        # controller-runtime's webhook server reads tls.crt / tls.key from certDir.
        shutil.copyfile(kdir / "webhook.crt", cert_dir / "tls.crt")
        shutil.copyfile(kdir / "webhook.key", cert_dir / "tls.key")
        config = kdir / "config.yaml"
        text = yaml.safe_dump(kueue.configuration(endpoints, cert_dir, self.frameworks, self.kueue_config))
        config.write_text(text, encoding="utf-8")
        self._sup.start("kueue", self._kueue_argv(config), self.logs_dir / "kueue.log")
        # What a release install of Kueue puts in the cluster, so that `qm plan` and `qm explain` read this
        # Kueue's Configuration and version as they read an installed one's (qm/kueue_setup.py); the version
        # is the binary's, as an annotation (there is no Deployment: the manager runs outside the cluster).
        resp = rest.post(f"/api/v1/namespaces/{kueue.CONFIG_NAMESPACE}/configmaps",
                         kueue.config_map(text, self.binaries.versions.kueue))
        if resp.status not in (201, 409):
            raise ControlPlaneError(f"creating Kueue's ConfigMap failed ({resp.status}): {resp.text[:300]}")
        # Registered at once: objects created before Kueue serves fail (failurePolicy=Fail), which
        # is exactly what the readiness probe below waits out.
        for hook in kueue.webhook_configurations(
            self.binaries.kueue_webhooks, ports.webhook, self._serving_ca_pem, self.frameworks
        ):
            path = f"/apis/admissionregistration.k8s.io/v1/{str(hook['kind']).lower()}s"
            resp = rest.post(path, hook)
            if resp.status not in (201, 409):
                raise ControlPlaneError(
                    f"registering Kueue webhooks failed ({resp.status}): {resp.text[:300]}"
                )

    def _wait_kueue(self, rest: RestClient, deadline: float) -> None:
        health = f"http://127.0.0.1:{self.ports.health}/readyz"
        self._wait("Kueue /readyz", lambda: _http_ok(health), deadline)
        path = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
        probe = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": PROBE_FLAVOR},
        }
        self._wait(
            "a ResourceFlavor to pass Kueue's webhooks",
            lambda: rest.post(path, probe).status in (201, 409),
            deadline,
        )
        rest.delete(f"{path}/{PROBE_FLAVOR}")

    # ----------------------------------------------------------------- stretch: pods that "run"
    def _start_node_components(self) -> None:
        """kube-controller-manager (Job, namespace, GC controllers), kube-scheduler and KWOK."""
        b, d, kc = self.binaries, self.pki_dir, str(self.kubeconfig)
        if not b.has_nodes_support or b.kube_controller_manager is None or b.kube_scheduler is None:
            raise ControlPlaneError(
                "fake nodes need kube-controller-manager, kube-scheduler and KWOK: "
                "run `QM_CONTROLPLANE_EXTRA=1 make controlplane`"
            )
        kwok_bin = b.kwok
        stages = b.kwok_stages
        if kwok_bin is None or stages is None:  # narrowed for the type checker; checked above
            raise ControlPlaneError("KWOK not built")
        self._sup.start(
            "kube-controller-manager",
            [
                str(b.kube_controller_manager),
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--controllers=*",
                f"--root-ca-file={d / 'serving-ca.crt'}",
                f"--service-account-private-key-file={d / 'sa.key'}",
                "--use-service-account-credentials=false",
            ],
            self.logs_dir / "kube-controller-manager.log",
        )
        self._sup.start(
            "kube-scheduler",
            [
                str(b.kube_scheduler),
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
            ],
            self.logs_dir / "kube-scheduler.log",
        )
        config = self.workdir / "kwok" / "stages.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "\n---\n".join(p.read_text(encoding="utf-8") for p in sorted(stages.glob("*.yaml"))),
            encoding="utf-8",
        )
        (kwok_port,) = free_ports(1)
        self._sup.start(
            "kwok",
            [
                str(kwok_bin),
                f"--kubeconfig={kc}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                # Fake addresses KWOK writes into Node/Pod status; nothing ever connects to them.
                "--cidr=10.0.0.0/24",
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{kwok_port}",
            ],
            self.logs_dir / "kwok.log",
        )

    def _create_fake_nodes(self, rest: RestClient) -> None:
        for group in self.node_groups:
            for name in group.names():
                body = nodes.fake_node(name, group.shape, labels=group.labels, taints=group.taints)
                resp = rest.post("/api/v1/nodes", body)
                if resp.status not in (201, 409):
                    raise ControlPlaneError(
                        f"creating fake node {name} failed ({resp.status}): {resp.text[:300]}")

    def _wait_nodes_ready(self, rest: RestClient, deadline: float) -> None:
        def ready() -> bool:
            items = cast(list[dict[str, object]], rest.get("/api/v1/nodes").body.get("items") or [])
            return sum(1 for n in items if nodes.node_ready(n)) >= self.fake_nodes

        self._wait(f"{self.fake_nodes} fake node(s) Ready", ready, deadline)

    def _write_state(self, began: float) -> None:
        state = State(
            workdir=str(self.workdir),
            server=self.server,
            kubeconfig=str(self.kubeconfig),
            ports=self.ports,
            pids={c.name: c.pid for c in self._sup.components},
            logs={c.name: str(c.log) for c in self._sup.components},
            versions={
                "kubernetes": self.binaries.versions.kubernetes,
                "etcd": self.binaries.versions.etcd,
                "kueue": self.binaries.versions.kueue,
            },
            started_at=time.time() - (time.monotonic() - began),
            ready_seconds=self.timings["ready"],
            kueue_config=self.kueue_config or None,
            nodes=[g.describe() for g in self.node_groups] or None,
        )
        (self.workdir / STATE_FILE).write_text(state.to_json(), encoding="utf-8")


def _raise_system_exit(signum: int, frame: FrameType | None) -> None:
    del frame
    raise SystemExit(128 + signum)


def _http_ok(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1.0) as resp:
        return int(resp.status) == 200
    return False


def mint_kubeconfig_with(
    client_ca: CertificateAuthority,
    serving_ca_pem: bytes,
    server: str,
    workdir: Path,
    user: str,
    groups: Sequence[str],
) -> Path:
    pair = client_ca.issue(user, list(groups), client=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in user)
    return kubeconfig.write(
        workdir / "kubeconfigs" / f"{safe}.kubeconfig", kubeconfig.render(server, serving_ca_pem, user, pair)
    )


# ------------------------------------------------------------------ detached control planes
def load_state(workdir: Path) -> State | None:
    path = workdir / STATE_FILE
    if not path.is_file():
        return None
    return State.load(path)


def running_components(state: State) -> dict[str, bool]:
    return {name: pid_alive(pid) for name, pid in sorted(state.pids.items())}


def state_rss_kib(state: State) -> dict[str, int]:
    return {name: rss_kib(pid) for name, pid in sorted(state.pids.items())}


def stop_detached(workdir: Path, *, keep_logs: bool = False) -> bool:
    """Stop a control plane started with ``detach=True``; False when none was recorded there."""
    state = load_state(workdir)
    if state is None:
        return False
    # Reverse start order, as Supervisor.stop_all does: Kueue, then the apiserver, then etcd.
    order = {
        "kwok": -3,
        "kube-scheduler": -2,
        "kube-controller-manager": -1,
        "kueue": 0,
        "kube-apiserver": 1,
        "etcd": 2,
    }
    for name in sorted(state.pids, key=lambda n: (order.get(n, -1), n)):
        kill_group(state.pids[name], grace=5.0)
    if keep_logs:
        (workdir / STATE_FILE).unlink(missing_ok=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return True


def mint_kubeconfig_detached(workdir: Path, user: str, groups: Sequence[str]) -> Path:
    state = load_state(workdir)
    if state is None:
        raise ControlPlaneError(f"no control plane recorded in {workdir}")
    pki = workdir / "pki"
    ca = CertificateAuthority.load((pki / "client-ca.crt").read_bytes(), (pki / "client-ca.key").read_bytes())
    return mint_kubeconfig_with(
        ca, (pki / "serving-ca.crt").read_bytes(), state.server, workdir, user, groups
    )
