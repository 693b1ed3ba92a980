"""`qm budget status POLICY.yaml` answers from the ledger (a SQLite file and a PostgreSQL database) with the
controller's own decision: each budget's consumption in its current period (calendar week in a time zone,
rolling window), the thresholds reached, what is enforced and what a dry run only reports; a period
boundary starts afresh; bad input is one line and exit code 2."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

from tests.integration.test_ledger_cli import run, seeded
from tests.unit.ledger.kueue_docs import HOUR, T0, ts

__all__ = ["seeded"]  # the fixture, used by name

GPU = "nvidia.com/gpu"
AT = ts(T0 + 4 * HOUR)  # Friday 2027-01-15 12:00 UTC: the research life has ended, serve just finished
MONDAY_PARIS = "2027-01-18T00:30:00+01:00"  # 30 minutes into the next ISO week in Europe/Paris


def _policy(tmp_path: Path) -> str:
    def team(name: str, flavor: str) -> dict[str, object]:
        return {"name": name, "namespaces": [name], "cohort": "org",
                "quotas": [{"flavor": flavor, "resources": [{"name": GPU, "nominal": 4}]}]}

    doc = {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "gpu"},
           "spec": {
               "flavors": [{"name": "a100", "pricePerUnitHour": {GPU: "2.5", "cpu": "0.05"}},
                           {"name": "l4", "pricePerUnitHour": {GPU: "1"}}],
               "teams": [team("research", "a100"), team("business", "l4")],
               "transitions": {"defaults": {"floor": {GPU: 1}}},
               "budgets": [
                   {"name": "research-week", "selector": {"team": "research"},
                    "period": {"calendar": "Week", "timeZone": "Europe/Paris"}, "limit": {"gpuHours": "6"},
                    "thresholds": [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "shrink"}]},
                   {"name": "research-money", "selector": {"team": "research"}, "dryRun": True,
                    "period": {"calendar": "Month"}, "limit": {"cost": "10"},
                    "thresholds": [{"percent": 100, "action": "shrink"}]},
                   {"name": "business-hour", "selector": {"team": "business"}, "period": {"rolling": "1h"},
                    "limit": {"gpuHours": "4"}, "thresholds": [{"percent": 50, "action": "hold"}]},
                   {"name": "recsys-money", "selector": {"project": "recsys"},
                    "period": {"calendar": "Month"}, "limit": {"cost": "16"},
                    "thresholds": [{"percent": 80, "action": "alert"}]},
               ]}}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_budget_status_gives_each_budget_in_its_period_with_the_thresholds_reached(
        seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "budget", "status", _policy(tmp_path), "--db", seeded, "--at", AT,
                         "-o", "json")
    assert (code, err) == (0, "")
    rows = {r.pop("budget"): r for r in json.loads(out)["rows"]}
    assert rows == {
        # 5 GPU-hours (4 useful, 1 lost) since Monday 00:00 in Paris (Sunday 23:00 UTC): 83% -> alert.
        "research-week": {
            "policy": "gpu", "team": "research", "period_start": "2027-01-10T23:00:00Z",
            "period_end": "2027-01-17T23:00:00Z", "used": "5.00", "limit": "6.00", "unit": "GPU-hours",
            "used_percent": "83.3", "reached": "80%:alert", "enforcing": "", "dry_run": "no",
            "measured_at": AT},
        # 13 in money over the limit of 10: the shrink is reported, not enforced (dry run).
        "research-money": {
            "policy": "gpu", "team": "research", "period_start": "2027-01-01T00:00:00Z",
            "period_end": "2027-02-01T00:00:00Z", "used": "13.00", "limit": "10.00", "unit": "USD",
            "used_percent": "130.0", "reached": "100%:shrink", "enforcing": "", "dry_run": "yes",
            "measured_at": AT},
        # The last hour holds 2 of serve's 8 GPU-hours: half the limit -> hold is in force.
        "business-hour": {
            "policy": "gpu", "team": "business", "period_start": ts(T0 + 3 * HOUR), "period_end": "",
            "used": "2.00", "limit": "4.00", "unit": "GPU-hours", "used_percent": "50.0",
            "reached": "50%:hold", "enforcing": "hold", "dry_run": "no", "measured_at": AT},
        # A label selector: the project's money whatever the team (serve on l4: 8 of 16).
        "recsys-money": {
            "policy": "gpu", "team": "", "period_start": "2027-01-01T00:00:00Z",
            "period_end": "2027-02-01T00:00:00Z", "used": "8.00", "limit": "16.00", "unit": "USD",
            "used_percent": "50.0", "reached": "", "enforcing": "", "dry_run": "no", "measured_at": AT},
    }


def test_a_new_calendar_period_starts_afresh_at_local_midnight(
        seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "budget", "status", _policy(tmp_path), "--db", seeded, "--at", MONDAY_PARIS,
                       "-o", "csv")
    assert code == 0
    week = next(r for r in csv.DictReader(io.StringIO(out)) if r["budget"] == "research-week")
    assert (week["period_start"], week["used"], week["reached"]) == ("2027-01-17T23:00:00Z", "0.00", "")


def test_the_table_names_each_budget(seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "budget", "status", _policy(tmp_path), "--db", seeded, "--at", AT)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("Budgets of ")
    assert [line.split()[2] for line in lines[3:]] == ["research-week", "research-money", "business-hour",
                                                       "recsys-money"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--at", "monday"], "qm budget: error: --at: not an RFC 3339 time: 'monday'"),
    (["--kubeconfig", "k"], "qm budget: error: POLICY.yaml excludes --kubeconfig, --context and --policy"),
], ids=["a bad time", "two sources"])
def test_bad_flags_are_one_line_and_exit_code_2(extra: list[str], message: str, seeded: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "budget", "status", _policy(tmp_path), "--db", seeded, *extra)
    assert (code, out, err) == (2, "", message + "\n")


def test_a_bad_policy_file_names_the_file_and_field(seeded: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(_policy(tmp_path))
    path.write_text(path.read_text().replace("gpuHours: '6'", "gpuHours: six"))
    code, out, err = run(capsys, "budget", "status", str(path), "--db", seeded)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert str(path) in err and "six" in err
