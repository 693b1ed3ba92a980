"""Callables the forecast runner's tests hand it: module-level (a spawned child process imports them by
name), each doing something real: compute, raise, hang, die."""

from __future__ import annotations

import os
import time

from queue_manager.forecast import ForecastRequest, ForecastResult, Prediction, ScoreRequest


def square_forecaster(request: ForecastRequest) -> ForecastResult:
    """A forecast whose value is computed from the request (the metric count squared, per metric), so a
    result handed to the wrong request or lost in the pipe is seen."""
    n = float(len(request.metrics))
    values = tuple(Prediction(m, "h", n * n, 0.5, n * n - 1, n * n + 1) for m in request.metrics)
    return ForecastResult(values, request.replications, "nvidia.com/gpu",
                          (f"pid {os.getpid()}", f"nice {os.nice(0)}"))


def failing_forecaster(request: ForecastRequest) -> ForecastResult:
    raise ValueError(f"no team 'ghost' in {request.policy}")


def hanging_forecaster(request: ForecastRequest) -> ForecastResult:
    time.sleep(300)
    raise AssertionError("not reached")


def dying_forecaster(request: ForecastRequest) -> ForecastResult:
    os._exit(3)


def constant_scorer(request: ScoreRequest) -> dict[str, float | None]:
    """Observes 4.2 for every metric but the last, which it has no value for."""
    out: dict[str, float | None] = {m: 4.2 for m in request.metrics}
    if request.metrics:
        out[request.metrics[-1]] = None
    return out
