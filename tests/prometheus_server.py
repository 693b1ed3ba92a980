"""A real, throwaway Prometheus server and a DCGM-format test exporter, for the telemetry tests (no mock
Prometheus: the operator's queries run against the real one).

``PrometheusServer`` runs Debian's ``prometheus`` (2.42; ``make ensure-prometheus`` installs it, `.ci/run`
too): a temporary data directory, a free loopback port, a scrape config naming the exporters given, a
1 s scrape interval. ``DcgmExporter`` is test code: an HTTP server on loopback serving ``/metrics`` in
dcgm-exporter's text format (``DCGM_FI_DEV_GPU_UTIL`` and ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` with the labels
``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``, ``container``, ``namespace``, ``pod``) for the
pods the test sets: what each GPU reports is the test's choice, and a pod the test removes vanishes from the
scrape (Prometheus marks its series stale, as when dcgm-exporter loses a pod's mapping).

Fixture (registered by tests/conftest.py): ``prometheus`` (one per test: a server and an exporter it scrapes).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml


class PrometheusMissing(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gpu:
    """One GPU as dcgm-exporter reports it for the pod using it."""

    index: int
    util: float  # DCGM_FI_DEV_GPU_UTIL, percent (the test may set NaN)
    node: str = "kwok-gpu-0"


class DcgmExporter:
    """Serves DCGM-format metrics for the pods set with `set_pod` (thread-safe)."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], list[Gpu]] = {}
        self._lock = threading.Lock()
        self.scrapes = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render().encode() if self.path.split("?")[0] == "/metrics" else b""
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="dcgm-exporter", daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_pod(self, namespace: str, pod: str, *utils: float, node: str = "kwok-gpu-0") -> None:
        """The pod's GPUs (one per value) and their utilization, percent."""
        with self._lock:
            self._pods[(namespace, pod)] = [Gpu(i, u, node) for i, u in enumerate(utils)]

    def remove_pod(self, namespace: str, pod: str) -> None:
        with self._lock:
            self._pods.pop((namespace, pod), None)

    def render(self) -> str:
        with self._lock:
            self.scrapes += 1
            pods = sorted(self._pods.items())
        lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
        ratio = ["# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.",
                 "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"]
        for (namespace, pod), gpus in pods:
            for g in gpus:
                uuid = f"GPU-{namespace[:8]}-{pod[-12:]}-{g.index}"
                labels = (f'gpu="{g.index}",UUID="{uuid}",device="nvidia{g.index}",'
                          f'modelName="NVIDIA A100-SXM4-80GB",Hostname="{g.node}",container="main",'
                          f'namespace="{namespace}",pod="{pod}"')
                value = "NaN" if g.util != g.util else f"{g.util:g}"
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value}")
                ratio.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels}}} "
                             + ("NaN" if g.util != g.util else f"{g.util / 100:g}"))
        return "\n".join(lines + ratio) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


class PrometheusServer:
    """Debian's prometheus on loopback, scraping `targets` every `scrape_interval`."""

    def __init__(self, targets: list[str], *, scrape_interval: str = "1s") -> None:
        binary = os.environ.get("QM_PROMETHEUS") or shutil.which("prometheus")
        if binary is None:
            raise PrometheusMissing("prometheus not found: install Debian's prometheus package "
                                    "(make ensure-prometheus) or set QM_PROMETHEUS")
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="qm-prom-"))
        self.port = _free_port()
        config = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
                  "scrape_configs": [{"job_name": "dcgm-exporter", "static_configs": [{"targets": targets}]}]}
        (self.root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = self.root / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [self.binary, f"--config.file={self.root / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.root / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1h", "--web.enable-lifecycle"],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready within {timeout:.0f}s: {self.log.read_text()[-2000:]}")

    def query(self, promql: str) -> Any:
        """An instant query's `data.result` (for the tests' own checks)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())["data"]["result"]

    def wait_for_series(self, promql: str, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.query(promql)) >= count:
                return
            time.sleep(0.3)
        raise AssertionError(f"{promql}: fewer than {count} series after {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Telemetry:
    """A running Prometheus and the DCGM exporter it scrapes."""

    server: PrometheusServer
    exporter: DcgmExporter

    @property
    def url(self) -> str:
        return self.server.url


def start_telemetry(scrape_interval: str = "1s") -> Telemetry:
    exporter = DcgmExporter()
    server = PrometheusServer([exporter.target], scrape_interval=scrape_interval)
    try:
        server.start()
    except BaseException:
        server.destroy()
        exporter.close()
        raise
    return Telemetry(server, exporter)


@pytest.fixture
def prometheus() -> Iterator[Telemetry]:
    """A real Prometheus (1 s scrapes) and the DCGM exporter it scrapes; both stopped after the test. Never
    skipped: telemetry is only tested against a real Prometheus."""
    try:
        telemetry = start_telemetry()
    except PrometheusMissing as err:
        pytest.fail(f"a real Prometheus server is needed: {err}", pytrace=False)
    try:
        yield telemetry
    finally:
        telemetry.server.destroy()
        telemetry.exporter.close()

