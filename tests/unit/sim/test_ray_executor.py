"""`qm simulate --executor ray [--address ADDR]`: the same (variant, replication) runs as Ray tasks on a real
local Ray instance started by the test (num_cpus=2, no dashboard), the same summary.json and CSVs as
`--jobs 1`; without Ray, one line saying how to install it (exit 2); an address nothing answers at, one line
at once instead of ray.init's minutes of retries."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fairshare.errors import InputError
from qm.cli import main
from qm.commands.plan import _simulate as plan_simulate
from simulations.loader import load_document
from tests.unit.plan.world import GPU, ORIGIN, workload
from tests.unit.plan.world import scenario as plan_scenario
from tests.unit.sim.test_cli import SCENARIO
from tests.unit.sim.test_parallel import _without_wall_time

ROOT = Path(__file__).resolve().parents[3]
FILES = ("keep/workloads.csv", "abrupt-cut/preemptions.csv", "abrupt-cut/actions.csv")


def _simulate(scenario: Path, out: Path, *flags: str) -> int:
    return main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-report", "--no-progress",
                 *flags])


@pytest.mark.timeout(600)  # Ray's start on a loaded 2-core machine (measured 25-50 s at load 15)
def test_ray_tasks_give_the_summary_and_files_of_a_serial_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray  # the optional extra queue-manager[ray], in the dev lock

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    assert _simulate(scenario, tmp_path / "serial", "--jobs", "1") == 0
    serial_out = capsys.readouterr().out.replace(str(tmp_path / "serial"), "OUT")
    plan = _plan_forecast(tmp_path, "local")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert _simulate(scenario, tmp_path / "ray", "--executor", "ray") == 0
        plan_on_ray = _plan_forecast(tmp_path, "ray")
    finally:
        ray.shutdown()
    assert plan_on_ray == plan  # qm plan's forecast goes through the same executor
    ray_out = capsys.readouterr().out.replace(str(tmp_path / "ray"), "OUT")
    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("serial", "ray")]
    assert _without_wall_time(summaries[0]) == _without_wall_time(summaries[1])
    assert sum(len(v["replications"]) for v in summaries[1]["variants"]) == 4  # 2 variants x 2 replications
    for name in FILES:
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    assert serial_out == ray_out


def _plan_forecast(tmp_path: Path, executor: str, address: str | None = None) -> tuple[Any, ...]:
    """qm plan's forecast step (qm/commands/plan.py: _simulate) over a scenario as the plan builds it (the
    live state at t=0: one job running, one pending; calibrated arrivals), two replications."""
    live = [{"workload": workload("research", "running", 2, ORIGIN - 600, admitted=ORIGIN - 300),
             "work": 5400},
            {"workload": workload("research", "waiting", 4, ORIGIN - 60), "work": 1800}]
    doc = plan_scenario(live, horizon="6h", replications=2)
    doc["workloads"].append({"name": "fitted", "localQueue": "research/research", "generator": {
        "arrivals": {"kind": "poisson", "ratePerHour": 6}, "durations": {"kind": "exponential", "mean": "1h"},
        "requests": [{"resources": {GPU: 1}}]}})
    built = SimpleNamespace(loaded=load_document(doc, tmp_path / "plan" / "scenario.json"))
    args = argparse.Namespace(force=False, jobs=1 if executor == "local" else 2, progress=False,
                              executor=executor, address=address)
    outcome = plan_simulate(built, args)
    summary = _without_wall_time(outcome.summary.model_dump(mode="json"))
    assert sum(len(v["replications"]) for v in summary["variants"]) == 2
    return summary, outcome.digests


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on (bound, then released)
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_address_no_ray_cluster_answers_at_is_one_line_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    assert not ray.is_initialized()
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    address = f"127.0.0.1:{_closed_port()}"
    started = time.perf_counter()
    assert _simulate(scenario, tmp_path / "out", "--executor", "ray", "--address", address) == 2
    assert time.perf_counter() - started < 30  # not ray.init's retries (minutes)
    assert capsys.readouterr().err == (f"qm simulate: error: field --address: no Ray cluster answers there "
                                       f"(Connection refused) (got {address!r})\n")
    # qm plan's forecast takes the same way to Ray (and so meets the same dead address)
    with pytest.raises(InputError, match=r"--address: no Ray cluster answers there"):
        _plan_forecast(tmp_path, "ray", address)


def test_a_ray_address_variable_no_ray_cluster_answers_at_is_one_line_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 33: without --address, ray.init() reads RAY_ADDRESS and retried a refused port for minutes.
    import ray

    assert not ray.is_initialized()
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    for address, why in ((f"127.0.0.1:{_closed_port()}", "no Ray cluster answers there (Connection refused)"),
                         ("127.0.0.1:99999", "must be auto, HOST:PORT or ray://HOST:PORT")):
        monkeypatch.setenv("RAY_ADDRESS", address)
        started = time.perf_counter()
        assert _simulate(scenario, tmp_path / "out", "--executor", "ray") == 2
        assert time.perf_counter() - started < 30  # not ray.init's retries (minutes)
        assert capsys.readouterr().err == f"qm simulate: error: field RAY_ADDRESS: {why} (got {address!r})\n"


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--address", "127.0.0.1:6379"), "qm simulate: error: --address needs --executor ray"),
        (("--executor", "ray", "--address", "head:port"),
         "qm simulate: error: field --address: must be auto, HOST:PORT or ray://HOST:PORT (got 'head:port')"),
    ],
)
def test_an_address_without_ray_or_malformed_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], line: str
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    assert _simulate(scenario, tmp_path / "out", *flags) == 2
    assert capsys.readouterr().err == line + "\n"


def test_without_ray_installed_the_executor_says_how_to_install_it(tmp_path: Path) -> None:
    """A Python where `import ray` fails as it does when the extra is not installed (sys.modules["ray"] =
    None makes the import raise ImportError): the real qm, in a subprocess."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    code = ("import sys; sys.modules['ray'] = None; from qm.cli import main; "
            f"sys.exit(main(['simulate', {str(scenario)!r}, '--executor', 'ray', '--quiet']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("qm simulate: error: field --executor: the Ray executor needs Ray: pip install "
                           "'queue-manager[ray]' (got 'ray')\n")
