"""A failed start tears down what it started, keeps the logs and names the failing component."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import ControlPlane, ControlPlaneError
from devcluster.binaries import Binaries, Versions
from devcluster.process import pid_alive


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_component_that_exits_fails_the_start_kills_the_others_and_keeps_the_logs(tmp_path: Path) -> None:
    pidfile = tmp_path / "etcd.pid"
    binaries = Binaries(
        etcd=_script(tmp_path / "etcd", f"echo $$ > {pidfile}; exec sleep 60"),
        kube_apiserver=_script(
            tmp_path / "kube-apiserver", "echo 'bind: address already in use' >&2; exit 3"
        ),
        kueue=_script(tmp_path / "kueue", "exit 0"),
        kueue_crds=tmp_path,
        kueue_webhooks=tmp_path / "none.yaml",
        versions=Versions("v1.0.0", "v3.0.0", "v0.0.1"),
    )
    workdir = tmp_path / "work"
    cp = ControlPlane(workdir, binaries, timeout=10.0, log=lambda _m: None)
    with pytest.raises(ControlPlaneError) as err:
        cp.start()
    message = str(err.value)
    etcd_pid = int(pidfile.read_text()) if pidfile.exists() else None
    assert {
        "names_component": "kube-apiserver exited with code 3" in message,
        "shows_log_tail": "address already in use" in message,
        "names_log": str(workdir / "logs" / "kube-apiserver.log") in message,
        "etcd_alive": etcd_pid is not None and pid_alive(etcd_pid),
        "logs_kept": sorted(p.name for p in (workdir / "logs").iterdir()),
    } == {
        "names_component": True,
        "shows_log_tail": True,
        "names_log": True,
        "etcd_alive": False,
        "logs_kept": ["etcd.log", "kube-apiserver.log"],
    }
