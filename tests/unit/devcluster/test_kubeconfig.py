"""Kubeconfig rendering."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from devcluster import kubeconfig
from devcluster.pki import KeyPair


def test_a_kubeconfig_embeds_server_ca_and_client_credentials(tmp_path: Path) -> None:
    text = kubeconfig.render("https://127.0.0.1:6443", b"CA", "alice", KeyPair(b"CERT", b"KEY"))
    path = kubeconfig.write(tmp_path / "k", text)
    doc = yaml.safe_load(path.read_text())
    b64 = base64.b64encode
    assert doc == {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "qm-dev",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": b64(b"CA").decode(),
                },
            }
        ],
        "users": [
            {
                "name": "alice",
                "user": {
                    "client-certificate-data": b64(b"CERT").decode(),
                    "client-key-data": b64(b"KEY").decode(),
                },
            }
        ],
        "contexts": [{"name": "alice@qm-dev", "context": {"cluster": "qm-dev", "user": "alice"}}],
        "current-context": "alice@qm-dev",
        "preferences": {},
    }
    assert path.stat().st_mode & 0o077 == 0
