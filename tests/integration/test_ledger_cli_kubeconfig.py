"""`qm usage`, `qm cost` and `qm audit --kubeconfig`: the ledger the operator writes, its URL read from
the operator's Secret on the real control plane (a SQLite file and a PostgreSQL database): the same answer
as `--db URL`; a missing Secret, a missing key and conflicting flags are one line and exit code 2."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from tests.integration.ledger_operator import ledger_plane
from tests.integration.test_ledger_cli import WINDOW, run, seeded

pytestmark = pytest.mark.integration
__all__ = ["ledger_plane", "seeded"]  # the fixtures, used by name


@pytest.fixture
def admin(ledger_plane: ControlPlane) -> Iterator[tuple[k8s.ApiClient, Path, str]]:
    """An admin client and kubeconfig, and a fresh namespace for the Secret."""
    api = k8s_config.new_client_from_config(config_file=str(ledger_plane.kubeconfig))  # type: ignore[no-untyped-call]
    namespace = f"qm-{secrets.token_hex(4)}"
    core = k8s.CoreV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    try:
        yield api, ledger_plane.kubeconfig, namespace
    finally:
        with contextlib.suppress(ApiException):
            core.delete_namespace(namespace)
        api.close()


def _secret(api: k8s.ApiClient, namespace: str, data: dict[str, str]) -> str:
    k8s.CoreV1Api(api).create_namespaced_secret(namespace, k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="queue-manager-ledger"), string_data=data))
    return f"{namespace}/queue-manager-ledger"


@pytest.mark.parametrize("command", [["usage", "--by", "team,project"], ["cost"], ["audit"]])
def test_the_kubeconfig_reads_the_ledger_url_from_the_operator_s_secret(
        command: list[str], admin: tuple[k8s.ApiClient, Path, str], seeded: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    api, kubeconfig, namespace = admin
    secret = _secret(api, namespace, {"url": seeded})
    code, by_db, _ = run(capsys, *command, "--db", seeded, *WINDOW, "-o", "csv")
    assert code == 0 and len(by_db.splitlines()) > 1
    code, out, err = run(capsys, *command, "--kubeconfig", str(kubeconfig), "--ledger-secret", secret,
                         *WINDOW, "-o", "csv")
    assert (code, err, out) == (0, "", by_db)


def test_a_missing_secret_or_key_and_conflicting_flags_are_one_line(
        admin: tuple[k8s.ApiClient, Path, str], seeded: str, capsys: pytest.CaptureFixture[str]) -> None:
    api, kubeconfig, namespace = admin
    kube = ["--kubeconfig", str(kubeconfig)]
    cases = [
        ([*kube, "--ledger-secret", f"{namespace}/absent"],
         f"qm usage: error: --ledger-secret: no Secret {namespace}/absent at "),
        ([*kube, "--ledger-secret", _secret(api, namespace, {"password": "x"})],
         f"qm usage: error: --ledger-secret: Secret {namespace}/queue-manager-ledger has no key 'url' "
         "(keys: password)"),
        ([*kube, "--ledger-secret", "no-slash"],
         "qm usage: error: --ledger-secret: expected NAMESPACE/NAME (got 'no-slash')"),
        ([*kube, "--db", seeded], "qm usage: error: --db and --kubeconfig exclude each other"),
        (["--context", "x", "--db", seeded], "qm usage: error: --context needs --kubeconfig"),
    ]
    for argv, message in cases:
        code, out, err = run(capsys, "usage", *argv)
        assert (code, out) == (2, ""), argv
        assert err.startswith(message) and err.count("\n") == 1, (argv, err)
