"""Ledger benchmark: record 100,000 workload lives and answer `qm usage --since 180d`, on a SQLite file
and on a real PostgreSQL server (a throwaway one, tests/ledger_db.py). Prints medians.

Each life is observed as the operator observes it: submitted, admitted, finished (one in ten is evicted
once and admitted again first), spread over 180 days, 8 teams x 5 projects, 2 flavors. Insert throughput
is end to end: facts, spool (fsync'd), writer thread, database commit; rows/s counts every row written.
Environment: QM_BENCH_LEDGER_LIVES (default 100000), QM_BENCH_LEDGER_REPEATS (default 3).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from fairshare.models import Admission, Condition, PodSet, PodSetAssignment, Workload
from ledger import schema as t
from ledger.ledger import LedgerConfig, open_ledger
from ledger.queries import Dim, UsageQuery
from ledger.records import PriceTable, WorkloadObservation, to_millis
from qm.cli import main as qm_main

DAY = 86400.0
END = 1_800_000_000.0
SPAN = 180 * DAY
CHUNK = 1000
PRICES = PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.05"},
                        "l4": {"nvidia.com/gpu": "0.8", "cpu": "0.05"}})


def _workload(i: int, rng: random.Random, created: float, conds: tuple[Condition, ...],
              admitted: bool) -> Workload:
    team = f"team-{i % 8}"
    gpus = rng.choice((1, 2, 4, 8))
    flavor = "a100" if i % 3 else "l4"
    requests = (("cpu", 4000), ("nvidia.com/gpu", 1000))
    admission = None
    if admitted:
        admission = Admission(team, (PodSetAssignment(
            "main", (("cpu", flavor), ("nvidia.com/gpu", flavor)),
            (("cpu", 4000 * gpus), ("nvidia.com/gpu", 1000 * gpus)), gpus),))
    return Workload(namespace=f"ns-{i % 8}", name=f"job-{i}", queue_name="main",
                    pod_sets=(PodSet("main", gpus, requests),), creation_timestamp=created, uid=f"uid-{i}",
                    priority_class="batch" if i % 4 else "prod",
                    labels=(("cost-center", f"cc-{i % 3}"), ("project", f"p-{i % 5}")),
                    admission=admission, conditions=conds, owner_kind="Job", owner_name=f"job-{i}")


def lives(n: int, seed: int = 7) -> list[WorkloadObservation]:
    """n lives' observations, in time order (as a watch delivers them)."""
    rng = random.Random(seed)
    events: list[tuple[float, int, WorkloadObservation]] = []
    for i in range(n):
        created = END - SPAN + rng.random() * (SPAN - 2 * DAY)
        start = created + rng.uniform(10, 600)
        run = rng.uniform(600, 8 * 3600)

        def obs(at: float, conds: tuple[Condition, ...], admitted: bool, i: int = i,
                created: float = created) -> None:
            wl = _workload(i, random.Random(i), created, conds, admitted)
            events.append((at, i, WorkloadObservation(wl, at + 1)))

        obs(created, (), False)
        if i % 10 == 0:  # evicted once, readmitted
            evicted, released = start + run / 3, start + run / 3 + 30
            obs(start, (Condition("QuotaReserved", True, "QuotaReserved", "", start),), True)
            obs(evicted, (Condition("QuotaReserved", True, "QuotaReserved", "", start),
                          Condition("Evicted", True, "Preempted", "", evicted)), True)
            obs(released, (Condition("QuotaReserved", False, "Pending", "", released),
                           Condition("Evicted", True, "Preempted", "", evicted)), False)
            start = released + 60
        reserved = Condition("QuotaReserved", True, "QuotaReserved", "", start)
        obs(start, (reserved,), True)
        obs(start + run, (reserved, Condition("Finished", True, "Succeeded", "", start + run)), True)
    events.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in events]


def _rows(ledger_url: str) -> int:
    from sqlalchemy import create_engine

    from ledger.db import resolve_url

    engine = create_engine(resolve_url(ledger_url))
    try:
        with engine.connect() as conn:
            return sum(int(conn.execute(select(func.count()).select_from(x)).scalar_one())
                       for x in t.metadata.sorted_tables)
    finally:
        engine.dispose()


def _insert(url: str, spool: Path, observations: list[WorkloadObservation]) -> float:
    with open_ledger(url, spool_dir=spool, config=LedgerConfig(prices=PRICES)) as ledger:
        started = time.perf_counter()
        for i in range(0, len(observations), CHUNK):
            ledger.record_workloads(observations[i:i + CHUNK])
        if not ledger.flush(3600):
            raise RuntimeError("the ledger did not flush")
        return time.perf_counter() - started


def _query_latency(url: str, repeats: int = 7) -> tuple[float, float]:
    """Median of `qm usage --since 180d --by team,project` (the CLI in-process) and of the query alone."""
    until = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(END))}"
    cli, query = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = qm_main(["usage", "--db", url, "--since", "180d", "--until", until,
                            "--by", "team,project"])
        cli.append(time.perf_counter() - started)
        if code != 0:
            raise RuntimeError(f"qm usage exited {code}")
        with open_ledger(url, read_only=True) as ledger:
            started = time.perf_counter()
            ledger.usage(UsageQuery(to_millis(END - SPAN), to_millis(END), to_millis(END),
                                    (Dim.TEAM, Dim.PROJECT, Dim.RESOURCE)))
            query.append(time.perf_counter() - started)
    return statistics.median(cli), statistics.median(query)


def _report(name: str, n: int, observations: int, rows: int, inserts: list[float],
            latency: tuple[float, float]) -> None:
    s = statistics.median(inserts)
    print(f"{name:10s} {n} lives ({observations} observations, {rows} rows): insert median {s:.1f} s = "
          f"{n / s:,.0f} lives/s, {rows / s:,.0f} rows/s (runs: {', '.join(f'{x:.1f}' for x in inserts)} s); "
          f"qm usage --since 180d median {latency[0] * 1000:.0f} ms (query alone {latency[1] * 1000:.0f} ms)",
          flush=True)


def main() -> None:
    from tests.ledger_db import start_server

    n = int(os.environ.get("QM_BENCH_LEDGER_LIVES", "100000"))
    repeats = int(os.environ.get("QM_BENCH_LEDGER_REPEATS", "3"))
    observations = lives(n)
    print(f"{n} lives, {len(observations)} observations; {repeats} runs per database; targets: "
          ">= 2,000 rows/s, qm usage <= 1 s", flush=True)
    with tempfile.TemporaryDirectory(prefix="qm-bench-ledger-") as tmp:
        root = Path(tmp)
        inserts = []
        url = ""
        for r in range(repeats):
            url = str(root / f"sqlite-{r}.db")
            inserts.append(_insert(url, root / f"spool-sqlite-{r}", observations))
        _report("sqlite", n, len(observations), _rows(url), inserts, _query_latency(url))
        server = start_server()
        try:
            inserts = []
            for r in range(repeats):
                url = server.create_database(f"bench_{r}")
                inserts.append(_insert(url, root / f"spool-pg-{r}", observations))
            _report("postgresql", n, len(observations), _rows(url), inserts, _query_latency(url))
        finally:
            server.destroy()


if __name__ == "__main__":
    main()
