"""Which Kueue Configuration the controller's model follows (queue_manager/kueue_config.py): fair sharing as
Kueue reads it from its ConfigMap, re-read every minute, or as `--kueue-fair-sharing` says."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from fairshare.scheduler import SchedulerConfig
from queue_manager.kueue_config import (
    REFRESH_SECONDS,
    WHERE,
    FairSharingSetting,
    KueueConfigFollower,
    ReadConfiguration,
    configuration_of,
    read_configuration,
    setting_from,
)

V1BETA2 = "config.kueue.x-k8s.io/v1beta2"
V1BETA1 = "config.kueue.x-k8s.io/v1beta1"


def _configmap(configuration: object) -> dict[str, Any]:
    text = configuration if isinstance(configuration, str) else yaml.safe_dump(configuration)
    return {"metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": text}}


@pytest.mark.parametrize(
    ("configmap", "expected"),
    [
        pytest.param(_configmap({"apiVersion": V1BETA2, "kind": "Configuration", "fairSharing": {}}),
                     FairSharingSetting(True, WHERE), id="v1beta2 with fairSharing is on"),
        pytest.param(_configmap({"apiVersion": V1BETA2, "kind": "Configuration",
                                 "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}),
                     FairSharingSetting(True, WHERE, ("LessThanInitialShare",)),
                     id="v1beta2 with its strategies is on with them"),
        pytest.param(_configmap({"apiVersion": V1BETA2, "kind": "Configuration"}),
                     FairSharingSetting(False, WHERE), id="v1beta2 without fairSharing is off"),
        pytest.param(_configmap({"apiVersion": V1BETA1, "kind": "Configuration",
                                 "fairSharing": {"enable": True}}),
                     FairSharingSetting(True, WHERE), id="v1beta1 enabled is on"),
        pytest.param(_configmap({"apiVersion": V1BETA1, "kind": "Configuration",
                                 "fairSharing": {"enable": False}}),
                     FairSharingSetting(False, WHERE),
                     id="v1beta1 with enable false is off, as Kueue's conversion drops it"),
        pytest.param(None,
                     FairSharingSetting(False, f"no {WHERE}: modelled without fair sharing", known=False),
                     id="no ConfigMap is off and says so"),
        pytest.param(_configmap("- a list"),
                     FairSharingSetting(False, f"{WHERE}: controller_manager_config.yaml is not a YAML "
                                        "mapping: modelled without fair sharing", known=False),
                     id="a Configuration that is not a mapping is off and says so"),
        pytest.param({"data": {}},
                     FairSharingSetting(False, f"{WHERE} has no controller_manager_config.yaml: modelled "
                                        "without fair sharing", known=False),
                     id="a ConfigMap without Kueue's key is off and says so"),
    ],
)
def test_the_setting_is_kueues_switch(configmap: dict[str, Any] | None, expected: FairSharingSetting) -> None:
    assert setting_from(configuration_of(configmap)) == expected


@pytest.mark.parametrize(
    ("setting", "config"),
    [
        pytest.param(FairSharingSetting(False, WHERE), SchedulerConfig(), id="off"),
        pytest.param(FairSharingSetting(True, WHERE), SchedulerConfig(fair_sharing=True),
                     id="on with Kueue's default strategies"),
        pytest.param(FairSharingSetting(True, WHERE, ("LessThanInitialShare",)),
                     SchedulerConfig(fair_sharing=True, fair_sharing_strategies=("LessThanInitialShare",)),
                     id="on with the strategies Kueue runs"),
    ],
)
def test_the_model_follows_the_setting(setting: FairSharingSetting, config: SchedulerConfig) -> None:
    assert setting.scheduler_config() == config


def test_no_permission_is_not_readable_and_says_the_status() -> None:
    def forbidden(namespace: str, name: str) -> dict[str, Any] | None:
        raise ApiException(status=403, reason="Forbidden")

    assert read_configuration(forbidden) == ReadConfiguration(
        None, f"no permission to get {WHERE} (403 Forbidden)")


class _Kueue:
    """Kueue's ConfigMap as the API server serves it, with a count of reads."""

    def __init__(self) -> None:
        self.configuration: object = {"apiVersion": V1BETA2, "kind": "Configuration"}
        self.reads = 0
        self.down = False

    def read(self) -> ReadConfiguration:
        self.reads += 1
        if self.down:
            raise ConnectionRefusedError("connection refused")
        return configuration_of(_configmap(self.configuration))


def test_the_follower_reads_every_minute_and_says_each_change_once(caplog: pytest.LogCaptureFixture) -> None:
    kueue = _Kueue()
    follower = KueueConfigFollower(None, kueue.read)
    caplog.set_level(logging.INFO, "queue_manager")
    assert follower.setting(0.0) == FairSharingSetting(False, WHERE)
    kueue.configuration = {"apiVersion": V1BETA2, "kind": "Configuration", "fairSharing": {}}
    assert follower.setting(REFRESH_SECONDS - 1).on is False  # not read again within the minute
    assert follower.setting(REFRESH_SECONDS).on is True
    kueue.down = True
    assert follower.setting(2 * REFRESH_SECONDS).on is True  # the API server away: the last read stands
    assert follower.setting(3 * REFRESH_SECONDS).on is True
    assert kueue.reads == 4
    assert [r.getMessage() for r in caplog.records] == [
        f"Kueue's Configuration: fair sharing off ({WHERE}); the controller's model of Kueue follows it",
        f"Kueue's Configuration: fair sharing on ({WHERE}); the controller's model of Kueue follows it",
        f"Kueue's Configuration: cannot read {WHERE} (ConnectionRefusedError: connection refused); keeping "
        f"fair sharing on ({WHERE})",
    ]


@pytest.mark.parametrize("said", [True, False], ids=["on", "off"])
def test_the_flag_is_followed_without_reading(said: bool) -> None:
    kueue = _Kueue()
    follower = KueueConfigFollower(said, kueue.read)
    assert (follower.setting(0.0), kueue.reads) == (
        FairSharingSetting(said, f"--kueue-fair-sharing={'on' if said else 'off'}"), 0)
