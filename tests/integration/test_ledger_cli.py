"""`qm usage`, `qm cost` and `qm audit` answer from the ledger (a SQLite file and a PostgreSQL database):
table, csv and json output, and one-line errors with exit code 2."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ledger.activity import MINUTE_MS, ActivityRecord
from ledger.ledger import LedgerConfig, open_ledger
from ledger.records import AuditEntry, PriceTable
from qm.cli import main
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc, ts
from tests.unit.ledger.test_accounting import EVICTED_LIFE

UNTIL = ts(T0 + 86400)
WINDOW = ["--since", "2d", "--until", UNTIL]


@pytest.fixture
def seeded(ledger_url: str, tmp_path: Path) -> str:
    serve = Doc("serve", "biz", labels={"project": "recsys", "cost-center": "cc-1"}, queue="biz")
    serve_run = serve.reserved(T0, cluster_queue="business", flavor="l4")
    config = LedgerConfig(prices=PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.05"},
                                                "l4": {"nvidia.com/gpu": "1"}}))
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool", config=config) as ledger:
        ledger.record_workloads([*EVICTED_LIFE, serve.seen(T0), serve_run.seen(T0 + 1),
                                 serve_run.finished(T0 + 4 * HOUR).seen(T0 + 4 * HOUR)])
        ledger.record_audit([
            AuditEntry(at=T0 + 10, action="preempt", target_kind="Workload", target_name="train",
                       target_namespace="research", what="evicted train", why="business starved",
                       policy="gpu", policy_generation=3, editor="alice", team="research"),
            AuditEntry(at=T0 + 20, action="transition-step", target_kind="ClusterQueue",
                       target_name="business", what="nominal 8 -> 6", why="shrink", policy="gpu",
                       policy_generation=3),
        ])
        # What serve's 2 GPUs did (spec.idle's telemetry): measured its first 2 hours, 25% active (a minute
        # is 2 x 60 s measured, 30 s active). Research has no telemetry.
        start = int(T0 * 1000)
        parts = tuple((start + i * MINUTE_MS, start + (i + 1) * MINUTE_MS, 120_000, 30_000)
                      for i in range(120))
        ledger.record_activity([ActivityRecord("uid-biz-serve", "nvidia.com/gpu", parts)])
        ledger.record_activity([ActivityRecord("uid-biz-serve", "nvidia.com/gpu", parts[:60])])  # again
        assert ledger.flush(30)
    return ledger_url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own flag errors exit from parse_args
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_usage_as_csv_gives_resource_hours_per_team_project_and_resource(
        seeded: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "usage", "--db", seeded, *WINDOW, "--by", "team,project", "-o", "csv")
    assert (code, err) == (0, "")
    # The GPUs' telemetry: 4 of business's 8 GPU-hours measured, 1 active, 3 idle (a repeated reading adds
    # nothing); research has none (empty, not 0).
    assert list(csv.reader(io.StringIO(out))) == [
        ["team", "project", "resource", "unit", "held_h", "useful_h", "lost_h", "running_h", "measured_h",
         "active_h", "idle_h"],
        ["business", "recsys", "cpu", "core-h", "16.000000", "16.000000", "0.000000", "0.000000", "", "", ""],
        ["business", "recsys", "nvidia.com/gpu", "GPU-h", "8.000000", "8.000000", "0.000000", "0.000000",
         "4.000000", "1.000000", "3.000000"],
        ["research", "", "cpu", "core-h", "10.000000", "8.000000", "2.000000", "0.000000", "", "", ""],
        ["research", "", "nvidia.com/gpu", "GPU-h", "5.000000", "4.000000", "1.000000", "0.000000", "", "",
         ""],
    ]


def test_cost_as_json_gives_money_per_team_and_flavor(seeded: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cost", "--db", seeded, *WINDOW, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["since"], doc["until"]) == (ts(T0 - 86400), UNTIL)
    assert doc["rows"] == [
        # 3 idle GPU-hours at l4's 1 per GPU-hour: 3 of business's 8 paid for idle GPUs.
        {"team": "business", "flavor": "l4", "currency": "USD", "cost": "8.000000", "useful": "8.000000",
         "lost": "0.000000", "running": "0.000000", "idle": "3.000000"},
        {"team": "research", "flavor": "a100", "currency": "USD", "cost": "13.000000", "useful": "10.400000",
         "lost": "2.600000", "running": "0.000000", "idle": ""},
    ]


def test_usage_as_a_table_has_a_header_and_two_decimals(seeded: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "usage", "--db", seeded, *WINDOW, "--where", "resource=nvidia.com/gpu")
    lines = [line.rstrip() for line in out.splitlines()]
    assert code == 0
    assert lines[0] == f"Usage {ts(T0 - 86400)} .. {UNTIL}"
    assert lines[1].split() == ["team", "┃", "resource", "┃", "unit", "┃", "held_h", "┃", "useful_h", "┃",
                                "lost_h", "┃", "running_h", "┃", "measured_h", "┃", "active_h", "┃", "idle_h"]
    assert [line.split() for line in lines[3:]] == [
        ["business", "│", "nvidia.com/gpu", "│", "GPU-h", "│", "8.00", "│", "8.00", "│", "0.00", "│", "0.00",
         "│", "4.00", "│", "1.00", "│", "3.00"],
        ["research", "│", "nvidia.com/gpu", "│", "GPU-h", "│", "5.00", "│", "4.00", "│", "1.00", "│", "0.00",
         "│", "│", "│"],
    ]


def test_the_audit_trail_is_filtered_by_team_and_action(seeded: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "--db", seeded, *WINDOW, "--team", "research", "--action", "preempt",
                       "-o", "csv")
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["time", "action", "target", "what", "why", "policy", "generation", "editor", "team", "local_queue",
         "project", "user"],
        [ts(T0 + 10), "preempt", "Workload research/train", "evicted train", "business starved", "gpu", "3",
         "alice", "research", "", "", ""],
    ]
    code, out, _ = run(capsys, "audit", "--db", seeded, *WINDOW, "--team", "business", "-o", "json")
    assert [r["what"] for r in json.loads(out)["rows"]] == ["nominal 8 -> 6"]


def test_the_database_url_comes_from_qm_ledger_url_when_db_is_not_given(
        seeded: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QM_LEDGER_URL", seeded)
    code, out, _ = run(capsys, "cost", *WINDOW, "--by", "project", "-o", "csv")
    assert code == 0 and out.splitlines()[1:] == [",a100,USD,13.000000,10.400000,2.600000,0.000000,",
                                                  "recsys,l4,USD,8.000000,8.000000,0.000000,0.000000,3.000000"]


@pytest.mark.parametrize(("argv", "message"), [
    (["usage", "--since", "3 days"], "qm usage: error: --since: must be a duration such as"),
    (["usage", "--until", "tomorrow"], "qm usage: error: --until: not an RFC 3339 time: 'tomorrow'"),
    (["usage", "--by", "team,colour"], "qm usage: error: --by: unknown dimension 'colour'"),
    (["cost", "--where", "team"], "qm cost: error: --where: expected DIM=VALUE (got 'team')"),
    (["usage", "-o", "xml"], "qm usage: error: argument -o/--output: invalid choice: 'xml'"),
    (["audit", "--limit", "0"], "qm audit: error: --limit: must be a positive integer (got 0)"),
], ids=["a bad duration", "a bad time", "an unknown dimension", "a filter without a value", "a bad format",
        "a bad limit"])
def test_a_bad_flag_is_one_line_and_exit_code_2(argv: list[str], message: str, seeded: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *argv, "--db", seeded)
    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(("db", "message"), [
    ("/nonexistent/ledger.db", "no ledger database at /nonexistent/ledger.db"),
    ("mysql://u:secret@db/x", "unsupported database URL 'mysql://u:***@db/x'"),
    ("postgresql+psycopg://u:secret@127.0.0.1:1/x", "cannot use the ledger database "
                                                    "postgresql+psycopg://u:***@127.0.0.1:1/x: "),
], ids=["a missing SQLite file", "another database", "a server that does not answer"])
def test_a_bad_database_is_one_line_and_exit_code_2(db: str, message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "usage", "--db", db)
    assert (code, out) == (2, "")
    assert err.startswith(f"qm usage: error: {message}") and err.count("\n") == 1 and "secret" not in err
