"""spec.ledger and spec.budgets[]: a valid budget loads typed; each mistake is one InputError naming the field
and the value (the same verdict the CRD's CEL rules give where CEL can say it)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.errors import InputError
from fairshare.policy import parse_policy

from .helpers import Doc, edited, sample


def _budget(**fields: Any) -> dict[str, Any]:
    budget: dict[str, Any] = {
        "name": "research-monthly",
        "selector": {"team": "ai-frontier-research"},
        "period": {"calendar": "Month", "timeZone": "Europe/Paris"},
        "limit": {"gpuHours": "2000"},
        "thresholds": [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "shrink"}],
    }
    budget.update(fields)
    return budget


def _with(*budgets: dict[str, Any], ledger: dict[str, Any] | None = None) -> Doc:
    def edit(doc: Doc) -> None:
        doc["spec"]["budgets"] = list(budgets)
        if ledger is not None:
            doc["spec"]["ledger"] = ledger
    return edited(sample(), edit)


def test_a_budget_and_the_ledger_settings_load_with_their_defaults() -> None:
    policy = parse_policy(_with(_budget(), _budget(name="recsys", selector={"project": "recsys"},
                                                   period={"rolling": "30d"}, limit={"cost": "5000"},
                                                   thresholds=[{"percent": 90, "action": "alert"}],
                                                   dryRun=True),
                                ledger={"labels": ["queuemanager.dev/user"]}))
    first, second = policy.spec.budgets
    assert (first.selector.team, first.period.calendar, first.period.time_zone, first.limit.gpu_hours,
            first.limit.resource, first.dry_run) == ("ai-frontier-research", "Month", "Europe/Paris", "2000",
                                                     "nvidia.com/gpu", False)
    assert [(t.percent, t.action) for t in first.thresholds] == [(80, "alert"), (100, "shrink")]
    assert (second.selector.project, second.period.rolling, second.period.time_zone, second.limit.cost,
            second.dry_run) == ("recsys", "30d", "UTC", "5000", True)
    assert (policy.spec.ledger.retention, policy.spec.ledger.labels) == ("180d", ["queuemanager.dev/user"])


def test_a_policy_without_budgets_keeps_180_days_and_no_extra_labels() -> None:
    policy = parse_policy(sample())
    assert (policy.spec.budgets, policy.spec.ledger.retention, policy.spec.ledger.labels) == ([], "180d", [])


BAD: list[tuple[str, Doc, str, str]] = [
    ("unknown team", _with(_budget(selector={"team": "nobody"})), "spec.budgets[0].selector.team",
     "not a team of spec.teams"),
    ("empty selector", _with(_budget(selector={})), "spec.budgets[0].selector",
     "a selector needs team, project or costCenter"),
    ("both periods", _with(_budget(period={"calendar": "Week", "rolling": "7d"})), "spec.budgets[0].period",
     "exactly one of calendar and rolling"),
    ("no period", _with(_budget(period={"timeZone": "UTC"})), "spec.budgets[0].period",
     "exactly one of calendar and rolling"),
    ("calendar day", _with(_budget(period={"calendar": "Day"})), "spec.budgets[0].period.calendar",
     "'Month' or 'Week'"),
    ("zero window", _with(_budget(period={"rolling": "0s"})), "spec.budgets[0].period.rolling",
     "at least 1m"),
    ("bad time zone", _with(_budget(period={"calendar": "Month", "timeZone": "Mars/Olympus"})),
     "spec.budgets[0].period.timeZone", "not an IANA time zone"),
    ("both limits", _with(_budget(limit={"gpuHours": "10", "cost": "10"})), "spec.budgets[0].limit",
     "exactly one of gpuHours and cost"),
    ("zero limit", _with(_budget(limit={"gpuHours": "0"})), "spec.budgets[0].limit", "must be positive"),
    ("negative limit", _with(_budget(limit={"cost": "-5"})), "spec.budgets[0].limit.cost",
     "non-negative Kubernetes quantity"),
    ("bad action", _with(_budget(thresholds=[{"percent": 80, "action": "kill"}])),
     "spec.budgets[0].thresholds[0].action", "'alert', 'shrink', 'deprioritize' or 'hold'"),
    ("zero percent", _with(_budget(thresholds=[{"percent": 0, "action": "alert"}])),
     "spec.budgets[0].thresholds[0].percent", "greater than or equal to 1"),
    ("repeated threshold", _with(_budget(thresholds=[{"percent": 80, "action": "alert"}] * 2)),
     "spec.budgets[0].thresholds[1]", "threshold listed twice"),
    ("enforcing without a team", _with(_budget(selector={"project": "recsys"})),
     "spec.budgets[0].thresholds[1].action", "give selector.team"),
    ("duplicate name", _with(_budget(), _budget()), "spec.budgets[1].name", "duplicate name"),
    ("bad label key", _with(ledger={"labels": ["not a key"]}), "spec.ledger.labels[0]",
     "must be a label key"),
    ("bad project value", _with(_budget(selector={"team": "ai-frontier-research", "project": "-x"})),
     "spec.budgets[0].selector.project", "must be a label value"),
    ("zero retention", _with(ledger={"retention": "0s"}), "spec.ledger.retention", "at least 1s"),
    ("unknown budget field", _with(_budget(limits={"gpuHours": "1"})), "spec.budgets[0].limits",
     "unknown field"),
]


@pytest.mark.parametrize(("doc", "field", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_budget_is_one_error_naming_its_field(doc: Doc, field: str, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_policy(doc)
    line = err.value.one_line()
    assert field in line and fragment in line, line


def test_a_cost_budget_needs_prices_and_deprioritize_needs_a_cohort() -> None:
    def unpriced(doc: Doc) -> None:
        doc["spec"]["flavors"][0].pop("pricePerUnitHour")
        doc["spec"]["budgets"] = [_budget(limit={"cost": "100"})]

    with pytest.raises(InputError, match=r"spec\.budgets\[0\]\.limit\.cost.*needs prices"):
        parse_policy(edited(sample(), unpriced))

    def no_cohort(doc: Doc) -> None:
        doc["spec"]["teams"][0].pop("cohort")
        doc["spec"]["budgets"] = [_budget(thresholds=[{"percent": 100, "action": "deprioritize"}])]

    with pytest.raises(InputError, match=r"spec\.budgets\[0\]\.thresholds\[0\]\.action.*has no cohort"):
        parse_policy(edited(sample(), no_cohort))
