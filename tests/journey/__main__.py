"""`make journey` (`python -m tests.journey`): the journey narrated, then its seams with their figures; exit 1
when a seam fails."""

from __future__ import annotations

import sys

from tests.journey import seams
from tests.journey.journey import main

record = main(lambda line: print(line, flush=True))
sys.exit(0 if all(s.ok for s in seams.check(record)) else 1)
