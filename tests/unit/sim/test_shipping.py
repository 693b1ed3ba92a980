"""A sweep's runs made portable (simulations/shipping.py): what a Ray worker on another machine runs, with
the scenario's folder gone, gives the workloads and results of the run on the submitting host."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from fairshare.errors import InputError
from simulations.executor import RunJob, run_job, run_shipped, ship
from simulations.loader import load_scenario
from simulations.record import digest
from simulations.runner import build_jobs
from simulations.shipping import Bundle, portable, unpacked

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "tests" / "data" / "itp-cluster10-head.csv"


def _policy(nominal_a: int) -> str:
    return f"""apiVersion: queuemanager.dev/v1alpha1
kind: QuotaPolicy
metadata: {{name: sweep}}
spec:
  flavors: [{{name: gpu}}]
  transitions: {{defaults: {{curve: immediate, drain: false}}}}
  teams:
    - {{name: a, namespaces: [a], localQueueName: q, cohort: all, preemption: {{reclaimWithinCohort: Any}},
       quotas: [{{flavor: gpu, resources: [{{name: nvidia.com/gpu, nominal: {nominal_a}}}]}}]}}
    - {{name: b, namespaces: [b], localQueueName: q, cohort: all, preemption: {{reclaimWithinCohort: Any}},
       quotas: [{{flavor: gpu, resources: [{{name: nvidia.com/gpu, nominal: 16}}]}}]}}
"""


SCENARIO = """
name: shipped
description: a trace, a policy file and a policy edit file, next to the scenario
seed: 3
replications: 2
horizon: 2d
cluster:
  quotaPolicy: policy.yaml
workloads:
  - name: itp
    trace:
      format: itp
      paths: [traces/itp-*.csv]
      queues: {rule: hash, localQueues: [a/q, b/q]}
  - name: extra
    localQueue: a/q
    generator:
      arrivals: {kind: poisson, ratePerHour: 1}
      durations: {kind: exponential, mean: 2h}
      requests: [{resources: {nvidia.com/gpu: 2}}]
variants:
  - name: keep
  - name: cut
    overrides:
      events:
        - {at: 12h, policy: policy-cut.yaml}
"""


MANIFEST = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spare}
"""


def _folder(tmp_path: Path, *, absolute_trace: bool = False) -> Path:
    folder = tmp_path / "scenario"
    (folder / "traces").mkdir(parents=True)
    shutil.copy(TRACE, folder / "traces" / "itp-cluster10.csv")
    shutil.copy(TRACE, folder / "traces" / "itp-copy [1].csv")  # a glob character in a matched name
    (folder / "policy.yaml").write_text(_policy(8))
    (folder / "policy-cut.yaml").write_text(_policy(2))
    (folder / "flavors.yaml").write_text(MANIFEST)
    text = SCENARIO.replace("  quotaPolicy: policy.yaml",
                            "  quotaPolicy: policy.yaml\n  manifests: [flavors.yaml]")
    if absolute_trace:
        text = text.replace("paths: [traces/itp-*.csv]", f"paths: [{folder}/traces/itp-*.csv]")
    (folder / "sweep.yaml").write_text(text)
    return folder


@pytest.fixture(autouse=True)
def _temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where unpacked() writes


@pytest.mark.parametrize("absolute_trace", [False, True], ids=["trace relative", "trace absolute"])
def test_a_shipped_run_with_the_scenario_folder_gone_gives_the_local_workloads_and_results(
    tmp_path: Path, absolute_trace: bool
) -> None:
    folder = _folder(tmp_path, absolute_trace=absolute_trace)
    loaded = load_scenario(folder / "sweep.yaml")
    jobs = [RunJob(v.name, r, v.scenario, loaded.directory) for v in loaded.variants for r in range(2)]
    local = [digest(run_job(j)) for j in jobs]
    built = [build_jobs(j.scenario, j.base_dir, j.replication) for j in jobs]

    shipped, bundle = ship(jobs)
    assert len(bundle.files) == 2  # each trace file once, for all four runs
    shutil.rmtree(folder)  # what a worker on another machine sees of it
    assert [digest(run_shipped(run_job, j, bundle)) for j in shipped] == local
    base = unpacked(bundle)
    assert [build_jobs(j.scenario, base, j.replication) for j in shipped] == built


def test_a_portable_scenario_has_its_policies_and_manifests_inline_in_file_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    loaded = load_scenario(folder / "sweep.yaml")
    cut = next(v.scenario for v in loaded.variants if v.name == "cut")
    out = portable(cut, loaded.directory, Bundle())
    assert out.cluster.manifests == [] and out.cluster.objects[0]["metadata"] == {"name": "spare"}
    assert isinstance(out.cluster.quota_policy, dict) and isinstance(out.events[0].policy, dict)
    assert out.workloads[0].trace is not None
    assert all("/" not in p for p in out.workloads[0].trace.paths)


def test_a_trace_that_is_gone_before_shipping_is_one_line_naming_the_source(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    loaded = load_scenario(folder / "sweep.yaml")
    shutil.rmtree(folder / "traces")
    with pytest.raises(InputError) as caught:
        ship([RunJob("keep", 0, loaded.base, loaded.directory)])
    assert str(caught.value) == ("field workloads[0].trace.paths: no trace file matches "
                                 "(got 'traces/itp-*.csv')")


def test_a_node_folder_whose_bytes_are_not_the_bundles_is_not_used(tmp_path: Path) -> None:
    bundle = Bundle({"a.csv": b"job,1\n"})
    shared = tmp_path / "tmp" / f"qm-sweep-{bundle.digest[:32]}"
    shared.mkdir()
    (shared / "a.csv").write_bytes(b"job,2\n")  # left by someone else, or half written
    folder = unpacked(bundle)
    assert folder != shared and (folder / "a.csv").read_bytes() == b"job,1\n"
    other = Bundle({"b.csv": b"x"})  # a clean node: the shared folder, named by the content
    assert unpacked(other) == tmp_path / "tmp" / f"qm-sweep-{other.digest[:32]}"
