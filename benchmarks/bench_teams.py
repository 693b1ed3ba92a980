"""Hundreds of teams in one QuotaPolicy (issue 38 item 1), on the real kube-apiserver and Kueue.

A policy of QM_BENCH_TEAMS teams (default 500; one ClusterQueue each, QM_BENCH_NAMESPACES namespaces each,
default 2) in 10 cohorts. Prints: the time `qm policy check` (parse_policy) and `render` take; `kubectl apply`
of the CRD and of the policy (the CRD's CEL and the shipped ValidatingAdmissionPolicy judge it); the time
the API server takes to refuse the same policy with one namespace in two teams, and its message; the first
reconcile (policy created -> every ClusterQueue and LocalQueue exists and status says Ready); one edit ->
the first step applied to the team's ClusterQueue, and -> status observed it (median of QM_BENCH_REPEATS
edits, each made once the operator has finished with the previous one); the operator's CPU and RSS.
Reproduce: `make bench BENCH=teams` (QM_BENCH_TEAMS=1000 for 1,000 ClusterQueues).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
KUBECTL = Path(sys.executable).parent / "kubectl"
CRD = ROOT / "manifests" / "crd" / "quotapolicies.yaml"
FLAVOR = "scale-gpu"
COHORTS = 10
TICK = 0.5


def team_name(i: int) -> str:
    return f"team-{i:04d}"


def large_policy(teams: int, namespaces: int = 2, *, name: str = "scale") -> dict[str, Any]:
    """A valid policy of `teams` teams: `namespaces` namespaces each, 8 GPUs, 64 CPUs and 512Gi each, in
    10 cohorts under one root; every fourth team moves its quota at once (curve immediate), every tenth has
    its own floor, every team one member group and its classes. Deterministic."""
    out = []
    for i in range(teams):
        team: dict[str, Any] = {
            "name": team_name(i),
            "namespaces": [f"{team_name(i)}-{k}" for k in range(namespaces)],
            "cohort": f"scale-org/scale-pool-{i % COHORTS}",
            "fairShareWeight": 1 + i % 4,
            "quotas": [{"flavor": FLAVOR, "resources": [
                {"name": "nvidia.com/gpu", "nominal": 8, "lendingLimit": 4},
                {"name": "cpu", "nominal": 64},
                {"name": "memory", "nominal": "512Gi"}]}],
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            "members": [{"kind": "Group", "name": f"oidc:{team_name(i)}"}],
            "priorityClasses": ["scale-business", "scale-experiment"] if i % 2 else ["scale-experiment"],
        }
        if i % 4 == 0:
            team["transition"] = {"curve": "immediate"}
        if i % 10 == 1:
            team["transition"] = {"floor": {"nvidia.com/gpu": 2}}
        out.append(team)
    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": name},
        "spec": {
            "flavors": [{"name": FLAVOR, "nodeLabels": {"scale.example.com/pool": "gpu"},
                         "pricePerUnitHour": {"nvidia.com/gpu": "2.5"}}],
            "priorityClasses": [{"name": "scale-business", "value": 1000000},
                                {"name": "scale-experiment", "value": 100, "experiment": True}],
            "teams": out,
            "fairShare": {"halfLife": "168h"},
            "preemption": {"protectedClasses": ["scale-business"],
                           "budget": {"maxVictims": 8, "window": "1h"}},
            "transitions": {"defaults": {"duration": "336h", "stepInterval": "24h", "curve": "linear",
                                         "floor": {"nvidia.com/gpu": 1}}},
        },
    }


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=600)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _wait(fn: Callable[[], Any], timeout: float, what: str, poll: float = 0.05) -> tuple[float, Any]:
    """(seconds waited, value); on timeout, says so and returns (timeout, None) instead of raising."""
    t0 = time.perf_counter()
    while True:
        value = fn()
        if value:
            return time.perf_counter() - t0, value
        if time.perf_counter() - t0 > timeout:
            print(f"  NOT REACHED within {timeout:.0f} s: {what}", flush=True)
            return timeout, None
        time.sleep(poll)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_stat(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return cpu, rss


def _metric(port: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def offline(teams: int, namespaces: int) -> dict[str, Any]:
    """qm policy check and render, in this process: the figures that need no cluster."""
    from fairshare.policy import parse_policy, render

    doc = large_policy(teams, namespaces)
    text = yaml.safe_dump(doc)
    check_s, policy = _timed(lambda: parse_policy(yaml.safe_load(text), file="scale.yaml"))
    render_s, objects = _timed(lambda: render(policy))
    kinds: dict[str, int] = {}
    for o in objects:
        kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
    print(f"policy: {teams} teams, {teams * namespaces} namespaces, {len(text) / 1024:.0f} KiB of YAML, "
          f"{len(json.dumps(doc)) / 1024:.0f} KiB of JSON")
    print(f"qm policy check (YAML load, parse, every rule): {check_s * 1000:.0f} ms; "
          f"render: {render_s * 1000:.0f} ms "
          f"-> {', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}", flush=True)
    return doc


def _status(kubeconfig: Path, name: str) -> dict[str, Any]:
    done = _kubectl(kubeconfig, "get", "quotapolicy", name, "-o", "json")
    return json.loads(done.stdout).get("status", {}) if done.returncode == 0 else {}


def _ready(status: dict[str, Any], generation: int) -> bool:
    if status.get("observedGeneration") != generation:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []))


def _settled(kubeconfig: Path, name: str) -> bool:
    """The operator has finished with the policy's latest generation: status says it observed it, Ready."""
    done = _kubectl(kubeconfig, "get", "quotapolicy", name, "-o", "json")
    if done.returncode != 0:
        return False
    doc = json.loads(done.stdout)
    return _ready(doc.get("status", {}), doc["metadata"]["generation"])


def _count(kubeconfig: Path, kind: str) -> int:
    done = _kubectl(kubeconfig, "get", kind, "-A", "-l", "queuemanager.dev/policy=scale", "-o", "name")
    return len(done.stdout.split())


def _active(kubeconfig: Path, kind: str) -> int:
    """How many of the policy's ClusterQueues or LocalQueues Kueue marks Active=True."""
    done = _kubectl(kubeconfig, "get", kind, "-A", "-l", "queuemanager.dev/policy=scale", "-o",
                    'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Active")].status}{" "}{end}')
    return done.stdout.split().count("True")


def _gpu_quota_now(custom: Any, cq: str) -> str | None:
    """The ClusterQueue's GPU quota, read with the API client: the edit's poll (kubectl's start-up, about
    150 ms a read, would be counted in the edit's time)."""
    obj = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq)
    for r in obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            return str(r["nominalQuota"])
    return None


def cluster(cp: Any, doc: dict[str, Any], teams: int, namespaces: int, repeats: int) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    kubeconfig = Path(cp.kubeconfig)
    secs, done = _timed(lambda: _kubectl(kubeconfig, "apply", "--server-side", "-f", str(CRD)))
    if done.returncode != 0:
        print(f"the shipped CRD was REFUSED: {done.stderr.strip()}")
        return
    _kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s",
             "crd/quotapolicies.queuemanager.dev")
    print(f"kubectl apply of the CRD and its admission policy: {secs:.2f} s (load {_load()})")

    # The same policy with one namespace in two teams: the admission policy refuses it (once it is active:
    # the API server loads a new ValidatingAdmissionPolicy within about a second).
    bad = json.loads(json.dumps(doc))
    bad["spec"]["teams"][-1]["namespaces"].append(bad["spec"]["teams"][0]["namespaces"][0])
    bad_text = yaml.safe_dump(bad)

    def refused() -> subprocess.CompletedProcess[str] | None:
        done = _kubectl(kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=bad_text)
        return done if done.returncode != 0 else None

    _, denial = _wait(refused, 30, "the admission policy refusing a shared namespace", poll=0.5)
    if denial is not None:
        secs, denial = _timed(refused)
        print(f"refusal of the {teams}-team policy with a shared namespace: {secs:.2f} s: "
              f"{denial.stderr.strip() if denial else 'ACCEPTED'}")

    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    core = k8s.CoreV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    names = [n for t in doc["spec"]["teams"] for n in t["namespaces"]]
    with ThreadPoolExecutor(8) as pool:
        secs, _ = _timed(lambda: list(pool.map(
            lambda n: core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=n))), names)))
    print(f"{len(names)} namespaces created in {secs:.1f} s")

    metrics_port, health_port = _free_port(), _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="qm-bench-teams-"))
    cmd = [sys.executable, "-m", "qm", "run", "--kubeconfig", str(kubeconfig), "--metrics-port",
           str(metrics_port), "--health-port", str(health_port), "--bind-address", "127.0.0.1", "--tick",
           str(TICK), "--log-format", "json", "--no-leader-elect", "--no-forecasts",
           "--ledger", str(workdir / "ledger.db")]
    with (workdir / "operator.log").open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        import urllib.request

        def healthy() -> bool:
            url = f"http://127.0.0.1:{health_port}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
                return bool(r.status == 200)
            return False

        _wait(healthy, 120, "operator healthy", poll=0.2)
        cpu0, rss0 = _proc_stat(proc.pid)
        text = yaml.safe_dump(doc)
        t0 = time.perf_counter()
        done = _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=text)
        apply_s = time.perf_counter() - t0
        if done.returncode != 0:
            print(f"kubectl apply of the {teams}-team policy was REFUSED: {done.stderr.strip()}")
            return
        print(f"kubectl apply of the {teams}-team policy: {apply_s:.2f} s (load {_load()})", flush=True)
        waited, _ = _wait(lambda: _ready(_status(kubeconfig, "scale"), 1), 900, "status Ready", poll=0.5)
        first = apply_s + waited
        cqs, lqs = _count(kubeconfig, "clusterqueues.v1beta2.kueue.x-k8s.io"), _count(
            kubeconfig, "localqueues.v1beta2.kueue.x-k8s.io")
        cpu1, rss1 = _proc_stat(proc.pid)
        print(f"first reconcile: policy applied -> status Ready {first:.1f} s, {cqs} ClusterQueues and "
              f"{lqs} LocalQueues exist (operator CPU {cpu1 - cpu0:.1f} s, RSS {rss0:.0f} -> {rss1:.0f} MiB; "
              f"load {_load()})", flush=True)
        # Kueue's side: every ClusterQueue and LocalQueue Active (its flavors exist, its queue is usable).
        cq_kind, lq_kind = "clusterqueues.v1beta2.kueue.x-k8s.io", "localqueues.v1beta2.kueue.x-k8s.io"
        waited, got = _wait(lambda: _active(kubeconfig, cq_kind) >= teams
                            and _active(kubeconfig, lq_kind) >= teams * namespaces, 900,
                            f"{teams} ClusterQueues and {teams * namespaces} LocalQueues Active", poll=1.0)
        if got is not None:
            print(f"first reconcile: policy applied -> every ClusterQueue and LocalQueue Active in Kueue "
                  f"{time.perf_counter() - t0:.1f} s (load {_load()})", flush=True)

        # One edit -> first step: a team with curve immediate, 8 <-> 7 GPUs. Each edit is made once the
        # operator has finished with the one before (status observed it): one edit, not a burst, whose
        # reconcile would still be writing the previous edit's status when the next one comes.
        team = 4 * (len(doc["spec"]["teams"]) // 8)
        path = f"/spec/teams/{team}/quotas/0/resources/0/nominal"
        edits: list[float] = []
        patches: list[float] = []  # of which the kubectl patch (the API server's validation of the policy)
        settles: list[float] = []  # edit -> status observed the edit's generation, Ready
        for r in range(repeats):
            _wait(lambda: _settled(kubeconfig, "scale"), 120, "the policy's status observing its generation",
                  poll=0.2)
            want = "7" if r % 2 == 0 else "8"
            patch = json.dumps([{"op": "replace", "path": path, "value": int(want)}])
            t0 = time.perf_counter()
            done = _kubectl(kubeconfig, "patch", "quotapolicy", "scale", "--type=json", "-p", patch)
            patches.append(time.perf_counter() - t0)
            if done.returncode != 0:
                print(f"edit refused: {done.stderr.strip()}")
                return
            waited, got = _wait(lambda w=want: _gpu_quota_now(custom, team_name(team)) == w, 120,
                                f"{team_name(team)} at {want} GPUs", poll=0.05)
            if got is None:
                return
            edits.append(time.perf_counter() - t0)
            waited, got = _wait(lambda: _settled(kubeconfig, "scale"), 120, "status observing the edit",
                                poll=0.05)
            if got is not None:
                settles.append(time.perf_counter() - t0)
        cpu2, rss2 = _proc_stat(proc.pid)
        print(f"one edit -> first step applied ({team_name(team)}, curve immediate): median "
              f"{statistics.median(edits) * 1000:.0f} ms, max {max(edits) * 1000:.0f} ms over {len(edits)} "
              f"edits (of which kubectl patch: median {statistics.median(patches) * 1000:.0f} ms; "
              f"tick {TICK} s; "
              f"load {_load()})")
        if settles:
            print(f"one edit -> status observed it (the edit's reconcile done, Ready): median "
                  f"{statistics.median(settles) * 1000:.0f} ms, max {max(settles) * 1000:.0f} ms")
        print(f"operator: {cpu2 - cpu0:.1f} CPU-s since the policy was applied, RSS {rss2:.0f} MiB; "
              f"kube-apiserver RSS {cp.rss_kib().get('kube-apiserver', 0) / 1024:.0f} MiB")
        for phase in ("controller", "render"):
            total = _metric(metrics_port, f'qm_decision_latency_seconds_sum{{decision="{phase}"}}')
            count = _metric(metrics_port, f'qm_decision_latency_seconds_count{{decision="{phase}"}}')
            if count:
                print(f"  reconcile phase {phase}: mean {total / count * 1000:.0f} ms over {count:.0f} "
                      "reconciles")
    finally:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        if proc.poll() is None:
            proc.kill()
        api.close()


def main() -> None:
    teams = int(os.environ.get("QM_BENCH_TEAMS", "500"))
    namespaces = int(os.environ.get("QM_BENCH_NAMESPACES", "2"))
    repeats = int(os.environ.get("QM_BENCH_REPEATS", "6"))
    print(f"load average {_load()} on {os.cpu_count()} cores", flush=True)
    doc = offline(teams, namespaces)
    try:
        from devcluster import Binaries, BinariesMissing, ControlPlane
    except ImportError as err:  # pragma: no cover
        print(f"cluster figures skipped: devcluster unavailable ({err})")
        return
    try:
        binaries = Binaries.discover()
    except BinariesMissing as err:
        print(f"cluster figures skipped: control plane not built (make controlplane): {err}")
        return
    with ControlPlane(None, binaries) as cp:
        cluster(cp, doc, teams, namespaces, repeats)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"benchmark process: {usage.ru_utime + usage.ru_stime:.1f} CPU-s")


if __name__ == "__main__":
    main()
