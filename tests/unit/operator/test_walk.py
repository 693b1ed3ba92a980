"""The operator's walk of a quota change: the reconcile that applies a transition's step takes one trip into
the core for its decision (`PolicyController.step`: follow the policy's history layout, observe, decide,
what is in force), as the simulator's shell does (`Controller.decide`); after it, the history's metrics
read the book once. Measured with a call trace of every call from `queue_manager` into `fairshare.control`
(before this design: 8 calls: relayout, sync, observe_evictions, recent, decide, desired_objects,
next_step, clamp). Traced in a pure-Python process, as the operator runs (its image has no compiled core;
a call into a compiled module is not seen by the trace)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _is_property(module: str, qualname: str) -> bool:
    owner, _, name = qualname.rpartition(".")
    obj: Any = importlib.import_module(module)
    for part in owner.split(".") if owner else ():
        obj = getattr(obj, part)
    return owner != "" and isinstance(vars(obj).get(name), property)


def walk() -> tuple[str, dict[str, int]]:
    """The quota the step applied, and the calls from the operator into the controller while applying it."""
    from tests.unit.operator.test_operator_reconcile import T0, FakeApi, _gpu_quota, _operator, _policy

    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))  # the transition starts
    clock[0] = T0 + 10
    body = _policy(1, 2, api.status)
    trips: Counter[str] = Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> None:
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        into, outof = frame.f_globals.get("__name__", ""), caller.f_globals.get("__name__", "")
        name = frame.f_code.co_name
        if into.startswith("fairshare.control") and outof.startswith("queue_manager") and \
                not name.startswith("_") and name != "progress" and \
                not _is_property(into, frame.f_code.co_qualname):  # (values read; an action's words)
            trips[f"{into}.{frame.f_code.co_qualname}"] += 1

    sys.setprofile(trace)
    try:
        op.reconcile_policy("p", body)
    finally:
        sys.setprofile(None)
    return _gpu_quota(api), dict(trips)


def test_a_quota_step_is_one_trip_into_the_controller() -> None:
    code = "import json; from tests.unit.operator.test_walk import walk; print(json.dumps(walk()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "QM_CORE": "python"})
    quota, trips = json.loads(proc.stdout.strip().splitlines()[-1])
    assert quota == "3"  # the step is applied
    assert trips == {
        "fairshare.control.cluster.PolicyController.step": 1,
        "fairshare.control.history.HistoryBook.clamp": 1,  # (the history's metrics, after the decision)
    }
