"""Every block of README.md and docs/*.md marked `<!-- runnable -->` (tests/runnable_docs.py) runs as written:
each page's marked blocks in order, in one bash (`set -euxo pipefail`: the log shows each command before its
output), from a checkout of the repository (links to its files: what the commands write, e.g. `--out
out/plan`, stays in the test's directory), in a fresh HOME (a new user's machine: no kubeconfig, no ledger,
no dev cluster; only the control-plane binaries already built, linked into its ~/.cache/queue-manager so
that `make controlplane` finds them). Then, on the dev cluster the page started: every QuotaPolicy is
Ready, every Job is admitted and its pod Running on a node that carries its nodeSelector (the flavor's
labels: the KWOK nodes of `qm dev-cluster up --policy`), and none completes before its stated duration
(KWOK's default would complete it within seconds). The page's processes (the dev cluster, a `qm run &`)
are stopped afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devcluster import default_cache_dir
from devcluster.nodes import COMPLETE_DELAY
from tests.integration.controlplanes import POOL, binaries_or_skip
from tests.runnable_docs import ROOT, marked

pytestmark = pytest.mark.integration

PAGES = marked()
QP = ("queuemanager.dev", "v1alpha1", "quotapolicies")
PAGE_TIMEOUT_S = 420.0
STILL_RUNNING_S = 30.0  # KWOK's default pod-complete delay is 1-6 s: a pod alive this long follows its Job


def _new_users_home(tmp: Path) -> Path:
    home = tmp / "home"
    cache = home / ".cache" / "queue-manager"
    cache.mkdir(parents=True)
    real = default_cache_dir()
    for entry in real.iterdir():
        if entry.name == "bin" or entry.name.startswith(("kueue-", "kwok-")):
            (cache / entry.name).symlink_to(entry.resolve())
    # A copy, not a link: `make controlplane` rewrites it with this HOME's paths (leading to the same files).
    shutil.copyfile(real / "controlplane.json", cache / "controlplane.json")
    return home


def _checkout(tmp: Path) -> Path:
    """The repository as a new user's clone: a link to every top-level entry but what commands write."""
    clone = tmp / "clone"
    clone.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("out", "build"):
            (clone / entry.name).symlink_to(entry)
    return clone


def _env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return {**env, "HOME": str(home), "QM_CORE": os.environ.get("QM_CORE", "python")}


@contextlib.contextmanager
def _session(script: str, clone: Path, home: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The page's commands in one bash, in a session of its own (a `cmd &` it starts is stopped with it);
    the dev cluster it started is stopped afterwards (its processes are detached: a session of their own)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(["bash", "-c", "set -euxo pipefail\n" + script], cwd=clone, env=_env(home),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run([str(ROOT / ".venv" / "bin" / "qm"), "dev-cluster", "down"], cwd=ROOT, env=_env(home),
                       capture_output=True, timeout=60, check=False)


def _pods_of_jobs(core: k8s.CoreV1Api) -> list[Any]:
    return [p for p in core.list_pod_for_all_namespaces().items
            if any(o.kind == "Job" for o in p.metadata.owner_references or [])]


def _ran_s(pod: Any) -> float | None:
    """How long a finished pod ran: from its start to its container's finishedAt (KWOK's pod-complete)."""
    for c in pod.status.container_statuses or []:
        if c.state and c.state.terminated and c.state.terminated.finished_at and pod.status.start_time:
            return float((c.state.terminated.finished_at - pod.status.start_time).total_seconds())
    return None


def _delay_s(pod: Any) -> float:
    text = (pod.metadata.annotations or {}).get(COMPLETE_DELAY, "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    return 0.0 if m is None else float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2)]


def _check_cluster(kubeconfig: Path, wait_until: Callable[..., Any]) -> dict[str, Any]:
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
        policies: list[dict[str, Any]] = []
        with contextlib.suppress(k8s.exceptions.ApiException):  # no CRD: the page installs no operator
            policies = custom.list_cluster_custom_object(*QP)["items"]
        for qp in policies:
            conds = {c["type"]: c["status"] for c in (qp.get("status") or {}).get("conditions") or []}
            assert conds.get("Ready") == "True", (qp["metadata"]["name"], conds)
        listed = k8s.BatchV1Api(api).list_job_for_all_namespaces().items
        jobs = {(j.metadata.namespace, j.metadata.name) for j in listed}
        if not jobs:
            return {"pods": 0}
        # Every Job is admitted and its pod placed and running (a node without the flavor's labels would keep
        # it Pending; a Job Kueue does not admit has none)...
        def placed() -> bool:
            pods = _pods_of_jobs(core)
            owners = {(p.metadata.namespace, o.name) for p in pods for o in p.metadata.owner_references or []}
            return jobs <= owners and all(p.status.phase != "Pending" for p in pods)

        wait_until(placed, timeout=120, what="every Job admitted, its pod placed and running")
        nodes = {n.metadata.name: n.metadata.labels or {} for n in core.list_node().items}
        pods = _pods_of_jobs(core)
        for p in pods:
            labels = nodes[p.spec.node_name]
            assert all(labels.get(k) == v for k, v in (p.spec.node_selector or {}).items()), (
                p.metadata.name, p.spec.node_selector, labels)
        # ... for as long as its Job says (KWOK's default would complete it within seconds).
        started = min(p.status.start_time.timestamp() for p in pods if p.status.start_time)
        time.sleep(max(0.0, started + STILL_RUNNING_S - time.time()))
        short = [(p.metadata.name, ran, _delay_s(p)) for p in _pods_of_jobs(core)
                 if (ran := _ran_s(p)) is not None and ran < _delay_s(p) - 1]
        assert short == [], "pods that completed before their stated duration (name, ran, stated)"
        return {"pods": len(pods), "nodes": sorted({p.spec.node_name for p in pods})}
    finally:
        api.close()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_runnable_commands_of_a_page_run_as_written_on_a_new_users_machine(
    page: str, tmp_path: Path, wait_until: Callable[..., Any]
) -> None:
    binaries = binaries_or_skip()
    assert binaries.has_nodes_support, "kube-controller-manager, kube-scheduler and KWOK are not built"
    POOL.stop_extra()  # the page's own dev cluster is the one extra this 2-core machine runs
    home = _new_users_home(tmp_path)
    script = "\n".join(b.text for b in PAGES[page])
    log = tmp_path / "page.log"
    began = time.monotonic()
    with _session(script, _checkout(tmp_path), home, log) as proc:
        try:
            code = proc.wait(PAGE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        output = log.read_text(errors="replace")
        assert code == 0, f"{page}: exit {code} after {time.monotonic() - began:.0f} s:\n{output[-6000:]}"
        state = home / ".cache" / "queue-manager" / "dev-cluster" / "state.json"
        checked: dict[str, Any] = {}
        if state.is_file():
            checked = _check_cluster(Path(json.loads(state.read_text())["kubeconfig"]), wait_until)
    print(f"\n{page}: {len(PAGES[page])} block(s) ran in {time.monotonic() - began:.0f} s; {checked}")
