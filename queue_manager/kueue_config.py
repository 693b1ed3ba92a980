"""Which Kueue Configuration the controller's model follows: fair sharing on or off.

Kueue reads its Configuration from ConfigMap `kueue-system/kueue-manager-config` (key
`controller_manager_config.yaml`, as its release manifests install it; the local control plane publishes
the one its binary runs with there too). Fair sharing is on when the Configuration has `fairSharing`, as
`fairsharing.Enabled` reads it (pkg/scheduler/preemption/fairsharing/strategy.go); in config v1beta1 only
with `fairSharing.enable: true` (apis/config/v1beta1/configuration_conversion.go drops it otherwise).

`qm run --kueue-fair-sharing=auto` (the default) reads it when the operator starts reconciling and again
every `REFRESH_SECONDS` (Kueue reads its own when it starts: a changed Configuration counts once Kueue is
restarted with it, and within a minute for the operator); `on` or `off` say it instead of reading. Not
readable (no ConfigMap, no permission, not YAML): the model runs without fair sharing and one warning says
so, once per reason.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from fairshare.scheduler import SchedulerConfig

log = logging.getLogger("queue_manager")

NAMESPACE = "kueue-system"
CONFIGMAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
WHERE = f"ConfigMap {NAMESPACE}/{CONFIGMAP}"
REFRESH_SECONDS = 60.0


@dataclass(frozen=True)
class ReadConfiguration:
    """Kueue's Configuration as read from its ConfigMap: the document, or None and why not."""

    configuration: Mapping[str, Any] | None
    source: str  # where it was read, or why it was not
    problem: str | None = None  # the ConfigMap is there but its Configuration is not usable


def configuration_of(configmap: Mapping[str, Any] | None, *,
                     why_absent: str = f"no {WHERE}") -> ReadConfiguration:
    """Pure: the Configuration in Kueue's ConfigMap as read (None: absent or not readable, `why_absent`)."""
    if configmap is None:
        return ReadConfiguration(None, why_absent)
    text = (configmap.get("data") or {}).get(CONFIG_KEY)
    if not isinstance(text, str):
        return ReadConfiguration(None, f"{WHERE} has no {CONFIG_KEY}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, Mapping):
        why = f"{WHERE}: {CONFIG_KEY} is not a YAML mapping"
        return ReadConfiguration(None, why, why)
    return ReadConfiguration(doc, WHERE)


def fair_sharing_of(configuration: Mapping[str, Any]) -> bool:
    """Kueue's switch for fair sharing: `fairSharing` present (config v1beta2), and in v1beta1 with
    `enable: true` (the conversion to v1beta2 drops it otherwise)."""
    fs = configuration.get("fairSharing")
    if fs is None:
        return False
    if str(configuration.get("apiVersion", "")).endswith("/v1beta1"):
        return isinstance(fs, Mapping) and fs.get("enable") is True
    return True


def strategies_of(configuration: Mapping[str, Any]) -> tuple[str, ...]:
    """`fairSharing.preemptionStrategies` as given; empty: Kueue's default, [LessThanOrEqualToFinalShare,
    LessThanInitialShare], which config v1beta1 fills in (apis/config/v1beta1/defaults.go; a v1beta2
    Configuration must list them, pkg/config/validation.go, or Kueue does not start)."""
    fs = configuration.get("fairSharing")
    given = fs.get("preemptionStrategies") if isinstance(fs, Mapping) else None
    return tuple(str(s) for s in given) if isinstance(given, list) and given else ()


@dataclass(frozen=True)
class FairSharingSetting:
    on: bool
    source: str  # "ConfigMap kueue-system/kueue-manager-config", "--kueue-fair-sharing=on", or why not read
    strategies: tuple[str, ...] = ()  # fairSharing.preemptionStrategies; empty: Kueue's default
    known: bool = True  # False: Kueue's Configuration could not be read (modelled off by default)

    def describe(self) -> str:
        shown = f" ({', '.join(self.strategies)})" if self.on and self.strategies else ""
        return f"fair sharing {'on' if self.on else 'off'}{shown} ({self.source})"

    def scheduler_config(self) -> SchedulerConfig:
        """What the controller's model of Kueue follows (the rest at Kueue's defaults)."""
        if not self.on:
            return SchedulerConfig()
        if not self.strategies:
            return SchedulerConfig(fair_sharing=True)
        return SchedulerConfig(fair_sharing=True, fair_sharing_strategies=self.strategies)


def setting_from(read: ReadConfiguration) -> FairSharingSetting:
    if read.configuration is None:
        return FairSharingSetting(False, f"{read.source}: modelled without fair sharing", known=False)
    on = fair_sharing_of(read.configuration)
    return FairSharingSetting(on, read.source, strategies_of(read.configuration) if on else ())


def read_configuration(config_map: Callable[[str, str], Mapping[str, Any] | None]) -> ReadConfiguration:
    """Kueue's Configuration through `config_map(namespace, name)` (queue_manager.kube.Reader.config_map);
    401 and 403 mean not readable (the shipped ClusterRole grants `get` on this ConfigMap by name)."""
    try:
        return configuration_of(config_map(NAMESPACE, CONFIGMAP))
    except ApiException as err:
        if err.status in (401, 403):
            return ReadConfiguration(None, f"no permission to get {WHERE} ({err.status} {err.reason})")
        raise


class KueueConfigFollower:
    """The fair-sharing setting the controller models, from the flag (`fixed`) or from Kueue's ConfigMap,
    read through `read` at most every `refresh` seconds of `clock`; a change or a new reason it cannot be
    read is logged once."""

    def __init__(self, fixed: bool | None, read: Callable[[], ReadConfiguration], *,
                 refresh: float = REFRESH_SECONDS) -> None:
        self._read = read
        self._refresh = refresh
        self._lock = threading.Lock()
        self._fixed = fixed is not None
        self._setting = (FairSharingSetting(fixed, f"--kueue-fair-sharing={'on' if fixed else 'off'}")
                         if fixed is not None
                         else FairSharingSetting(False, f"{WHERE} not read yet", known=False))
        self._read_at: float | None = None
        self._error: str | None = None  # why the last read failed, said once

    def setting(self, now: float) -> FairSharingSetting:
        if self._fixed:
            return self._setting
        with self._lock:
            if self._read_at is not None and now - self._read_at < self._refresh:
                return self._setting
            self._read_at = now
            try:
                new = setting_from(self._read())
            except Exception as err:  # the API server away: keep what was read last, say so once
                words = str(err).strip().splitlines()
                reason = f"cannot read {WHERE} ({type(err).__name__}{': ' + words[0][:200] if words else ''})"
                if self._error != reason:
                    self._error = reason
                    log.warning("Kueue's Configuration: %s; keeping %s", reason, self._setting.describe())
                return self._setting
            self._error = None
            if new != self._setting:
                if new.source == WHERE:
                    log.info("Kueue's Configuration: %s; the controller's model of Kueue follows it",
                             new.describe())
                else:
                    log.warning("Kueue's Configuration: %s; pass --kueue-fair-sharing=on or off to say how "
                                "Kueue runs", new.describe())
                self._setting = new
            return self._setting
