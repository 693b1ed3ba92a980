"""Render kubeconfig files with embedded certificate data."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from devcluster.pki import KeyPair


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render(server: str, ca_pem: bytes, user: str, client: KeyPair, *, cluster: str = "qm-dev") -> str:
    """A single-context kubeconfig for ``user`` authenticating with a client certificate."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert_pem),
                    "client-key-data": _b64(client.key_pem),
                },
            }
        ],
        "contexts": [{"name": f"{user}@{cluster}", "context": {"cluster": cluster, "user": user}}],
        "current-context": f"{user}@{cluster}",
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: Path, text: str) -> Path:
    """Write a kubeconfig readable only by its owner (it holds a private key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(text, encoding="utf-8")
    return path
