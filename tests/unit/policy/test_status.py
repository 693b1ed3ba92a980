"""The typed status reads what the previous operator wrote, without loss, and the controller continues
from it. `data/status-written-by-0.1.json` was recorded from the operator before the status was typed
(two of its reconciles: a transition half-way, an eviction in flight)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fairshare.policy.status import (
    EvictionKind,
    QuotaPolicyStatus,
    TransitionPhase,
    VictimState,
    read_status,
)

RECORDED = json.loads((Path(__file__).parent / "data" / "status-written-by-0.1.json").read_text())


def _dump(status: QuotaPolicyStatus) -> Any:
    return _meaning(status.model_dump(mode="json", by_alias=True, exclude_none=True))


def _meaning(doc: Any) -> Any:
    """A JSON value without what carries no information: nulls and empty lists (absent = unset)."""
    if isinstance(doc, dict):
        return {k: _meaning(v) for k, v in doc.items() if v is not None and v != []}
    if isinstance(doc, list):
        return [_meaning(v) for v in doc]
    return doc


def test_a_transition_written_by_the_previous_version_is_read_typed_and_written_back_unchanged() -> None:
    raw = RECORDED["transitions"]
    status, warnings = read_status(raw)
    t = status.transitions[0]
    assert (warnings, t.phase, t.last_applied_step, t.plan is not None, t.last_applied is not None) == \
        ([], TransitionPhase.RUNNING, 1, True, True)
    assert _dump(status) == _meaning(raw)


def test_an_eviction_written_by_the_previous_version_is_read_typed_and_written_back_unchanged() -> None:
    raw = RECORDED["preemption"]
    status, warnings = read_status(raw)
    r = status.last_preemptions[0]
    assert (warnings, r.state, r.eviction_kind, r.at) == ([], VictimState.REQUESTED, EvictionKind.EXPERIMENT,
                                                         1800000100.0)
    assert _dump(status) == _meaning(raw)


def test_an_entry_this_version_cannot_read_is_dropped_with_a_warning_and_the_rest_kept() -> None:
    raw = json.loads(json.dumps(RECORDED["preemption"]))
    raw["lastPreemptions"].append({"time": "2027-01-15T08:01:40Z", "victim": "r/x", "reason": "r",
                                   "state": "Teleported"})
    raw["futureField"] = {"x": 1}
    status, warnings = read_status(raw)
    assert [r.victim for r in status.last_preemptions] == ["r/e3"]
    assert warnings == ["status.lastPreemptions[1] dropped: Input should be 'Requested', 'Evicted', "
                        "'Reactivated', 'Requeued', 'Gone', 'Reported' or 'Reclaimed'"]
    assert _dump(status)["futureField"] == {"x": 1}


def test_two_equal_transition_records_each_carrying_the_controllers_reading_of_it_compare_equal() -> None:
    """The reading (`_parsed`, fairshare.control.transitions) refers back to its record; comparing two
    records compared their readings, which compared the records again, without end."""
    a, _ = read_status(RECORDED["transitions"])
    b, _ = read_status(RECORDED["transitions"])
    for status in (a, b):
        record = status.transitions[0]
        record._parsed = (record, "the controller's reading")  # (as transitions._Stored: a cycle)
    assert a.transitions[0] == b.transitions[0]
    assert a == b
    changed = b.transitions[0].model_copy(update={"last_applied_step": 2})
    assert a.transitions[0] != changed
