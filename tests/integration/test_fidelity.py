"""The CI slice of the trace-fidelity harness (tests/fidelity/README.md): the first 40 jobs of the ITP slice
on the real control plane, with the operator applying the policy and its edit, against the simulator on the
same inputs.

On a slice this small the cluster's latencies are a large share of a wait of a few seconds (about 0.25 s from
an event to the admission Kueue makes of it, about 1 s for a victim to release its quota, against a mean wait
of 8 s), so the waits are compared with the simulator given the cluster's admission latency too (harness
`SimInputs.with_latency`, measured in the same run) as well as the victims' mean release time (the
simulator's scheduler.evictionRelease); what it does not model is how each release differs from the mean,
and the bound allows for exactly that. The checks:

- every job is admitted and finishes on both sides, and the operator's transition applies the simulator's
  quota steps in the same order;
- order agreement of at least 95% over the pairs the cluster admitted at least 1 s apart (closer pairs are
  written asynchronously by Kueue; one discordant pair of the ~30 is the cluster's timing: 6 runs measured 0
  to 1);
- evictions: both sides evict, and as many within 3 (measured: real 5 to 7, simulated 7);
- the mean wait, real against the simulator given the latency: within 2% plus, for each real eviction, the
  spread of the release times (their standard deviation) over the jobs, times the queue it delays (1 + mean
  wait / mean hold).

The checks' own power: the same checks run against wrong models on the same real run (no edit, no reclaim,
no hold overhead, twice the hold overhead, arrival order for ties instead of Kueue's creation time and UID),
and each must be refused. Not told apart on this slice, so not claimed: StrictFIFO for BestEffortFIFO (its
jobs are mostly of 1 GPU: little head-of-line blocking to see; the differential covers queueing strategies).
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.fidelity.compare import Figures, figures
from tests.fidelity.harness import NODES, Outcome, SimInputs, run
from tests.fidelity.sim import SimulatedRun
from tests.fidelity.workload import SMALL, load, policy
from tests.integration.controlplanes import POOL, binaries_or_skip, keep_logs

JOBS = 40


@pytest.fixture(scope="module")
def fidelity_plane() -> Iterator[ControlPlane]:
    """A control plane with one large KWOK node (the harness's), in place of the pool's extra one (at most one
    extra at a time on a 2-core machine)."""
    binaries = binaries_or_skip()
    POOL.stop_extra()
    cp = ControlPlane(None, binaries, node_groups=NODES, keep_logs=keep_logs())
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


def refusals(outcome: Outcome, sim: SimulatedRun) -> list[str]:
    """What the checks refuse in `sim` against the real run (empty: it passes)."""
    jobs, real = load(outcome.jobs), outcome.real
    f: Figures = figures(jobs, real.jobs, real.order, sim.jobs, sim.order)
    out = []
    if not real.finished or f.one_sided or any(life.finished is None for life in sim.jobs.values()):
        out.append(f"not every job admitted and finished on both sides ({f.one_sided} on one side only)")
    steps = [what for t, what in sorted(sim.steps) if t <= real.ended]
    if not outcome.real_steps() or outcome.real_steps() != steps:
        out.append(f"quota steps: real {outcome.real_steps()}, simulated {steps}")
    if f.spaced_agreement < 95.0:
        out.append(f"order agreement over pairs 1 s apart {f.spaced_agreement:.1f}% < 95%")
    if (f.evictions_real > 0) != (f.evictions_sim > 0) or abs(f.evictions_real - f.evictions_sim) > 3:
        out.append(f"evictions real {f.evictions_real}, simulated {f.evictions_sim}")
    delays = real.eviction_delays
    spread = statistics.pstdev(delays) if len(delays) > 1 else 0.0
    hold = statistics.fmean(j.seconds for j in jobs) + outcome.inputs.overhead
    queue = 1 + f.mean_wait_real / hold
    bound = 0.02 * f.mean_wait_real + f.evictions_real * spread / len(jobs) * queue
    if abs(f.mean_wait_real - f.mean_wait_sim) > bound:
        out.append(f"mean wait real {f.mean_wait_real:.2f}s, simulated {f.mean_wait_sim:.2f}s: "
                   f"|difference| > {bound:.2f}s")
    return out


def _policy(outcome: Outcome, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(policy(outcome.inputs.tag, outcome.quotas))
    for team in body["spec"]["teams"]:
        change(team)
    return body


def _never_reclaim(team: dict[str, Any]) -> None:
    team["preemption"]["reclaimWithinCohort"] = "Never"


def wrong_models(outcome: Outcome) -> dict[str, Callable[[], SimulatedRun]]:
    given = outcome.inputs.with_latency(outcome.latency)

    def other(**changes: Any) -> SimInputs:
        return dataclasses.replace(given, **changes)

    return {
        "the edit ignored": lambda: given.simulate(with_edit=False),
        "no reclaim within the cohort": lambda: given.simulate(body=_policy(outcome, _never_reclaim)),
        "no hold overhead": lambda: other(overhead=outcome.latency).simulate(),
        "twice the hold overhead":
            lambda: other(overhead=given.overhead + outcome.inputs.overhead).simulate(),
        "arrival order for ties (no creation second, no UID)": lambda: other(uids={}, created={}).simulate(),
    }


def test_the_simulator_replays_a_trace_slice_as_the_real_cluster_ran_it(
    fidelity_plane: ControlPlane, tmp_path: Path
) -> None:
    outcome = run(fidelity_plane, JOBS, tmp_path, quotas=SMALL)
    print("\n" + outcome.figures.line())
    print("\n".join(outcome.report()))
    right = outcome.inputs.with_latency(outcome.latency).simulate()
    assert refusals(outcome, right) == []
    passed = [name for name, wrong in wrong_models(outcome).items() if not refusals(outcome, wrong())]
    assert passed == [], f"the checks cannot tell these wrong models from the right one: {passed}"
