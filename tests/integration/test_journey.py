"""The acceptance journey (issue 31): the platform engineer's path on the real control plane with KWOK GPU
nodes, the operator as its own process (`qm run`), a PostgreSQL ledger, only the shipped samples and the
documented commands (tests/journey/journey.py, also `make journey`). Each test asserts one seam
(tests/journey/seams.py) of the one run: plan = forecast = act (a), lost work (b), cost (c), the audit
trail (d), no futile eviction (e). The journey runs twice: on Kueue's default Configuration, and on Kueue
with fair sharing, which `qm plan` and the operator read from Kueue's ConfigMap and model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.controlplanes import FAIR_SHARING, POOL, binaries_or_skip
from tests.journey import seams
from tests.journey.journey import Journey, Record
from tests.ledger_db import PostgresServer, start_server

pytestmark = pytest.mark.integration


# The Kueue Configurations the journey runs on (`qm dev-cluster up --kueue-config`), and what the operator
# then says it models.
KUEUE: dict[str, tuple[dict[str, object] | None, str]] = {
    "kueue-defaults": (None, "fair sharing off"),
    "fair-sharing": (
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": FAIR_SHARING},
        "fair sharing on (LessThanOrEqualToFinalShare, LessThanInitialShare)",
    ),
}


@pytest.fixture(scope="module", params=list(KUEUE))
def record(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Record]:
    binaries = binaries_or_skip()
    if not binaries.has_nodes_support:
        pytest.fail("kube-controller-manager, kube-scheduler and KWOK are not built", pytrace=False)
    POOL.stop_extra()  # the journey's own cluster is the one extra this 2-core machine runs
    workdir = tmp_path_factory.mktemp("journey")
    configuration, _ = KUEUE[request.param]
    config_file = None
    if configuration is not None:
        config_file = workdir / "kueue-config.yaml"
        config_file.write_text(yaml.safe_dump(configuration), encoding="utf-8")
    server: PostgresServer = start_server()
    try:
        journey = Journey(workdir, server.create_database("ledger"), kueue_config=config_file)
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


def test_the_plan_and_the_operator_model_the_kueue_the_cluster_runs(
    record: Record, request: pytest.FixtureRequest
) -> None:
    """Both read Kueue's Configuration from its ConfigMap (no flag): the plan's JSON says what it modelled,
    the operator's log says what it follows."""
    configuration, said = KUEUE[request.node.callspec.params["record"]]
    fair = configuration is not None
    assert record.plan["kueue"] == {"fairSharing": fair, "preemptionStrategies": (
        ["LessThanOrEqualToFinalShare", "LessThanInitialShare"] if fair else [])}
    said_by_operator = [str(r.get("message")) for r in record.operator_log]
    read = [m for m in said_by_operator if "Kueue's Configuration" in m]
    assert read == [f"Kueue's Configuration: {said} (ConfigMap kueue-system/kueue-manager-config); the "
                    "controller's model of Kueue follows it"], read
