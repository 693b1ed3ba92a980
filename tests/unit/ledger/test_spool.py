"""The spool: records survive a restart of the process until committed, in order; damaged lines are set
aside, a torn last line is dropped; one process per directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.codec import CodecError, decode, encode
from ledger.errors import LedgerError
from ledger.facts import facts_of
from ledger.records import AuditEntry, LabelKeys, PriceTable, QuotaChange
from ledger.spool import Spool

from .kueue_docs import T0, Doc


def audit(i: int) -> AuditEntry:
    return AuditEntry(at=T0 + i, action="apply", target_kind="ClusterQueue", target_name=f"cq-{i}",
                      what=f"change {i}", why="policy", policy="p", policy_generation=i)


def test_every_kind_of_record_reads_back_as_it_was_written() -> None:
    facts = facts_of(Doc(labels={"project": "p"}).reserved(T0).evicted(T0 + 5).seen(T0 + 6, deleted=True),
                     PriceTable.of({"a100": {"nvidia.com/gpu": "2.5"}}), LabelKeys())
    quota = QuotaChange("research", "a100", "nvidia.com/gpu", 4000, None, 0, T0, "p", 7)
    for item in (facts, quota, audit(1)):
        assert decode(json.loads(json.dumps(encode(item)))) == item


@pytest.mark.parametrize(("raw", "message"), [
    ({"v": 3, "type": "audit"}, "format 3"),
    ({"v": 1, "type": "bill"}, "unknown spool record type"),
    ({"v": 1, "type": "quota", "team": "t", "flavor": "f", "resource": "r", "nominal": "4", "at": 1.0},
     "field 'nominal' must be int"),
    ([1, 2], "must be a JSON object"),
])
def test_a_record_of_another_shape_is_refused_with_the_reason(raw: object, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode(raw)


def test_records_not_committed_are_read_again_in_order_after_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([audit(1), audit(2)])
    spool.append([audit(3)])
    items, token = spool.peek(2)
    assert items == [audit(1), audit(2)] and token is not None
    spool.commit(token)
    spool.close()
    again = Spool(tmp_path)
    assert again.peek(10)[0] == [audit(3)]
    again.append([audit(4)])
    items, token = again.peek(10)
    assert items == [audit(3), audit(4)] and token is not None
    again.commit(token)
    assert again.pending() == 0
    again.close()
    assert Spool(tmp_path).pending() == 0
    assert not list(tmp_path.glob("spool-*.jsonl"))


def test_a_torn_last_line_is_dropped_and_a_damaged_line_is_set_aside(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([audit(1), audit(2), audit(3)])
    spool.close()
    [journal] = tmp_path.glob("spool-*.jsonl")
    lines = journal.read_bytes().splitlines(keepends=True)
    damaged = b'{"v": 1, "type": "audit", "at": "not a time"}\n'
    journal.write_bytes(lines[0] + damaged + lines[2] + lines[1][:20])
    again = Spool(tmp_path)
    assert again.peek(10)[0] == [audit(1), audit(3)]
    rejected = [json.loads(x) for x in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1 and "field 'at' must be" in rejected[0]["why"]
    again.close()


def test_a_spool_directory_belongs_to_one_process_at_a_time(tmp_path: Path) -> None:
    first = Spool(tmp_path)
    with pytest.raises(LedgerError, match="in use by another process"):
        Spool(tmp_path)
    first.close()
    Spool(tmp_path).close()
