"""The planners: experiment preemption and quota shifts (docs/history-and-planners.md).

Import the submodules directly: ``fairshare.planners.quota_shift`` (pure, no CORE dependency) and
``fairshare.planners.experiments`` (uses CORE's snapshot and admission model).
"""
