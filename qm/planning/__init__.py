"""`qm plan`: what a new QuotaPolicy does to the live cluster before it is applied (docs/plan.md).

- `inputs`: the live cluster (qm/live.py), the QuotaPolicy files and the ledger's history, read once;
- `diff`: the objects the operator would apply now, as `kubectl diff` shows them, and the transitions the
  policy controller would start, step by step (asked of `fairshare.control`, never re-implemented);
- `scenario`: the calibrated what-if (simulations/calibrate.py, simulations/initial.py): the current
  policy vs the new one (and variants) from the live state, through the one controller;
- `show`: the text and JSON reports.
The command itself (flags, the gate, exit codes) is qm/commands/plan.py.
"""
