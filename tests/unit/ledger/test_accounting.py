"""The accounting rules (pure): a workload's observed life becomes useful and lost resource-hours and money.

Each case is a life as the operator observes it (Kueue's conditions changed the way Kueue changes them,
tests/unit/ledger/kueue_docs.py), and the whole result: GPU-hours useful and lost, cost, and the
transitions recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairshare.models import FlavorResource
from ledger.accounting import advance
from ledger.facts import facts_of
from ledger.life import MILLI_MS_PER_UNIT_HOUR, UNKNOWN_FLAVOR, LifeState, Phase, Transition
from ledger.records import LabelKeys, PriceTable, WorkloadObservation

from .kueue_docs import HOUR, T0, Doc

PRICES = PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.05"}})
GPU = FlavorResource("a100", "nvidia.com/gpu")


def play(observations: list[WorkloadObservation], *, cutoff: float = 0.0,
         prices: PriceTable = PRICES) -> tuple[LifeState | None, list[Transition]]:
    state: LifeState | None = None
    transitions: list[Transition] = []
    for obs in observations:
        step = advance(state, facts_of(obs, prices, LabelKeys()), cutoff_ms=round(cutoff * 1000))
        if step is None:
            continue
        state = step.state
        transitions.extend(step.transitions)
    return state, transitions


def gpu_hours(state: LifeState, flavor: str = "a100") -> tuple[Decimal, Decimal]:
    tot = dict(state.totals)[FlavorResource(flavor, "nvidia.com/gpu")]
    return Decimal(tot.useful) / MILLI_MS_PER_UNIT_HOUR, Decimal(tot.lost) / MILLI_MS_PER_UNIT_HOUR


def cost(state: LifeState) -> tuple[Decimal, Decimal]:
    return (sum((t.cost_useful for _, t in state.totals), Decimal(0)),
            sum((t.cost_lost for _, t in state.totals), Decimal(0)))


def kinds(transitions: list[Transition]) -> list[tuple[str, str, str]]:
    return [(str(t.kind), t.reason, str(t.source)) for t in transitions]


# --- one life, observed -----------------------------------------------------------------------------------

d0 = Doc()
r1 = d0.reserved(T0 + 60)
e1 = r1.evicted(T0 + 60 + 1740)
rel1 = e1.released(T0 + 60 + 1800)  # the pods took a minute to stop: quota held 1800 s
r2 = rel1.reserved(T0 + HOUR)
f2 = r2.finished(T0 + 3 * HOUR)
once = r1.finished(T0 + 60 + 2 * HOUR)

EVICTED_LIFE = [d0.seen(T0), r1.seen(T0 + 61), e1.seen(T0 + 1801), rel1.seen(T0 + 1861),
                r2.seen(T0 + HOUR + 1), f2.seen(T0 + 3 * HOUR + 1)]


@dataclass(frozen=True)
class Case:
    sentence: str
    observations: list[WorkloadObservation]
    useful_gpu_h: Decimal
    lost_gpu_h: Decimal
    cost_useful: Decimal
    cost_lost: Decimal
    transitions: list[tuple[str, str, str]]
    phase: Phase = Phase.FINISHED


ADMITTED = ("admitted", "research", "observed")
SUBMITTED = ("submitted", "", "observed")
FINISHED = ("finished", "Succeeded", "observed")
# 2 GPUs and 4 cores for one hour: 2 x 2.5 + 4 x 0.05 = 5.20 per hour
CASES = [
    Case("a workload admitted once that finishes: all the time it held quota is useful",
         [d0.seen(T0), r1.seen(T0 + 61), once.seen(T0 + 2 * HOUR + 61)],
         Decimal(4), Decimal(0), Decimal("10.4"), Decimal(0), [SUBMITTED, ADMITTED, FINISHED]),
    Case("an evicted attempt is lost from admission to the release of its quota; the final attempt is useful",
         EVICTED_LIFE, Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "observed"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("a replayed watch (every observation twice, then all again) counts each transition once",
         [o for o in EVICTED_LIFE for _ in range(2)] + EVICTED_LIFE,
         Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "observed"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("a workload first seen already finished is accounted from its status conditions",
         [once.seen(T0 + 5 * HOUR)], Decimal(4), Decimal(0), Decimal("10.4"), Decimal(0),
         [SUBMITTED, ADMITTED, FINISHED]),
    Case("first seen finished after an eviction: the lost attempt is Kueue's accumulated time less the last",
         [f2.seen(T0 + 5 * HOUR)], Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ("evicted", "Preempted", "inferred"), ADMITTED, FINISHED]),
    Case("admitted again while the release was missed: the attempt ends at its start plus Kueue's "
         "accumulated time",
         [d0.seen(T0), r1.seen(T0 + 61), r2.seen(T0 + HOUR + 1), f2.seen(T0 + 3 * HOUR + 1)],
         Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "inferred"), ("released", "Preempted", "inferred"),
          ADMITTED, FINISHED]),
    Case("the eviction first seen together with the release: both are taken from their conditions",
         [d0.seen(T0), r1.seen(T0 + 61), rel1.seen(T0 + 1861), r2.seen(T0 + HOUR + 1),
          f2.seen(T0 + 3 * HOUR + 1)],
         Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "observed"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("the release seen without any eviction condition: an eviction is inferred at the release",
         [d0.seen(T0), r1.seen(T0 + 61), r1.released(T0 + 60 + 1800).seen(T0 + 1861),
          r1.released(T0 + 60 + 1800).reserved(T0 + HOUR).seen(T0 + HOUR + 1),
          r1.released(T0 + 60 + 1800).reserved(T0 + HOUR).finished(T0 + 3 * HOUR).seen(T0 + 3 * HOUR + 1)],
         Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Pending", "inferred"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("a workload deleted while it holds quota loses the attempt (reason Deleted)",
         [d0.seen(T0), r1.seen(T0 + 61), r1.deleting(T0 + 60 + HOUR).seen(T0 + HOUR + 61, deleted=True)],
         Decimal(0), Decimal(2), Decimal(0), Decimal("5.2"),
         [SUBMITTED, ADMITTED, ("deleted", "Deleted", "observed")], Phase.DELETED),
    Case("pods that finished for good stop being held (Kueue's reclaimable pods)",
         [d0.seen(T0), d0.reserved(T0).seen(T0 + 1), d0.reserved(T0).reclaimable(1).seen(T0 + HOUR),
          d0.reserved(T0).reclaimable(1).finished(T0 + 2 * HOUR).seen(T0 + 2 * HOUR + 1)],
         Decimal(3), Decimal(0), Decimal("7.8"), Decimal(0),
         [SUBMITTED, ("admitted", "research", "observed"), ("resized", "ReclaimablePods", "observed"),
          FINISHED]),
    Case("the final attempt missed while the service was down and seen finished with every pod reclaimable: "
         "admitted from its QuotaReserved time at the size it was admitted",
         [d0.seen(T0), r1.seen(T0 + 61), e1.seen(T0 + 1801), rel1.seen(T0 + 1861),
          f2.reclaimable(2).seen(T0 + 3 * HOUR + 1)],
         Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "observed"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("first seen finished after an eviction with every pod reclaimable: the same account",
         [f2.reclaimable(2).seen(T0 + 5 * HOUR)], Decimal(4), Decimal(1), Decimal("10.4"), Decimal("2.6"),
         [SUBMITTED, ("evicted", "Preempted", "inferred"), ADMITTED, FINISHED]),
    Case("admitted, evicted, released and admitted again within one second (Kueue's condition times have "
         "one-second resolution): the second admission is a new attempt, seen from a newer observation",
         [d0.seen(T0), r1.seen(T0 + 60.2), r1.evicted(T0 + 60).seen(T0 + 60.4),
          r1.evicted(T0 + 60).released(T0 + 60).seen(T0 + 60.6),
          r1.evicted(T0 + 60).released(T0 + 60).reserved(T0 + 60).seen(T0 + 60.8),
          r1.evicted(T0 + 60).released(T0 + 60).reserved(T0 + 60).finished(T0 + 60 + 2 * HOUR)
          .seen(T0 + 2 * HOUR + 61)],
         Decimal(4), Decimal(0), Decimal("10.4"), Decimal(0),
         [SUBMITTED, ADMITTED, ("evicted", "Preempted", "observed"), ("released", "Pending", "observed"),
          ADMITTED, FINISHED]),
    Case("evicted and pending when first seen: Kueue's accumulated time is lost on an unknown flavor",
         [rel1.seen(T0 + 1861)], Decimal(0), Decimal(0), Decimal(0), Decimal(0),
         [SUBMITTED, ("evicted", "Preempted", "inferred")], Phase.PENDING),
    Case("a whole attempt missed while pending is lost on an unknown flavor",
         [d0.seen(T0), rel1.seen(T0 + 1861)], Decimal(0), Decimal(0), Decimal(0), Decimal(0),
         [SUBMITTED, ("evicted", "Preempted", "inferred")], Phase.PENDING),
]


@pytest.mark.parametrize("case", CASES, ids=[c.sentence for c in CASES])
def test_a_life_gives_its_useful_and_lost_gpu_hours_and_cost(case: Case) -> None:
    state, transitions = play(case.observations)
    assert state is not None
    assert (state.phase, kinds(transitions)) == (case.phase, case.transitions)
    if GPU in dict(state.totals) or case.useful_gpu_h or case.lost_gpu_h:
        assert gpu_hours(state) == (case.useful_gpu_h, case.lost_gpu_h)
    assert cost(state) == (case.cost_useful, case.cost_lost)
    assert [t.seq for t in transitions] == list(range(1, len(transitions) + 1))


def test_lost_time_of_an_attempt_never_seen_is_charged_to_an_unknown_flavor_at_the_requested_size() -> None:
    state, _ = play([d0.seen(T0), rel1.seen(T0 + 1861)])
    assert state is not None
    totals = dict(state.totals)
    # 2 pods x 1 GPU for Kueue's 1800 s: 1 GPU-hour, unpriced
    assert totals[FlavorResource(UNKNOWN_FLAVOR, "nvidia.com/gpu")].lost == 2000 * 1_800_000
    assert totals[FlavorResource(UNKNOWN_FLAVOR, "nvidia.com/gpu")].cost_lost == 0
    assert state.recovered is False and state.evictions == 1


def test_a_stale_observation_after_the_finish_changes_nothing() -> None:
    state, _ = play(EVICTED_LIFE)
    assert state is not None
    for old in EVICTED_LIFE:
        step = advance(state, facts_of(old, PRICES, LabelKeys()), cutoff_ms=0)
        assert step is not None and step.transitions == () and step.opened == () and step.ended == ()
        assert step.state.totals == state.totals


def test_a_life_that_ended_before_the_retention_cutoff_is_not_recorded_when_first_seen() -> None:
    assert play([once.seen(T0 + 200 * 86400)], cutoff=T0 + 20 * 86400) == (None, [])
    state, _ = play([once.seen(T0 + 200 * 86400)], cutoff=T0)
    assert state is not None and state.phase is Phase.FINISHED


def test_an_unpriced_flavor_is_counted_in_hours_and_costs_nothing() -> None:
    h100 = Doc("x").reserved(T0, flavor="h100")
    state, _ = play([h100.seen(T0 + 1), h100.finished(T0 + HOUR).seen(T0 + HOUR + 1)])
    assert state is not None
    assert gpu_hours(state, "h100") == (Decimal(2), Decimal(0))
    assert cost(state) == (Decimal(0), Decimal(0))


def test_the_eviction_keeps_kueue_s_reason_and_the_preemption_reason() -> None:
    _, transitions = play(EVICTED_LIFE)
    evicted = next(t for t in transitions if str(t.kind) == "evicted")
    assert (evicted.reason, evicted.message, evicted.at_ms) == (
        "Preempted", "InClusterQueue: evicted: Preempted", round((T0 + 1800) * 1000))


def test_an_attempt_s_segments_carry_the_admitting_cluster_queue_and_the_labels_of_that_moment() -> None:
    doc = Doc(labels={"project": "llm", "cost-center": "cc-7"})
    step = advance(None, facts_of(doc.reserved(T0, cluster_queue="frontier").seen(T0 + 1), PRICES,
                                  LabelKeys()), cutoff_ms=0)
    assert step is not None
    dims = {(g.dims.team, g.dims.project, g.dims.cost_center, g.flavor, g.resource) for g in step.opened}
    assert dims == {("frontier", "llm", "cc-7", "a100", "nvidia.com/gpu"),
                    ("frontier", "llm", "cc-7", "a100", "cpu")}


@given(st.lists(st.tuples(st.integers(0, len(EVICTED_LIFE) - 1), st.integers(0, len(EVICTED_LIFE) - 1)),
                max_size=12))
def test_replaying_older_observations_anywhere_in_the_stream_never_changes_the_account(
        replays: list[tuple[int, int]]) -> None:
    """A restart, a replayed watch or a spool flushed twice re-delivers observations already accounted:
    after the i-th observation, any of the first i may come again."""
    again: dict[int, list[int]] = {}
    for after, which in replays:
        again.setdefault(after, []).append(min(which, after))
    stream = []
    for i, obs in enumerate(EVICTED_LIFE):
        stream.append(obs)
        stream.extend(EVICTED_LIFE[j] for j in again.get(i, []))
    straight, straight_transitions = play(EVICTED_LIFE)
    replayed, replayed_transitions = play(stream)
    assert straight is not None and replayed is not None
    assert replayed.totals == straight.totals
    assert kinds(replayed_transitions) == kinds(straight_transitions)
