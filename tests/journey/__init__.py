"""The platform engineer's journey, end to end on a live local cluster (issue 31): the shipped samples and the
documented commands, a PostgreSQL ledger, the operator as its own process; `qm plan` of the seed's shift,
then apply, then observe; the ledger's answers. One implementation for the acceptance test
(tests/integration/test_journey.py, which asserts the seams) and the narrated script (`make journey`).

- `journey.py`: the stages, run as a user runs them (subprocesses of `qm` and `kubectl`), recording what
  each said and what the cluster did (`Record`).
- `seams.py`: what must agree (plan = act = account), each seam's figures and verdict from a `Record`.
"""
