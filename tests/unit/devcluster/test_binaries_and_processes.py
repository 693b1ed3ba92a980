"""Finding the built binaries, and process-group teardown."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from devcluster.binaries import Binaries, BinariesMissing
from devcluster.process import Supervisor, free_ports, pid_alive


def _manifest(root: Path, *, executable: bool = True) -> None:
    for name in ("etcd", "kube-apiserver", "kueue"):
        f = root / name
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755 if executable else 0o644)
    (root / "crds").mkdir()
    (root / "webhooks.yaml").write_text("")
    (root / "controlplane.json").write_text(
        json.dumps(
            {
                "versions": {"kubernetes": "v1", "etcd": "v2", "kueue": "v3"},
                "etcd": str(root / "etcd"),
                "kube_apiserver": str(root / "kube-apiserver"),
                "kueue": str(root / "kueue"),
                "kueue_crds": str(root / "crds"),
                "kueue_webhooks": str(root / "webhooks.yaml"),
            }
        )
    )


def test_discover_reads_the_manifest_build_sh_writes(tmp_path: Path) -> None:
    _manifest(tmp_path)
    found = Binaries.discover(tmp_path)
    assert (found.kube_apiserver, found.versions.kueue) == (tmp_path / "kube-apiserver", "v3")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: None, "no "),
        (lambda root: _manifest(root, executable=False), "not executable"),
        (lambda root: (root / "controlplane.json").write_text("{}"), "malformed"),
    ],
    ids=["no-manifest", "binary-not-executable", "manifest-malformed"],
)
def test_discover_says_what_is_missing_and_how_to_build_it(
    tmp_path: Path, setup: object, message: str
) -> None:
    setup(tmp_path)  # type: ignore[operator]
    with pytest.raises(BinariesMissing) as err:
        Binaries.discover(tmp_path)
    assert message in str(err.value)
    assert "make controlplane" in str(err.value)


def test_free_ports_are_distinct_loopback_ports() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5


def test_stopping_kills_the_whole_process_group_including_grandchildren(tmp_path: Path) -> None:
    sup = Supervisor(die_with_parent=True)
    pidfile = tmp_path / "grandchild.pid"
    comp = sup.start("sh", ["/bin/sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], tmp_path / "sh.log")
    deadline = time.monotonic() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    grandchild = int(pidfile.read_text())
    assert (pid_alive(comp.pid), pid_alive(grandchild)) == (True, True)
    sup.stop_all(grace=2.0)
    deadline = time.monotonic() + 5
    while pid_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (pid_alive(comp.pid), pid_alive(grandchild), sup.components) == (False, False, [])
    assert os.getpgid(os.getpid()) != comp.pid
