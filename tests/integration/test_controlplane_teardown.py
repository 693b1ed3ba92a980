"""Ctrl-C on a process that runs a control plane leaves no process, port or temp dir behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from devcluster import ControlPlane
from devcluster.process import pid_alive, port_is_listening

REPO = Path(__file__).resolve().parents[2]
HOLDER = """
import json, sys, time
from dataclasses import astuple
sys.path.insert(0, sys.argv[1])
from devcluster import Binaries, ControlPlane
cp = ControlPlane(None, Binaries.discover(), log=lambda _m: None).start()
pids = [c.pid for c in cp.components]
print(json.dumps({"workdir": str(cp.workdir), "pids": pids, "ports": list(astuple(cp.ports))}), flush=True)
time.sleep(300)
"""


def test_ctrl_c_stops_every_component_frees_the_ports_and_removes_the_workdir(
    control_plane: ControlPlane,  # only to skip/fail like the rest when the binaries are missing
) -> None:
    del control_plane
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(REPO)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        before = {
            "alive": [pid_alive(p) for p in started["pids"]],
            "listening": [port_is_listening(p) for p in started["ports"][2:3]],  # the apiserver's
            "workdir": Path(started["workdir"]).is_dir(),
        }
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in started["pids"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        after = {
            "alive": [pid_alive(p) for p in started["pids"]],
            "listening": [port_is_listening(p) for p in started["ports"]],
            "workdir": Path(started["workdir"]).exists(),
        }
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (before, after) == (
        {"alive": [True, True, True], "listening": [True], "workdir": True},
        {"alive": [False, False, False], "listening": [False] * 5, "workdir": False},
    )
