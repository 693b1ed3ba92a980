"""Hostile `qm plan` flags (issue 33): durations past their documented maximum (`--history`, `--replay`,
`--horizon`, `--timeout`: ten years, ten years, ten years, an hour), durations that are no duration, counts
out of range, flags that exclude each other, and `--jobs` above the cores (capped with one line, then the
plan goes on: here to a kubeconfig that does not exist, its own one line). Every case is refused before the
cluster or the ledger is read, so none needs either; the file is a valid QuotaPolicy."""

from __future__ import annotations

import random
from collections.abc import Iterator

from simulations.executor import default_workers

from .bases import POLICY
from .generator import DURATION_EXAMPLES, Case

TEN_YEARS = 3650 * 86400.0
LIMITS = {"--history": (TEN_YEARS, "3650d"), "--replay": (TEN_YEARS, "3650d"),
          "--horizon": (TEN_YEARS, "3650d"), "--timeout": (3600.0, "1h")}
NO_KUBECONFIG = "/nonexistent/qm-plan-kubeconfig"


def _case(id_: str, argv: tuple[str, ...], stderr: str, rc: int = 2) -> Case:
    return Case(f"plan flags: {id_}", "plan", ("plan", "{f}", *argv), POLICY.encode(), rc=rc, stderr=stderr)


def _over(rng: random.Random, most: float) -> str:
    """A duration past `most`: just past it, a unit mistake, or a number no date can hold."""
    return rng.choice([
        f"{int(most // 86400) + rng.randrange(1, 10**6)}d",
        f"{rng.randrange(10**8, 10**12)}d",
        f"{int(most) + rng.randrange(1, 10**9)}",
        f"1e{rng.randrange(20, 308)}",
        f"{rng.randrange(10**6, 10**9)}h",
    ])


def _seconds(text: str) -> float:
    from qm.flags import seconds

    return seconds(text)


def plan_cases(rng: random.Random) -> Iterator[Case]:
    for flag, (most, shown) in LIMITS.items():
        for i in range(30):
            value = _over(rng, most)
            got = _seconds(value)
            if got <= most:  # pragma: no cover - _over's choices are all above every limit
                continue
            yield _case(f"{flag} {value} ({i})", (flag, value),
                        f"qm plan: error: {flag} must be at most {shown} (got {got:g}s)\n")
    for i in range(20):
        flag = rng.choice(list(LIMITS))
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(1, 10)))
        if word in ("inf", "nan", "infinity", "e"):
            continue
        yield _case(f"{flag} {word} ({i})", (flag, word),
                    f"qm plan: error: argument {flag}: not a duration (e.g. {DURATION_EXAMPLES}, or "
                    f"seconds): {word!r}\n")
    for i in range(20):
        flag = rng.choice(list(LIMITS))
        value = rng.choice(["0", "0s", "-1", "0ms", "inf", "-inf", "nan", f"-{rng.randrange(1, 10**6)}"])
        yield _case(f"{flag}={value} ({i})", (f"{flag}={value}",),
                    f"qm plan: error: argument {flag}: must be a finite duration > 0: {value!r}\n")
    for value in ("0", "-1", f"-{rng.randrange(2, 10**9)}"):
        yield _case(f"--jobs {value}", (f"--jobs={value}",),
                    f"qm plan: error: --jobs must be >= 1 (got {value})\n")
        yield _case(f"--replications {value}", (f"--replications={value}",),
                    f"qm plan: error: --replications must be >= 1 (got {value})\n")
    for value in ("two", "1.5", "", "0x10", "1e3"):
        yield _case(f"--jobs {value!r}", (f"--jobs={value}",),
                    f"qm plan: error: argument --jobs: invalid int value: {value!r}\n")
    cores = default_workers()
    for i, jobs in enumerate((cores + 1, cores * 64, 10**6, 10**30)):
        yield _case(f"--jobs {jobs} above the cores ({i})",
                    ("--jobs", str(jobs), "--kubeconfig", NO_KUBECONFIG),
                    f"qm plan: --jobs {jobs} is more than the {cores} cores here: the forecast runs {cores} "
                    f"at once\nqm plan: error: {NO_KUBECONFIG}: no such file\n")
    yield _case("--no-ledger with --db", ("--no-ledger", "--db", "sqlite:///x.db"),
                "qm plan: error: --no-ledger excludes --db and --replay\n")
    yield _case("--no-ledger with --replay", ("--no-ledger", "--replay", "1d"),
                "qm plan: error: --no-ledger excludes --db and --replay\n")
    yield _case("--fail-if with one replication",
                ("--replications", "1", "--fail-if", "lost_gpu_hours > 1"),
                "qm plan: error: --fail-if needs --replications >= 2: a condition holds only with a "
                "confidence interval (got 1)\n")
    yield _case("--address without ray", ("--address", "ray://x:10001"),
                "qm plan: error: --address needs --executor ray\n")
