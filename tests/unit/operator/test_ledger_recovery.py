"""A new leader re-records what an earlier one reported: every Event of a fact carries the fact's ledger rows
(its audit row and the quota changes it put in force), and `LedgerFeed.recover` records them again with
their original times. Recording twice is one row; a later look at a quota already recovered adds none.
(The whole sequence on a real cluster with a real PostgreSQL: tests/integration/test_ledger_failover.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairshare.control import AuditAction
from fairshare.models import QuotaKey, ResourceQuota
from ledger.ledger import open_ledger
from ledger.queries import AuditQuery
from queue_manager.audit import AuditRecord
from queue_manager.cache import State
from queue_manager.events import LEDGER_ANNOTATION
from queue_manager.ledger_feed import LedgerFeed
from queue_manager.metrics import Metrics
from queue_manager.refs import ObjectRef

T0 = 1_800_000_000.0
GPU = "nvidia.com/gpu"


@pytest.fixture
def feeds(tmp_path: Path) -> Iterator[tuple[LedgerFeed, LedgerFeed, list[float]]]:
    """Two replicas' feeds on one database, each with its own spool (the Deployment's emptyDirs)."""
    clock = [T0]
    url = str(tmp_path / "ledger.db")
    made = [LedgerFeed(open_ledger(url, spool_dir=tmp_path / f"spool-{i}", clock=lambda: clock[0]), State(),
                       Metrics(), lambda: clock[0]) for i in (1, 2)]
    try:
        yield made[0], made[1], clock
    finally:
        for feed in made:
            feed.close()


def _event(name: str, rows: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "annotations": {LEDGER_ANNOTATION: rows}}}


def test_the_rows_an_event_carries_come_back_with_their_original_times_once(
        feeds: tuple[LedgerFeed, LedgerFeed, list[float]]) -> None:
    old, new, clock = feeds
    step = AuditRecord(AuditAction.TRANSITION_STEP, ObjectRef("ClusterQueue", "research"),
                       "nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3)", "due", "p", 2)
    stranded = AuditRecord(AuditAction.CAPACITY_STRANDED, ObjectRef("QuotaPolicy", "p"), "1 GPU to nobody",
                           "a cut", "p", 2)
    entries = [old.audit_entry(step, editor="kubectl-patch", team="research", fact="research.qmabc"),
               old.audit_entry(stranded, editor="kubectl-patch", team=None)]
    quotas = old.quota_changes("p", 2, {QuotaKey.of("research", "gpu", GPU): ResourceQuota(3000)}, T0 - 1)
    events = [_event("research.qmabc", old.annotation([entries[0], *quotas])),
              _event("p.x1", old.annotation([entries[1]])),
              {"metadata": {"name": "p.x2", "namespace": "default"}}]  # an Event without rows: only its name
    # The old leader's spool is lost: nothing of it reached the database. The new leader, 10 s later:
    clock[0] = T0 + 10
    assert new.recover(events) == ["research.qmabc", "p.x1", "p.x2"]
    new.recover(events)  # twice: nothing doubles
    # Its first look at the quota in force adds no row (the ledger has it from T0 - 1 on).
    new.quotas("p", 2, {QuotaKey.of("research", "gpu", GPU): ResourceQuota(3000)}, T0 + 10)
    assert new.ledger.flush(10)
    rows = new.ledger.audit(AuditQuery(0, int((T0 + 3600) * 1000)))
    assert sorted((r.at, r.action, r.team, r.editor, r.what) for r in rows) == [
        (T0, "capacity-stranded", None, "kubectl-patch", "1 GPU to nobody"),
        (T0, "transition-step", "research", "kubectl-patch",
         "nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3)")]
    history = new.ledger.quotas(since=T0 - 60, until=T0 + 60)
    assert [(q.team, q.resource, q.nominal, q.since_ms) for q in history] == [
        ("research", GPU, 3000, (T0 - 1) * 1000)]


def test_records_another_version_wrote_are_skipped_and_the_rest_recovered(
        feeds: tuple[LedgerFeed, LedgerFeed, list[float]]) -> None:
    old, new, _ = feeds
    entry = old.audit_entry(AuditRecord(AuditAction.PRUNE, ObjectRef("Cohort", "org"), "deleted Cohort org",
                                        "no longer implied by the policy", "p", 3), editor=None, team=None)
    events = [_event("a", json.dumps([{"v": 99, "type": "audit"}])), _event("b", "not json"),
              _event("c", old.annotation([entry]))]
    assert new.recover(events) == ["a", "b", "c"]
    assert new.ledger.flush(10)
    assert [r.action for r in new.ledger.audit(AuditQuery(0, int((T0 + 60) * 1000)))] == ["prune"]
