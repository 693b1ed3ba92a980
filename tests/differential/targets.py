"""The agreement targets (issue 10) and the Kueue configuration of each mode."""

from __future__ import annotations

from tests.differential.report import ModeSummary
from tests.integration.controlplanes import KUEUE_CONFIGS

# Kueue's configuration per mode: classical = Kueue's defaults; fair-sharing = fairSharing with the
# default strategies (S2-a, S2-b).
KUEUE_CONFIG: dict[str, dict[str, object]] = {
    "classical": KUEUE_CONFIGS["default"],
    "fair-sharing": KUEUE_CONFIGS["fair-sharing"],
}
CONTROL_PLANE = {"classical": "default", "fair-sharing": "fair-sharing"}  # pool names

# Steps agreeing when the model is resynced from the real state before each step.
RESYNCED_STEPS = {"classical": 0.999, "fair-sharing": 0.995}
# Whole states agreeing when the model runs alone (chained, as the simulator runs).
CHAINED_STATES = 0.99


def misses(summaries: dict[str, ModeSummary]) -> list[str]:
    out = []
    for mode, m in sorted(summaries.items()):
        if m.errors:
            out.append(f"{mode}: {len(m.errors)} state(s) failed to run ({m.errors[0]})")
        if m.steps and m.resynced_step_rate < RESYNCED_STEPS[mode]:
            out.append(f"{mode}: resynced steps {m.resynced_step_rate:.4f} < {RESYNCED_STEPS[mode]}")
        ok = m.states - len(m.errors)
        if ok and m.chained_states_agree / ok < CHAINED_STATES:
            out.append(f"{mode}: chained states {m.chained_states_agree / ok:.4f} < {CHAINED_STATES}")
    return out
