"""Usage by the person who submitted it (`qm usage --by user`), on a SQLite file and a PostgreSQL server: each
workload's hours go to the user stamped on it at admission (queuemanager.dev/user, docs/tenancy.md), and the
users of a team add up to what the daily rollup gives for the team."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from ledger.ledger import LedgerConfig, open_ledger
from ledger.queries import Dim, UsageQuery
from ledger.records import PriceTable, WorkloadObservation
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc

CONFIG = LedgerConfig(prices=PriceTable.of({"a100": {"nvidia.com/gpu": "2.5"}}),
                      retention_seconds=180 * 86400)
DAY = 86400
MS = 1000


def _life(name: str, user: str | None, start: float, hours: float) -> list[WorkloadObservation]:
    """A workload of 2 GPUs (Doc's two one-GPU pods) admitted at `start`, finished `hours` later."""
    labels = {"queuemanager.dev/user": user} if user is not None else {}
    created = Doc(name, labels=labels, created=start - 60)
    reserved = created.reserved(start)
    end = start + hours * HOUR
    return [created.seen(start - 59), reserved.seen(start + 1), reserved.finished(end).seen(end + 1)]


def test_usage_by_user_bills_each_workload_to_its_stamped_user_and_the_users_add_up_to_the_team(
        ledger_url: str, tmp_path: Path) -> None:
    # Three lives of team research over three whole UTC days (the team's report reads the daily rollup,
    # the user's report the segments): alice 2 h and 1 h, bob 3 h, one life with no stamp 1 h; 2 GPUs each.
    day0 = (int(T0) // DAY + 1) * DAY
    alice = "alice_at_example.com"
    lives = [*_life("a1", alice, day0 + HOUR, 2), *_life("a2", alice, day0 + DAY + HOUR, 1),
             *_life("b1", "bob", day0 + 2 * HOUR, 3), *_life("n1", None, day0 + 2 * DAY, 1)]
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool", config=CONFIG) as ledger:
        ledger.record_workloads(lives)
        assert ledger.flush(30)
        since, until = day0 * MS, (day0 + 3 * DAY) * MS
        by_user = ledger.usage(UsageQuery(since, until, until, (Dim.USER, Dim.RESOURCE)))
        by_team = ledger.usage(UsageQuery(since, until, until, (Dim.TEAM, Dim.RESOURCE)))
        hers = ledger.usage(UsageQuery(since, until, until, (Dim.TEAM,), (
            (Dim.USER, alice), (Dim.RESOURCE, "nvidia.com/gpu"))))
    gpu_hours = {r.key: r.useful_seconds / 3600 for r in by_user if r.key[1] == "nvidia.com/gpu"}
    assert gpu_hours == {("", "nvidia.com/gpu"): Decimal(2), (alice, "nvidia.com/gpu"): Decimal(6),
                         ("bob", "nvidia.com/gpu"): Decimal(6)}
    team = {r.key: r for r in by_team}[("research", "nvidia.com/gpu")]
    gpu = [r for r in by_user if r.key[1] == "nvidia.com/gpu"]
    assert team.useful_seconds == sum(r.useful_seconds for r in gpu)
    assert team.cost == sum(r.cost for r in gpu) == Decimal("35.000000000")
    assert [(r.key, r.useful_seconds / 3600) for r in hers] == [(("research",), 6)]
