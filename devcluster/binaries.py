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


def _optional(raw: dict[str, object], key: str) -> Path | None:
    value = raw.get(key)
    return Path(str(value)) if value else None


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
    # Stretch components (build.sh with QM_CONTROLPLANE_EXTRA=1), None when not built.
    kube_controller_manager: Path | None = None
    kube_scheduler: Path | None = None
    kwok: Path | None = None
    kwok_stages: Path | None = None

    @property
    def has_nodes_support(self) -> bool:
        """kube-controller-manager, kube-scheduler and KWOK (with its stages) are all built."""
        extras = (self.kube_controller_manager, self.kube_scheduler, self.kwok)
        return all(p is not None and os.access(p, os.X_OK) for p in extras) and (
            self.kwok_stages is not None and self.kwok_stages.is_dir()
        )

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
                kube_controller_manager=_optional(raw, "kube_controller_manager"),
                kube_scheduler=_optional(raw, "kube_scheduler"),
                kwok=_optional(raw, "kwok"),
                kwok_stages=_optional(raw, "kwok_stages"),
            )
        except (KeyError, TypeError) as err:
            raise BinariesMissing(f"malformed {manifest} (missing {err}); {hint}") from None
        for path in (found.etcd, found.kube_apiserver, found.kueue):
            if not os.access(path, os.X_OK):
                raise BinariesMissing(f"{path} is missing or not executable; {hint}")
        if not found.kueue_crds.is_dir() or not found.kueue_webhooks.is_file():
            raise BinariesMissing(f"Kueue manifests missing under {found.kueue_crds.parent}; {hint}")
        return found
