"""The planners: experiment preemption and quota shifts (docs/history-and-planners.md).

Import the submodules directly: ``fairshare.planners.quota_shift`` (pure, no CORE dependency) and
``fairshare.planners.experiments`` (uses CORE's snapshot and admission model).
"""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)
