"""Preemption target selection (Kueue pkg/scheduler/preemption/), split as Kueue splits it:

- `targets.py`: GetTargets (preemption.go), which runs one of the two algorithms;
- `classical.py`: classicalPreemptions and its candidate generator (classical/*.go);
- `fairsharing.py`: fairPreemptions, the target ordering and the S2-a/S2-b strategies (fairsharing/*.go,
  KEP-1714);
- `common.py`: what both use: the candidates' order and the preemption policy (common/*.go), the
  preemption context, workloadFits and fillBack.

Both algorithms work on the snapshot through its undo log and leave it unchanged.
"""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)

from .common import PreemptionContext, candidate_order_key, satisfies_policy
from .targets import can_have_candidates, get_targets

__all__ = [
    "PreemptionContext",
    "can_have_candidates",
    "candidate_order_key",
    "get_targets",
    "satisfies_policy",
]
