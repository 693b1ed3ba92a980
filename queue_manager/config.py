"""Settings of one operator process (from `qm run` flags), immutable once started."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """What `qm run` was asked to do. Durations in seconds."""

    kubeconfig: str | None = None  # None: in-cluster service account, else KUBECONFIG/~/.kube/config
    context: str | None = None
    metrics_port: int = 9090  # 0 disables the Prometheus endpoint
    health_port: int = 8080  # /healthz; 0 disables it
    # Local runs listen on loopback only; the Deployment passes --bind-address=0.0.0.0 (the kubelet probes
    # the pod's IP and Prometheus scrapes it).
    bind_address: str = "127.0.0.1"
    dry_run: bool | None = None  # None: honour each policy's preemption.dryRun; True/False override it
    log_format: LogFormat = LogFormat.JSON
    log_level: str = "INFO"
    # Level-triggered reconcile period of every QuotaPolicy: transition steps fall due on
    # this grid, so it bounds how late a step can be applied (steps are schedule-driven,
    # not tick-driven: a slower tick never skips or duplicates a step).
    tick_seconds: float = 1.0
    # How often the usage history is written to each policy's status (and on shutdown).
    history_persist_seconds: float = 60.0
    # Overrides of the policy's spec.preemption.starvationGrace and victimHold (None: the policy's).
    starvation_grace_seconds: float | None = None
    victim_hold_seconds: float | None = None
    # Whether Kueue runs with fairSharing (default strategies): the controller's model of Kueue follows it
    # (its experiment planner and the what-if that checks weight pushes for preemption loops). None: read
    # from Kueue's Configuration, its ConfigMap (queue_manager/kueue_config.py); True/False: as said.
    kueue_fair_sharing: bool | None = None
    # Leader election on a coordination.k8s.io Lease (queue_manager/leader.py): only the holder reconciles.
    leader_elect: bool = True
    lease_namespace: str = "queue-manager"
    lease_name: str = "queue-manager"
    lease_duration_seconds: float = 15.0
    # The ledger (docs/ledger.md): on in `qm run` (--no-ledger: off); None URL: $QM_LEDGER_URL, else the
    # default SQLite file; None spool: next to the SQLite file / under the user's data directory.
    ledger_enabled: bool = False
    ledger_url: str | None = None
    ledger_spool: str | None = None
    budget_refresh_seconds: float = 30.0  # how often budget consumption is measured in the ledger
    # Idle GPUs (spec.idle): the Prometheus to read dcgm-exporter's series from (None: each policy's
    # spec.idle.prometheus.url).
    prometheus_url: str | None = None
