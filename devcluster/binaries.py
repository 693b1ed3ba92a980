"""Locate the control-plane binaries built by tools/controlplane/build.sh.

build.sh writes ``$QM_CACHE_DIR/controlplane.json`` once every component exists; that manifest
(absolute paths + versions) is the only contract between the shell build and this package.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

MANIFEST_NAME = "controlplane.json"


class BinariesMissing(Exception):
    """The control-plane binaries (or Kueue's manifests) are not built; the message says how to."""


def default_cache_dir() -> Path:
    """``$QM_CACHE_DIR`` or ``~/.cache/queue-manager`` (the same default as build.sh and the Makefile)."""
    env = os.environ.get("QM_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "queue-manager"


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str
    etcd: str
    kueue: str


@dataclass(frozen=True, slots=True)
class Binaries:
    """Absolute paths of everything the launcher runs or applies."""

    etcd: Path
    kube_apiserver: Path
    kueue: Path
    kueue_crds: Path
    kueue_webhooks: Path
    versions: Versions

    @classmethod
    def discover(cls, cache_dir: Path | None = None) -> Binaries:
        """Read the manifest in ``cache_dir`` and check every file exists; raise BinariesMissing otherwise."""
        root = cache_dir if cache_dir is not None else default_cache_dir()
        manifest = root / MANIFEST_NAME
        hint = "run `make controlplane` (bash tools/controlplane/build.sh)"
        try:
            raw = json.loads(manifest.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BinariesMissing(f"control-plane binaries not built: no {manifest}; {hint}") from None
        except (OSError, ValueError) as err:
            raise BinariesMissing(f"unreadable {manifest}: {err}; {hint}") from None
        try:
            versions = raw["versions"]
            found = cls(
                etcd=Path(raw["etcd"]),
                kube_apiserver=Path(raw["kube_apiserver"]),
                kueue=Path(raw["kueue"]),
                kueue_crds=Path(raw["kueue_crds"]),
                kueue_webhooks=Path(raw["kueue_webhooks"]),
                versions=Versions(
                    kubernetes=str(versions["kubernetes"]),
                    etcd=str(versions["etcd"]),
                    kueue=str(versions["kueue"]),
                ),
            )
        except (KeyError, TypeError) as err:
            raise BinariesMissing(f"malformed {manifest} (missing {err}); {hint}") from None
        for path in (found.etcd, found.kube_apiserver, found.kueue):
            if not os.access(path, os.X_OK):
                raise BinariesMissing(f"{path} is missing or not executable; {hint}")
        if not found.kueue_crds.is_dir() or not found.kueue_webhooks.is_file():
            raise BinariesMissing(f"Kueue manifests missing under {found.kueue_crds.parent}; {hint}")
        return found
