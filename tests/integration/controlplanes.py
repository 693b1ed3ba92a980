"""Control planes for a test session, one per Kueue configuration, started lazily.

One process-wide pool, so that ``tests/integration`` and ``tests/differential`` (whose conftests
both hand it out) share the same control planes. A test process runs the default control plane
plus at most ONE extra (another Kueue Configuration, or the one with fake nodes): asking for a
different extra stops the current one first. (`make test` runs the integration tests on 2
processes, each with its own pool: at most 4 control planes on the 2-core machine.) Everything is
stopped at session end (``stop_all``, called from the conftests' ``pytest_sessionfinish``;
``atexit`` and PDEATHSIG cover a crash).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from devcluster import Binaries, BinariesMissing, ControlPlane

# Kueue's default preemption strategies for fair sharing (apis/config/v1beta2/defaults.go,
# pkg/scheduler/preemption/fairsharing/strategy.go parseStrategies): S2-a then S2-b.
FAIR_SHARING = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}

# Named Kueue configurations (the user part of a Configuration, see devcluster.kueue_config).
# "default" is Kueue's defaults: classical preemption, no fair sharing.
KUEUE_CONFIGS: dict[str, dict[str, object]] = {
    "default": {},
    "fair-sharing": {"fairSharing": FAIR_SHARING},
}
WITH_NODES = "with-nodes"


def ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def binaries_or_skip() -> Binaries:
    """The built binaries; skip the test when missing, or fail it with CI=true."""
    try:
        return Binaries.discover()
    except BinariesMissing as err:
        if ci():
            pytest.fail(f"CI=true and the control plane is not available: {err}", pytrace=False)
        pytest.skip(f"control plane not built: {err}")


def keep_logs() -> bool:
    return os.environ.get("QM_KEEP_LOGS", "") not in ("", "0")


@dataclass
class ControlPlanePool:
    """The session's control planes: ``default`` and at most one extra at a time."""

    default_plane: ControlPlane | None = None
    extra_name: str | None = None
    extra_plane: ControlPlane | None = None
    started: list[str] = field(default_factory=list)  # names, in start order (for reports)

    def default(self, binaries: Binaries) -> ControlPlane:
        if self.default_plane is None:
            cp = ControlPlane(None, binaries, keep_logs=keep_logs())
            cp.start()
            self.default_plane = cp
            self.started.append("default")
        return self.default_plane

    def get(
        self,
        name: str,
        binaries: Binaries,
        config: Mapping[str, object] | None = None,
        *,
        fake_nodes: int = 0,
    ) -> ControlPlane:
        """The control plane running Kueue with configuration ``name`` (``KUEUE_CONFIGS[name]``
        unless ``config`` is given); starts it, stopping the current extra, if needed."""
        cfg = dict(KUEUE_CONFIGS[name] if config is None else config)
        if not cfg and not fake_nodes:
            return self.default(binaries)
        if self.extra_name == name and self.extra_plane is not None:
            return self.extra_plane
        self.stop_extra()
        cp = ControlPlane(None, binaries, keep_logs=keep_logs(), fake_nodes=fake_nodes, kueue_config=cfg)
        cp.start()
        self.extra_name, self.extra_plane = name, cp
        self.started.append(name)
        return cp

    def stop_extra(self) -> None:
        if self.extra_plane is not None:
            self.extra_plane.stop()
        self.extra_name, self.extra_plane = None, None

    def stop_all(self) -> None:
        self.stop_extra()
        if self.default_plane is not None:
            self.default_plane.stop()
            self.default_plane = None


POOL = ControlPlanePool()
