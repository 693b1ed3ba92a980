"""`qm dev-cluster up --policy FILE`: the fake nodes of each flavor carry its node labels and taints and hold
its teams' quotas; Kueue copies the labels the policy accounts. Bad input is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from devcluster.nodes import NodeGroup, NodeShape, Taint
from fairshare.policy import load_policy_file, parse_policy
from qm.cli import main
from qm.dev_nodes import labels_to_copy, node_groups

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "manifests" / "samples" / "quotapolicy.yaml"
A100 = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
PRESENT = (Taint("nvidia.com/gpu", "NoSchedule", "present"),)


@pytest.mark.parametrize(("nodes", "group"), [
    # 20 GPUs of quota (research 4 + business 16), 160 CPUs, 1.25Ti: three 8-GPU servers by default...
    (None, NodeGroup(3, NodeShape(8, "64", "512Gi"), A100, PRESENT, "kwok-gpu-a100")),
    # ... or the asked count, each with its share rounded up to 8 GPUs (CPU and memory by the same factor)
    (2, NodeGroup(2, NodeShape(16, "128", "1024Gi"), A100, PRESENT, "kwok-gpu-a100")),
    (1, NodeGroup(1, NodeShape(24, "192", "1536Gi"), A100, PRESENT, "kwok-gpu-a100")),
], ids=["default-count", "two-nodes", "one-node"])
def test_the_sample_policy_gets_nodes_with_its_flavor_labels_and_taints_that_hold_its_quotas(
        nodes: int | None, group: NodeGroup) -> None:
    [got] = node_groups(load_policy_file(SAMPLE), nodes)
    assert got == group
    assert got.count * got.shape.gpus >= 20


def test_each_flavor_gets_its_own_nodes_and_a_flavor_without_gpus_none() -> None:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["spec"]["flavors"].append({"name": "cpu-only", "nodeLabels": {"pool": "cpu"}})
    doc["spec"]["teams"][0]["quotas"].append(
        {"flavor": "cpu-only", "resources": [{"name": "cpu", "nominal": 200},
                                             {"name": "memory", "nominal": "2Ti"}]})
    groups = node_groups(parse_policy(doc), 2)
    assert [(g.prefix, g.count, g.shape, dict(g.labels)) for g in groups] == [
        ("kwok-gpu-a100", 2, NodeShape(16, "128", "1024Gi"), A100),
        ("kwok-cpu-only", 2, NodeShape(0, "100", "1024Gi"), {"pool": "cpu"})]


def test_kueue_copies_the_accounted_labels_and_the_policys_project_label() -> None:
    assert labels_to_copy(load_policy_file(SAMPLE)) == [
        "project", "team", "cost-center", "queuemanager.dev/user", "queuemanager.dev/project"]


@pytest.mark.parametrize(("argv", "line"), [
    (["--nodes", "0", "--policy", str(SAMPLE)],
     rf"^qm dev-cluster: error: --nodes 0 with --policy {re.escape(str(SAMPLE))}: its flavors need nodes "
     r"\(N >= 1\)$"),
    (["--policy", "{f}"], r"^qm dev-cluster: error: {f}: document 1 \(QuotaPolicy gpu-cluster\): field "
                          r"spec\.teams: required field is missing$"),
], ids=["no-nodes-for-a-policy", "a-bad-policy-file"])
def test_bad_input_to_up_with_a_policy_is_one_line(argv: list[str], line: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SAMPLE.read_text().replace("teams:", "teamz:", 1))
    argv = [a.replace("{f}", str(bad)) for a in argv]
    rc = main(["dev-cluster", "--state-dir", str(tmp_path / "state"), "up", *argv])
    err = capsys.readouterr().err.strip()
    assert (rc, len(err.splitlines())) == (2, 1), err
    assert re.match(line.replace("{f}", re.escape(str(bad))), err), err


def test_each_sample_job_runs_on_the_fake_nodes_exactly_as_long_as_its_container_sleeps() -> None:
    """KWOK completes the pod after its pod-complete delay (delay = jitter-delay: exactly that long,
    devcluster.nodes.run_for); the sample says the same duration as its `sleep`."""
    runs = []
    for job in yaml.safe_load_all((ROOT / "manifests" / "samples" / "jobs.yaml").read_text()):
        template = job["spec"]["template"]
        [container] = template["spec"]["containers"]
        sleep = re.search(r"\bsleep (\d+)\b", " ".join(container["command"]))
        assert sleep is not None, container["command"]
        annotations = template["metadata"]["annotations"]
        runs.append((job["metadata"]["generateName"], sleep.group(1) + "s",
                     annotations["pod-complete.stage.kwok.x-k8s.io/delay"],
                     annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"]))
    assert runs == [("experiment-", "600s", "600s", "600s"), ("serving-refresh-", "300s", "300s", "300s")]


def test_the_local_shift_sample_is_the_sample_with_the_seeds_shift_a_short_transition_and_a_budget() -> None:
    sample = yaml.safe_load(SAMPLE.read_text())
    shift = yaml.safe_load((ROOT / "manifests" / "samples" / "quotapolicy-shift.yaml").read_text())
    research, business = sample["spec"]["teams"]
    research["quotas"][0]["resources"][0].update(nominal=1, borrowingLimit=0)
    business["quotas"][0]["resources"][0]["nominal"] = 19
    sample["spec"]["transitions"]["defaults"].update(duration="1m", stepInterval="20s", deadline="90s")
    sample["spec"]["budgets"] = [{
        "name": "research-month", "selector": {"team": "ai-frontier-research"},
        "period": {"calendar": "Month", "timeZone": "UTC"}, "limit": {"cost": "2000"},
        "thresholds": [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "alert"}]}]
    assert shift == sample
