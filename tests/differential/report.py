"""Per-step and per-state agreement of the model with the real Kueue, and the disagreement classes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.differential.runner import StateRecord

# The states run in this pytest session (test_differential.py appends, conftest.py reports them).
COLLECTED: list[StateRecord] = []


@dataclass
class ModeSummary:
    mode: str
    states: int = 0
    steps: int = 0
    resynced_steps_agree: int = 0
    chained_steps_agree: int = 0
    resynced_states_agree: int = 0
    chained_states_agree: int = 0
    unbatched_states_agree: int = 0
    # Disagreements a Kueue timing variant reproduces (runner.VARIANTS, the flavor scan's phase):
    # Kueue itself decides either way depending on when its cycles ran.
    resynced_steps_timing: int = 0
    chained_states_timing: int = 0
    errors: list[str] = field(default_factory=list)
    preempting_steps: int = 0
    real_livelocks: int = 0
    classes: Counter[str] = field(default_factory=Counter)  # resynced disagreements per class
    chained_classes: Counter[str] = field(default_factory=Counter)  # first chained disagreement per state
    seconds: float = 0.0
    examples: dict[str, str] = field(default_factory=dict)  # class -> one "seed s step i: difference"

    @staticmethod
    def pct(n: int, d: int) -> str:
        return f"{100.0 * n / d:.2f}%" if d else "n/a"

    @property
    def resynced_step_rate(self) -> float:
        return self.resynced_steps_agree / self.steps if self.steps else 0.0

    @property
    def resynced_step_rate_with_timing(self) -> float:
        """Steps agreeing, or differing only as one of Kueue's own timings would."""
        return (self.resynced_steps_agree + self.resynced_steps_timing) / self.steps if self.steps else 0.0

    @property
    def ok_states(self) -> int:
        return self.states - len(self.errors)

    @property
    def chained_state_rate_with_timing(self) -> float:
        ok = self.ok_states
        return (self.chained_states_agree + self.chained_states_timing) / ok if ok else 0.0

    @property
    def chained_state_rate(self) -> float:
        return self.chained_states_agree / self.states if self.states else 0.0


def summarize(records: Iterable[StateRecord]) -> dict[str, ModeSummary]:
    out: dict[str, ModeSummary] = {}
    for r in records:
        m = out.setdefault(r.mode, ModeSummary(r.mode))
        m.states += 1
        m.seconds += r.seconds
        if r.error:
            m.errors.append(f"seed {r.seed}: {r.error}")
            continue
        m.resynced_states_agree += r.resynced_agree
        m.chained_states_agree += r.chained_agree
        m.unbatched_states_agree += r.unbatched_agree
        first_chained = True
        for s in r.steps:
            m.steps += 1
            m.preempting_steps += bool(s.real.preempted)
            m.real_livelocks += s.real.livelock
            if s.resynced_verdict.agree:
                m.resynced_steps_agree += 1
            else:
                m.resynced_steps_timing += s.resynced_verdict.cls.startswith("timing")
                m.classes[s.resynced_verdict.cls] += 1
                m.examples.setdefault(
                    s.resynced_verdict.cls, f"seed {r.seed} step {s.index}: {s.resynced_verdict.difference}"
                )
            cv = s.chained_verdict
            if cv is None or cv.agree:
                m.chained_steps_agree += 1
            elif first_chained:
                first_chained = False
                # Resynced disagrees too: the same class. Resynced agrees: the chained model held the
                # same quota state, so its queues (parked or not, flavor scan) made the difference.
                if not s.resynced_verdict.agree:
                    cls = s.resynced_verdict.cls
                else:
                    cls = cv.cls if cv.cls.startswith("timing") else f"queue state: {cv.cls}"
                m.chained_classes[cls] += 1
                m.chained_states_timing += cls.startswith("timing")
                m.examples.setdefault("chained " + cls, f"seed {r.seed} step {s.index}: {cv.difference}")
    return out


def lines(summaries: dict[str, ModeSummary], seeds: Sequence[int] | None = None) -> list[str]:
    out = ["Differential: the model against the real Kueue, one submission at a time"]
    if seeds is not None:
        out.append(f"seeds: {_seed_text(seeds)}")
    for mode in sorted(summaries):
        m = summaries[mode]
        out.append(
            f"{mode}: {m.states} states, {m.steps} steps ({m.preempting_steps} with preemption, "
            f"{m.real_livelocks} Kueue livelocks), {m.seconds:.0f} s"
        )
        out.append(
            f"  per step   resynced {m.resynced_steps_agree}/{m.steps} = "
            f"{m.pct(m.resynced_steps_agree, m.steps)}; chained {m.chained_steps_agree}/{m.steps} = "
            f"{m.pct(m.chained_steps_agree, m.steps)}"
        )
        ok = m.ok_states
        out.append(
            f"  per state  resynced {m.resynced_states_agree}/{ok} = {m.pct(m.resynced_states_agree, ok)}; "
            f"chained {m.chained_states_agree}/{ok} = {m.pct(m.chained_states_agree, ok)}"
        )
        out.append(
            f"  per state  chained without the 1 s requeue batch (parked workloads requeued at the release) "
            f"{m.unbatched_states_agree}/{ok} = {m.pct(m.unbatched_states_agree, ok)}"
        )
        out.append(
            f"  with Kueue's timing classes counted as agreeing: resynced steps "
            f"{m.pct(m.resynced_steps_agree + m.resynced_steps_timing, m.steps)}, chained states "
            f"{m.pct(m.chained_states_agree + m.chained_states_timing, ok)}"
        )
        for cls, n in sorted(m.classes.items()):
            out.append(f"  resynced disagreement [{cls}]: {n} step(s), e.g. {m.examples[cls]}")
        for cls, n in sorted(m.chained_classes.items()):
            out.append(f"  chained divergence [{cls}]: {n} state(s), e.g. {m.examples['chained ' + cls]}")
        for e in m.errors:
            out.append(f"  ERROR {e}")
    return out


def _seed_text(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    if s and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}:{s[-1] + 1}"
    return ",".join(map(str, s))
