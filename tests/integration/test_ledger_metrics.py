"""The Prometheus counters count ended attempts once (a replay adds nothing), on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from ledger.ledger import LedgerConfig, open_ledger
from ledger.metrics import LedgerMetrics
from ledger.records import PriceTable
from tests.unit.ledger.test_accounting import EVICTED_LIFE


def test_resource_hours_and_cost_counters_count_each_ended_attempt_once(
        ledger_url: str, tmp_path: Path) -> None:
    registry = CollectorRegistry()
    config = LedgerConfig(prices=PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.05"}}))
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool", config=config,
                     metrics=LedgerMetrics(registry)) as ledger:
        ledger.record_workloads(EVICTED_LIFE)
        assert ledger.flush(30)
        ledger.record_workloads(EVICTED_LIFE)  # a replayed watch
        assert ledger.flush(30)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    gpu = {"team": "research", "project": "", "flavor": "a100", "resource": "nvidia.com/gpu",
           "unit": "GPU-hours"}
    assert value("qm_resource_hours_total", **gpu, kind="useful") == pytest.approx(4.0)
    assert value("qm_resource_hours_total", **gpu, kind="lost") == pytest.approx(1.0)
    cost = {"team": "research", "project": "", "flavor": "a100", "currency": "USD"}
    assert value("qm_cost_total", **cost) == pytest.approx(13.0)
