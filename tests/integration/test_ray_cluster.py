"""A sweep on a real two-node Ray cluster whose workers share nothing with the submitting host but what Ray
ships (issue 38, item 5).

Two `ray start --block` processes on this machine, one CPU each, each with its own temp dir, HOME and cwd,
run by a Python whose path has neither this repository nor its editable install (a venv whose
site-packages point at the dev venv's third-party packages only). The submitter (`qm simulate --executor
ray --address ...`, in a subprocess whose cwd is an empty folder) runs a trace scenario whose policy, edit
and trace are files next to it. Once the sweep's data is read and shipped, the trace file is renamed on
disk, so no worker could read it by path. The sweep must give the summary and files of `--jobs 1`; a task
pinned to the second node then reports what it sees: the trace's path absent, the packages imported from
Ray's runtime resources of that node, and the same workload list built from the shipped bytes.

Ray processes are stopped by process group and by pid (never `ray stop`, which stops every Ray on the host).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from qm.cli import main
from simulations.loader import load_scenario
from simulations.runner import build_jobs
from tests.unit.sim.test_parallel import _without_wall_time
from tests.unit.sim.test_shipping import SCENARIO, TRACE, _policy

ROOT = Path(__file__).resolve().parents[2]
FILES = ("keep/workloads.csv", "cut/preemptions.csv", "cut/actions.csv")


# The submitter: `qm simulate` as a user runs it, with one hook: once the sweep is shipped (executor.ship
# has read every file), the trace moves away. Then a task pinned to the second node says what it sees.
DRIVER = """
import json, os, sys
import simulations.executor as executor
from qm.cli import main

scenario, out, address, trace, moved, report = sys.argv[1:7]
shipped = {}
original = executor.ship


def ship_then_move(jobs):
    out = original(jobs)
    os.rename(trace, moved)  # read and in memory: from now on no process can read the trace by its path
    shipped["jobs"], shipped["bundle"] = out
    return out


executor.ship = ship_then_move
rc = main(["simulate", scenario, "--executor", "ray", "--address", address, "--out", out, "--quiet",
           "--no-report", "--no-progress"])
assert rc == 0, rc
assert not os.path.exists(trace)


def look(job):  # pickled by value (__main__): runs in a worker of the second node
    import fairshare, ray, simulations
    from simulations.runner import build_jobs
    built = build_jobs(job.scenario, job.base_dir, job.replication)
    return {"node": ray.get_runtime_context().get_node_id(), "trace_exists": os.path.exists(trace),
            "simulations": simulations.__file__, "fairshare": fairshare.__file__, "cwd": os.getcwd(),
            "home": os.environ.get("HOME"), "base_dir": str(job.base_dir),
            "jobs": [[j.name, j.arrival, j.source] for j in built]}


import ray
task = ray.remote(executor.run_shipped).options(resources={"second": 0.01})
seen = ray.get(task.remote(look, shipped["jobs"][0], ray.put(shipped["bundle"])))
seen["second"] = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "second" in n["Resources"]]
with open(report, "w") as f:
    json.dump(seen, f)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_python(root: Path) -> Path:
    """A Python with this venv's third-party packages (Ray, pydantic, ...) but not this project: a venv whose
    site-packages names the dev venv's by a .pth line (a folder added so has its own .pth files, among them
    the editable install's finder, NOT run)."""
    env = root / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "dev-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env / "bin" / "python"


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RAY_ADDRESS") and not k.startswith("PYTEST")}
    env.update(HOME=str(home), TMPDIR=str(home), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               QM_CORE="python")
    return env


class Node:
    def __init__(self, python: Path, root: Path, name: str, *args: str) -> None:
        self.dir = root / name
        for sub in ("home", "cwd"):
            (self.dir / sub).mkdir(parents=True)
        self.temp = self.dir / "t"  # short: Ray's socket paths must fit in 107 characters
        self.log = (self.dir / "start.log").open("w")
        ports = ["--node-manager-port", "--object-manager-port",
                 "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--metrics-export-port",
                 "--runtime-env-agent-port"]
        flags = [x for p in ports for x in (p, str(_free_port()))]
        self.process = subprocess.Popen(
            ["nice", "-n", "10", str(python), "-m", "ray.scripts.scripts", "start", "--block",
             "--num-cpus=1", f"--temp-dir={self.temp}", "--disable-usage-stats", *flags, *args],
            cwd=self.dir / "cwd", env=_clean_env(self.dir / "home"), stdout=self.log,
            stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        """SIGTERM to the node's process group, then SIGKILL; then any straggler that names this node's temp
        dir (a process Ray moved out of the group), by pid."""
        for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        for pid in _pids_naming(str(self.temp)):
            os.kill(pid, signal.SIGKILL)
        self.log.close()


def _pids_naming(text: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                out.append(int(entry.name))
    return out


@pytest.fixture
def cluster() -> Iterator[tuple[str, list[Node]]]:
    root = Path(tempfile.mkdtemp(prefix="qmray-", dir="/tmp"))
    python = _cluster_python(root)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes = [Node(python, root, "head", "--head", f"--port={port}", "--include-dashboard=false",
                  "--node-ip-address=127.0.0.1")]
    try:
        _wait_for(address, nodes[0])
        nodes.append(Node(python, root, "second", f"--address={address}", "--node-ip-address=127.0.0.1",
                          '--resources={"second": 1}'))
        yield address, nodes
    finally:
        for node in reversed(nodes):
            node.stop()
        left = _pids_naming(str(root))
        shutil.rmtree(root, ignore_errors=True)
        assert left == [], f"Ray processes left running: {left}"


def _wait_for(address: str, node: Node, timeout: float = 240.0) -> None:
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert node.process.poll() is None, (node.dir / "start.log").read_text()
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"the Ray head did not answer at {address} in {timeout:.0f}s")


@pytest.mark.timeout(900)  # two Ray nodes and the runtime env set-up on a loaded 2-core machine
def test_a_trace_sweep_on_two_nodes_that_cannot_read_the_scenario_gives_the_serial_results(
    cluster: tuple[str, list[Node]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address, nodes = cluster
    submit = Path(tempfile.mkdtemp(prefix="qmray-submit-", dir="/tmp"))
    try:
        (submit / "traces").mkdir()
        trace = submit / "traces" / "itp-cluster10.csv"
        shutil.copy(TRACE, trace)
        (submit / "policy.yaml").write_text(_policy(8))
        (submit / "policy-cut.yaml").write_text(_policy(2))
        scenario = submit / "sweep.yaml"
        scenario.write_text(SCENARIO)
        flags = ["--quiet", "--no-report", "--no-progress"]
        serial = ["simulate", str(scenario), "--out", str(tmp_path / "serial"), "--jobs", "1", *flags]
        assert main(serial) == 0
        serial_out = capsys.readouterr().out.replace(str(tmp_path / "serial"), "OUT")
        loaded = load_scenario(scenario)
        serial_jobs = [[j.name, j.arrival, j.source] for j in build_jobs(loaded.base, loaded.directory, 0)]
        assert any(j[2] == "itp" for j in serial_jobs)

        driver = submit / "driver"
        driver.mkdir()
        (driver / "driver.py").write_text(DRIVER)
        moved = submit / "moved-away.csv"
        report = tmp_path / "seen.json"
        done = subprocess.run(
            ["nice", "-n", "10", sys.executable, "driver.py", str(scenario), str(tmp_path / "ray"), address,
             str(trace), str(moved), str(report)],
            cwd=driver, env=_clean_env(Path(os.environ.get("HOME", "/root"))), capture_output=True, text=True,
            timeout=800, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        assert moved.exists() and not trace.exists()  # the trace was away while the tasks ran
    finally:
        shutil.rmtree(submit, ignore_errors=True)

    summaries = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("serial", "ray")]
    assert _without_wall_time(summaries[0]) == _without_wall_time(summaries[1])
    assert sum(len(v["replications"]) for v in summaries[1]["variants"]) == 4  # 2 variants x 2 replications
    for name in FILES:
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
    assert done.stdout.replace(str(tmp_path / "ray"), "OUT") == serial_out

    seen = json.loads(report.read_text())
    second = nodes[1].temp
    assert [seen["node"]] == seen["second"]  # the task ran on the second node
    assert seen["trace_exists"] is False
    for package in ("simulations", "fairshare"):  # the packages came through Ray, to that node's temp dir
        assert Path(seen[package]).is_relative_to(second), seen[package]
        assert not Path(seen[package]).is_relative_to(ROOT), seen[package]
    assert Path(seen["base_dir"]).parent == nodes[1].dir / "home"  # the bundle, written by the worker
    assert Path(seen["base_dir"]).name.startswith("qm-sweep-")
    assert seen["home"] == str(nodes[1].dir / "home")
    assert seen["jobs"] == serial_jobs  # the same workloads, built from the shipped bytes
