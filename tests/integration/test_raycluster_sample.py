"""The shipped RayCluster for sweeps (manifests/samples/raycluster-sweeps.yaml) on the real control plane:
the KubeRay RayCluster CRD (v1.6.2, from the Go module Kueue v0.19.2 is built against) accepts it, and the
real Kueue, with its RayCluster integration on, queues it in the sample policy's LocalQueue, admits its
Workload (head + worker group) and unsuspends it. No KubeRay operator runs: no pods, only the admission."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from fairshare.policy.loader import load_policy_file
from fairshare.policy.render import render
from tests.integration.controlplanes import POOL, binaries_or_skip

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests" / "samples"
KUBECTL = Path(sys.executable).parent / "kubectl"
RAY = {"integrations": {"frameworks": ["batch/job", "ray.io/raycluster"]}}


def _kubectl(cp: ControlPlane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([str(KUBECTL), *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KUBECONFIG": str(cp.kubeconfig)}, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def _kubectl_fails(cp: ControlPlane, *args: str, stdin: str) -> str:
    done = subprocess.run([str(KUBECTL), *args], input=stdin, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KUBECONFIG": str(cp.kubeconfig)}, check=False)
    assert done.returncode != 0, done.stdout
    return done.stderr


def _get(cp: ControlPlane, *what: str) -> Any:
    return json.loads(_kubectl(cp, "get", *what, "-o", "json"))


@pytest.mark.timeout(600)
def test_kueue_admits_the_sample_raycluster_in_the_sample_policys_queue() -> None:
    cp = POOL.get("raycluster", binaries_or_skip(), RAY)
    sample = yaml.safe_load((SAMPLES / "raycluster-sweeps.yaml").read_text())
    objects = render(load_policy_file(SAMPLES / "quotapolicy.yaml"))
    _kubectl(cp, "apply", "-f", str(SAMPLES / "namespaces.yaml"))
    _kubectl(cp, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    _kubectl(cp, "create", "-f", str(SAMPLES / "raycluster-sweeps.yaml"))
    ns, name = sample["metadata"]["namespace"], sample["metadata"]["name"]

    deadline = time.monotonic() + 120
    admitted: dict[str, Any] | None = None
    while time.monotonic() < deadline and admitted is None:
        for w in _get(cp, "workloads.kueue.x-k8s.io", "-n", ns)["items"]:
            refs = w["metadata"].get("ownerReferences", [])
            owners = [o["name"] for o in refs if o["kind"] == "RayCluster"]
            conditions = {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
            if owners == [name] and conditions.get("Admitted") == "True":
                admitted = w
        time.sleep(1)
    assert admitted is not None, json.dumps(_get(cp, "workloads.kueue.x-k8s.io", "-n", ns), indent=1)[-3000:]
    queue = sample["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert admitted["spec"]["queueName"] == queue
    assert admitted["spec"]["priorityClassRef"]["name"] == "low-priority-experiment"
    # One PodSet for the head and one per worker group, counted as the RayCluster asks (Kueue's
    # raycluster PodSets: head count 1, a group's count its replicas).
    podsets = {p["name"]: p["count"] for p in admitted["spec"]["podSets"]}
    assert podsets == {"head": 1, "sweep": sample["spec"]["workerGroupSpecs"][0]["replicas"]}
    charged = {r for a in admitted["status"]["admission"]["podSetAssignments"] for r in a["resourceUsage"]}
    assert charged == {"cpu", "memory"}  # the team's cpu and memory quota, no GPU
    # Admitted, Kueue unsuspends the RayCluster (jobframework: RunWithPodSetsInfo) for KubeRay to start it.
    deadline = time.monotonic() + 60
    while _get(cp, "raycluster", "-n", ns, name)["spec"].get("suspend") is not False:
        assert time.monotonic() < deadline, "the admitted RayCluster stayed suspended"
        time.sleep(1)


def test_kueue_rejects_the_sample_with_ray_autoscaling_on() -> None:
    """Kueue's RayCluster webhook is live on this control plane: in-tree autoscaling is refused for a
    queued RayCluster (raycluster_webhook.go validateCreate), which is why the sample's group is fixed."""
    cp = POOL.get("raycluster", binaries_or_skip(), RAY)
    sample = yaml.safe_load((SAMPLES / "raycluster-sweeps.yaml").read_text())
    sample["metadata"]["name"] = "autoscaled"
    sample["spec"]["enableInTreeAutoscaling"] = True
    _kubectl(cp, "apply", "-f", str(SAMPLES / "namespaces.yaml"))
    err = _kubectl_fails(cp, "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(sample))
    assert ("spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use "
            "autoscaling only as an elastic job") in err, err
