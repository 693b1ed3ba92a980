"""The score of a forecast from a real ledger (SQLite; the operator's path: observations recorded through
the spool, then read by qm/forecaster.py LedgerScorer): the window's waits and GPU-hours, worked out by hand
from the lives recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.ledger import open_ledger
from ledger.records import WorkloadObservation
from qm.forecaster import LedgerScorer, recorded_lives
from queue_manager.forecast import ScoreRequest
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc

START, END = T0, T0 + 10 * HOUR


def seen(doc: Doc, at: float, team: str) -> WorkloadObservation:
    return WorkloadObservation(doc.workload(), at, cluster_queue=team)


@pytest.fixture
def ledger_path(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    # research: a (1 GPU) waits 1 h, runs 2 h and finishes; b (2 GPUs) waits 3 h, runs, is evicted after 1 h
    # and not admitted again. business: c (1 GPU) is never admitted; d was submitted before the window and
    # runs through it (its GPU-hours inside the window count, its wait does not).
    a = Doc("a", "research", created=START, gpus_per_pod=1, pods=1)
    b = Doc("b", "research", created=START + HOUR, gpus_per_pod=2, pods=1)
    c = Doc("c", "business", created=START + 2 * HOUR, gpus_per_pod=1, pods=1, queue="business")
    d = Doc("d", "business", created=START - 5 * HOUR, gpus_per_pod=4, pods=1, queue="business")
    steps = [
        (d.reserved(START - 4 * HOUR, cluster_queue="business"), START - 4 * HOUR, "business"),
        (a, START, "research"),
        (a.reserved(START + HOUR, cluster_queue="research"), START + HOUR, "research"),
        (b, START + HOUR, "research"),
        (a.reserved(START + HOUR, cluster_queue="research").finished(START + 3 * HOUR), START + 3 * HOUR,
         "research"),
        (c, START + 2 * HOUR, "business"),
    ]
    b_in = b.reserved(START + 4 * HOUR, cluster_queue="research")
    b_out = b_in.evicted(START + 5 * HOUR)
    steps += [(b_in, START + 4 * HOUR, "research"), (b_out, START + 5 * HOUR, "research"),
              (b_out.released(START + 5 * HOUR), START + 5 * HOUR, "research")]
    with open_ledger(path) as ledger:
        ledger.record_workloads([seen(doc, at, team) for doc, at, team in steps])
        assert ledger.flush(30)
    return path


def test_the_ledger_scores_the_window_by_the_forecasts_definitions(ledger_path: str) -> None:
    metrics = ("wait_mean", "wait_p95[(none)]", "never_admitted", "gpu_hours[research]",
               "gpu_hours[business]", "lost_gpu_hours", "lost_gpu_hours[business]")
    got = LedgerScorer(ledger_path)(ScoreRequest("p", 2, START, END, metrics, "nvidia.com/gpu",
                                                 ("research", "business")))
    # Waits of a, b, c (d was submitted before the window): 1 h, 3 h, c censored at the end: 8 h.
    assert got["wait_mean"] == pytest.approx(4.0)
    assert got["wait_p95[(none)]"] == pytest.approx(3.0 + (8.0 - 3.0) * 0.9)
    assert got["never_admitted"] == pytest.approx(100 / 3)
    # a: 2 h x 1 GPU; b: 1 h x 2 GPUs (lost); d: 4 GPUs through the whole 10 h window.
    assert got["gpu_hours[research]"] == pytest.approx(4.0)
    assert got["gpu_hours[business]"] == pytest.approx(40.0)
    assert got["lost_gpu_hours"] == pytest.approx(2.0)
    assert got["lost_gpu_hours[business]"] == 0.0


def test_the_lives_read_for_calibration_carry_their_shape_and_run_times(ledger_path: str) -> None:
    with open_ledger(ledger_path, read_only=True) as ledger:
        lives = ledger.lives(since=START - 6 * HOUR, until=END)
    got = {(r.local_queue, r.count, dict(r.requests)["nvidia.com/gpu"], r.started, r.ended, r.running)
           for r in recorded_lives(lives, until=END)}
    assert got == {
        ("research/research", 1, 1000, START + HOUR, START + 3 * HOUR, False),  # a: finished
        ("research/research", 1, 2000, START + 4 * HOUR, None, False),  # b: evicted, pending again
        ("business/business", 1, 1000, None, None, False),  # c: never ran
        ("business/business", 1, 4000, START - 4 * HOUR, None, True),  # d: still running (censored)
    }
