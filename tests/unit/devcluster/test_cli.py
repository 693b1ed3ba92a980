"""`qm dev-cluster` without a running control plane: clear messages, no tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from qm.cli import main


@pytest.mark.parametrize(
    ("argv", "code", "stream", "needle"),
    [
        (["status"], 1, "out", "not running (no state in"),
        (["down"], 0, "out", "no dev cluster recorded in"),
        (["kubeconfig", "--user", "alice"], 2, "err", "qm dev-cluster: error: no control plane recorded in"),
        (["up"], 2, "err", "qm dev-cluster: error: control-plane binaries not built"),
    ],
    ids=[
        "status-reports-not-running",
        "down-is-a-no-op",
        "kubeconfig-needs-a-cluster",
        "up-says-how-to-build",
    ],
)
def test_dev_cluster_commands_without_a_cluster_explain_themselves(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    stream: str,
    needle: str,
) -> None:
    monkeypatch.setenv("QM_CACHE_DIR", str(tmp_path / "empty-cache"))
    rc = main(["dev-cluster", "--state-dir", str(tmp_path / "state"), *argv])
    captured = capsys.readouterr()
    assert (rc, needle in (captured.out if stream == "out" else captured.err)) == (code, True)


def test_up_refuses_a_state_dir_that_holds_something_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    rc = main(["dev-cluster", "--state-dir", str(tmp_path), "up"])
    assert (
        rc,
        "holds no dev cluster state" in capsys.readouterr().err,
        (tmp_path / "precious.txt").exists(),
    ) == (
        2,
        True,
        True,
    )
