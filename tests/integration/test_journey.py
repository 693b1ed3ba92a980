"""The acceptance journey (issue 31): the platform engineer's path on the real control plane with KWOK GPU
nodes, the operator as its own process (`qm run`), a PostgreSQL ledger, only the shipped samples and the
documented commands (tests/journey/journey.py, also `make journey`). Each test asserts one seam
(tests/journey/seams.py) of the one run: plan = forecast = act (a), lost work (b), cost (c), the audit
trail (d), no futile eviction (e)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.controlplanes import POOL, binaries_or_skip
from tests.journey import seams
from tests.journey.journey import Journey, Record
from tests.ledger_db import PostgresServer, start_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Record]:
    binaries = binaries_or_skip()
    if not binaries.has_nodes_support:
        pytest.fail("kube-controller-manager, kube-scheduler and KWOK are not built", pytrace=False)
    POOL.stop_extra()  # the journey's own cluster is the one extra this 2-core machine runs
    server: PostgresServer = start_server()
    try:
        journey = Journey(tmp_path_factory.mktemp("journey"), server.create_database("ledger"))
        yield journey.run_all()
    finally:
        server.destroy()


@pytest.fixture(scope="module")
def checked(record: Record) -> dict[str, seams.Seam]:
    out = {s.name.split(":")[0]: s for s in seams.check(record)}
    print("\n" + "\n".join(s.report() for s in out.values()))
    print("\n".join(seams.summary(record)))
    return out


@pytest.mark.parametrize("seam", ["a", "b", "c", "d", "e"])
def test_the_journeys_seam_holds(checked: dict[str, seams.Seam], seam: str) -> None:
    assert checked[seam].ok, checked[seam].report()


def test_every_command_of_the_journey_ran_as_documented(record: Record) -> None:
    # A command retried until the API server admits it (the stamps' first seconds) counts by its last try.
    last = {c.shown(): c for c in record.commands}
    failed = [(c.shown(), c.code, c.err[-500:]) for c in last.values() if c.code != 0]
    assert failed == []
    assert Path(record.command("qm plan").argv[2]).name == "quotapolicy-shift.yaml"
