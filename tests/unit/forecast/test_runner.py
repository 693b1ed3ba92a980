"""The forecast runner: each job in a spawned child process, one at a time from a bounded queue; a result,
a failure, a hang (killed at the timeout) and a death are each one outcome, and the runner goes on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest

from queue_manager.forecast import (
    CHILD_NICENESS,
    ForecastRequest,
    ForecastResult,
    ForecastRunner,
    Outcome,
    ScoreRequest,
)
from tests.unit.forecast import helpers


def request(generation: int = 1, metrics: tuple[str, ...] = ("wait_p95", "gpu_hours")) -> ForecastRequest:
    return ForecastRequest("p", generation, 1000.0, 2000.0, metrics, 3, 7)


def wait_for(runner: ForecastRunner, policy: str, n: int = 1, timeout: float = 60.0) -> list[Outcome]:
    got: list[Outcome] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        got += runner.collect(policy)
        if time.monotonic() > deadline:
            pytest.fail(f"{len(got)} of {n} outcomes within {timeout}s")
        time.sleep(0.05)
    return got


@pytest.fixture
def make() -> Iterator[Callable[..., ForecastRunner]]:
    made: list[ForecastRunner] = []

    def build(forecaster: object = helpers.square_forecaster, **kw: object) -> ForecastRunner:
        r = ForecastRunner(forecaster, kw.pop("scorer", helpers.constant_scorer), **kw)  # type: ignore[arg-type]
        made.append(r)
        return r

    yield build
    for r in made:
        r.close()


def test_a_forecast_runs_in_another_process_and_its_result_is_collected_once(
    make: Callable[..., ForecastRunner],
) -> None:
    runner = make()
    assert runner.submit_forecast(request(metrics=("a", "b", "c")))
    assert runner.knows("forecast", "p", 1)
    [out] = wait_for(runner, "p")
    assert (out.kind, out.generation, out.error) == ("forecast", 1, None)
    assert isinstance(out.value, ForecastResult)
    assert [p.mean for p in out.value.predictions] == [9.0, 9.0, 9.0]
    # Computed in a child, not in this process, at a lower CPU priority than this process's.
    assert out.value.notes[0] != f"pid {os.getpid()}"
    assert out.value.notes[1] == f"nice {min(19, os.nice(0) + CHILD_NICENESS)}"
    assert runner.collect("p") == [] and not runner.knows("forecast", "p", 1)


def test_a_job_submitted_twice_runs_once(make: Callable[..., ForecastRunner]) -> None:
    runner = make()
    assert runner.submit_forecast(request()) and runner.submit_forecast(request())
    wait_for(runner, "p")
    time.sleep(0.5)
    assert runner.collect("p") == []


def test_a_failure_in_the_child_is_one_line_naming_the_error_and_where(
    make: Callable[..., ForecastRunner],
) -> None:
    runner = make(helpers.failing_forecaster)
    runner.submit_forecast(request())
    [out] = wait_for(runner, "p")
    assert out.value is None and out.error is not None
    assert out.error.startswith("ValueError: no team 'ghost' in p (at ")
    assert "helpers.py:" in out.error and "\n" not in out.error


def test_a_hung_forecast_is_killed_at_its_timeout_and_the_next_job_runs(
    make: Callable[..., ForecastRunner],
) -> None:
    runner = make(helpers.hanging_forecaster, timeout_s=1.5)
    runner.submit_forecast(request(1))
    started = time.monotonic()
    [out] = wait_for(runner, "p")
    assert out.error == "timed out after 1.5s"
    assert time.monotonic() - started < 30
    runner.timeout_s = 60.0  # the next job (a child's start-up alone takes a second or two under load)
    assert runner.submit_score(ScoreRequest("p", 1, 0.0, 1.0, ("x", "y"), "nvidia.com/gpu", ("t",)))
    [scored] = wait_for(runner, "p")
    assert scored.value == {"x": 4.2, "y": None}


def test_a_child_that_dies_is_reported_with_its_exit_code(make: Callable[..., ForecastRunner]) -> None:
    runner = make(helpers.dying_forecaster)
    runner.submit_forecast(request())
    [out] = wait_for(runner, "p")
    assert out.error == "the forecast process died (exit code 3)"


def test_the_queue_is_bounded_and_a_full_queue_refuses(make: Callable[..., ForecastRunner]) -> None:
    runner = make(helpers.hanging_forecaster, timeout_s=60.0, max_queue=2)
    assert runner.submit_forecast(request(1))
    deadline = time.monotonic() + 30
    while runner._current is None and time.monotonic() < deadline:  # the worker took it: it runs
        time.sleep(0.05)
    accepted = [runner.submit_forecast(request(g)) for g in range(2, 6)]
    # Two wait behind the running one; the rest are refused, not queued without bound.
    assert accepted == [True, True, False, False]


def test_closing_kills_the_job_running(make: Callable[..., ForecastRunner]) -> None:
    runner = make(helpers.hanging_forecaster, timeout_s=300.0)
    runner.submit_forecast(request())
    deadline = time.monotonic() + 30
    while runner._current is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc = runner._current
    assert proc is not None
    started = time.monotonic()
    runner.close()
    proc.join(10)
    assert not proc.is_alive() and time.monotonic() - started < 10
