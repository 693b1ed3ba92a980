"""Run many (variant, replication) simulations: serially, on a local process pool, or as Ray tasks.

Every run is independent and deterministic: its arrivals come from ``RandomStreams(seed,
replication)`` (``build_jobs``) and its decisions from the core, never from the process it runs
in, so the results are identical whichever executor runs them, and they come back in the order
of the jobs given (not of completion).

    results = run_jobs(jobs, executor="local", workers=None)      # all cores (os.cpu_count())
    results = run_jobs(jobs, workers=1)                            # serial, in this process
    results = run_jobs(jobs, executor="ray", address="auto")      # a Ray cluster (KubeRay, ...)

``run_job`` is the picklable top-level function each worker calls: it takes a :class:`RunJob`
(the variant's resolved scenario, the replication, the base directory, and the workload list or
None to build it in the worker) and returns the :class:`~simulations.record.RunResult` with its
wall time. Ray is an optional extra: ``pip install 'queue-manager[ray]'``.

A Ray sweep carries its data and its code (``ship``, ``runtime_env``): the scenarios are made portable
on the submitting host (policies and manifests inline, trace files in one bundle put in Ray's object
store; simulations/shipping.py), and this project's packages reach the workers as ``py_modules``, so a
node that has neither the scenario's folder nor this repository runs it.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from fairshare.errors import InputError, Location
from fairshare.snapshot import FAST, FastPaths

from .jobs import JobSpec
from .model import simulate_run
from .record import RunResult
from .scenario import Scenario
from .shipping import Bundle, portable, unpacked

Executor = Literal["local", "ray"]
T = TypeVar("T")
# (runs finished, runs in all, the job just finished)
ProgressCallback = Callable[[int, int, "RunJob"], None]


@dataclass(frozen=True)
class RunJob:
    """One replication of one variant, as a worker needs it (picklable)."""

    variant: str
    replication: int
    scenario: Scenario  # the variant's resolved scenario
    base_dir: Path  # trace paths and manifests are relative to it
    jobs: tuple[JobSpec, ...] | None = None  # None: built in the worker (build_jobs), from the seed
    core: FastPaths = FAST  # the scheduling core's exact fast paths, or REFERENCE

    @property
    def label(self) -> str:
        return f"{self.variant} #{self.replication + 1}"


def run_job(job: RunJob) -> RunResult:
    """Run one job (in whichever process gets it); the result carries its wall seconds."""
    # (imported here: the runner, which builds the workload lists, is the executor's caller)
    from .runner import build_jobs

    jobs = list(job.jobs) if job.jobs is not None else build_jobs(job.scenario, job.base_dir, job.replication)
    started = time.perf_counter()
    result = simulate_run(
        job.scenario, jobs, base_dir=job.base_dir, variant=job.variant, replication=job.replication,
        core=job.core,
    )
    result.wall_seconds = time.perf_counter() - started
    return result


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def run_jobs(
    jobs: Sequence[RunJob],
    *,
    executor: Executor = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> list[RunResult]:
    """Run every job (:func:`run_job`); results in the order of ``jobs``.

    ``executor="local"``: ``workers`` processes (default: all cores; 1 = serially in this process).
    ``executor="ray"``: one Ray task per job on the cluster at ``address`` (default: a running
    ``ray.init`` of this process, else a local instance)."""
    return map_jobs(run_job, jobs, executor=executor, workers=workers, address=address, progress=progress)


def map_jobs(
    function: Callable[[RunJob], T],
    jobs: Sequence[RunJob],
    *,
    executor: Executor = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: ProgressCallback | None = None,
) -> list[T]:
    """``function`` of every job, as :func:`run_jobs` runs them; ``function`` must be a picklable top-level
    callable (the runner's ``run_brief`` runs a job and summarizes it where it ran)."""
    if workers is not None and workers < 1:
        raise InputError("must be at least 1", location=Location(field="--jobs"), value=workers)
    if executor == "ray":
        return _run_ray(jobs, address, progress, function)
    if executor != "local":
        raise InputError("must be local or ray", location=Location(field="--executor"), value=executor)
    n = min(workers or default_workers(), max(1, len(jobs)))
    if n == 1:
        return _run_serial(jobs, progress, function)
    return _run_pool(jobs, n, progress, function)


def _run_serial(
    jobs: Sequence[RunJob], progress: ProgressCallback | None, function: Callable[[RunJob], T]
) -> list[T]:
    out = []
    for i, job in enumerate(jobs):
        out.append(function(job))
        if progress is not None:
            progress(i + 1, len(jobs), job)
    return out


def _run_pool(
    jobs: Sequence[RunJob],
    workers: int,
    progress: ProgressCallback | None,
    function: Callable[[RunJob], T],
) -> list[T]:
    results: list[T | None] = [None] * len(jobs)
    # The first failure (in job order among those finished) is raised as the serial run would raise it; the
    # jobs still running are stopped with the pool (stream_pool).
    with closing(stream_pool(function, jobs, workers)) as stream:
        for done_count, (i, fut) in enumerate(stream, start=1):
            results[i] = fut.result()
            if progress is not None:
                progress(done_count, len(jobs), jobs[i])
    return [r for r in results if r is not None]


def stream_pool(
    function: Callable[[RunJob], T], jobs: Sequence[RunJob], workers: int
) -> Generator[tuple[int, Future[T]], None, None]:
    """Each job's index and finished future as the jobs finish (those finished together in job order), on a
    pool of `workers` processes that starts them in the order given. Leaving the iteration early (a break,
    an exception, close()) stops the pool at once: the jobs not started are cancelled and those running are
    killed, not waited for (run_scenario starts a later look's runs on the cores an earlier look leaves idle,
    and drops them when the stop rule decides at that earlier look)."""
    pool = ProcessPoolExecutor(max_workers=workers)
    pending: dict[Future[T], int] = {}
    try:
        pending = {pool.submit(function, job): i for i, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: pending[f]):
                yield pending.pop(fut), fut
    finally:
        if pending:
            for fut in pending:
                fut.cancel()
            # (ProcessPoolExecutor has no public way to stop running work before Python 3.14's
            # terminate_workers(); its worker processes are what that method terminates)
            for process in list((pool._processes or {}).values()):
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _run_ray(
    jobs: Sequence[RunJob],
    address: str | None,
    progress: ProgressCallback | None,
    function: Callable[[RunJob], T],
) -> list[T]:
    ray = require_ray(address)
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     runtime_env=runtime_env(function))
        except (ConnectionError, RuntimeError, ValueError) as err:  # what ray.init raises for an address
            raise InputError(f"cannot connect to a Ray cluster: {_first_line(err)}",
                             location=Location(field="--address"), value=address) from None
    shipped, bundle = ship(jobs)  # read here, before any task starts: bad input is one line, nothing runs
    data = ray.put(bundle)  # once for the whole sweep, fetched by each node that runs a task
    # (Ray takes py_modules folders only for a whole job, at ray.init: a process that started Ray itself
    # passes runtime_env(function) there if its workers lack this project)
    task = ray.remote(run_shipped)
    refs: list[Any] = [task.remote(function, job, data) for job in shipped]
    index = {ref: i for i, ref in enumerate(refs)}
    results: list[T | None] = [None] * len(jobs)
    waiting = list(refs)
    done_count = 0
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        for ref in ready:
            i = index[ref]
            results[i] = ray.get(ref)
            done_count += 1
            if progress is not None:
                progress(done_count, len(jobs), jobs[i])
    return [r for r in results if r is not None]


def ship(jobs: Sequence[RunJob]) -> tuple[list[RunJob], Bundle]:
    """The jobs as a worker on another machine runs them: every scenario :func:`portable` (its policies and
    manifests inline, its trace files in the one returned bundle), no path of this host left in them."""
    bundle = Bundle()
    cache: dict[tuple[int, Path], Scenario] = {}  # the variants' runs share their scenario object
    out = []
    for job in jobs:
        key = (id(job.scenario), job.base_dir)
        if key not in cache:
            cache[key] = portable(job.scenario, job.base_dir, bundle)
        out.append(replace(job, scenario=cache[key], base_dir=Path(".")))
    return out, bundle


def run_shipped(function: Callable[[RunJob], T], job: RunJob, bundle: Bundle) -> T:
    """A Ray task: ``function`` of a shipped job, its trace files read from the bundle, written into a folder
    of this worker (Ray resolves ``bundle`` from its object store before the call)."""
    return function(replace(job, base_dir=unpacked(bundle)))


def runtime_env(function: Callable[..., object]) -> dict[str, Any]:
    """What Ray installs on every worker before a task runs: this project's packages as ``py_modules`` (the
    simulator, the pure core it imports, and the package of ``function`` if another), so a node without
    this repository runs the sweep; its third-party dependencies (pydantic, PyYAML, ...) come with the
    node's image. ``QM_CORE`` goes along when set here, so every worker takes the same core."""
    import fairshare
    import simulations

    modules = {fairshare.__name__: fairshare, simulations.__name__: simulations}
    top = function.__module__.partition(".")[0]
    if top not in modules and top != "__main__":  # (a function of __main__ is pickled by value)
        package = importlib.import_module(top)
        if hasattr(package, "__path__"):  # a package's folder; a lone module is the installed code's
            modules[top] = package
    env: dict[str, Any] = {"py_modules": [str(Path(str(m.__file__)).parent) for m in modules.values()]}
    if os.environ.get("QM_CORE"):
        env["env_vars"] = {"QM_CORE": os.environ["QM_CORE"]}
    return env


def require_ray(address: str | None = None) -> Any:
    """The `ray` module, or the one line saying how to install it (Ray is an optional extra); when this
    process has no Ray yet, `address` must answer (checked before a scenario is read)."""
    try:
        import ray
    except ImportError:
        raise InputError(
            "the Ray executor needs Ray: pip install 'queue-manager[ray]'",
            location=Location(field="--executor"),
            value="ray",
        ) from None
    if not ray.is_initialized():
        if address is None and os.environ.get("RAY_ADDRESS"):
            # ray.init() with no address reads RAY_ADDRESS, and retries a port that refuses for minutes
            # (issue 33): the same check, naming the variable.
            _reachable(os.environ["RAY_ADDRESS"], field="RAY_ADDRESS")
        else:
            _reachable(address)
    return ray


def _reachable(address: str | None, timeout: float = 5.0, *, field: str = "--address") -> None:
    """A `host:port` (or `ray://host:port`) address answers a TCP connect: ray.init retries an address that
    does not for minutes, logging from its C++ core, before it gives up."""
    if address is None or address == "auto" or ":" not in address:
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        number = int(port) if port.isascii() and port.isdigit() else -1
        if not 0 < number < 65536:
            raise ValueError(port)
        socket.create_connection((host.strip("[]"), number), timeout=timeout).close()  # [::1]:6379
    except (ValueError, OverflowError):  # not a number, or not a port (OverflowError: over 65535)
        raise InputError("must be auto, HOST:PORT or ray://HOST:PORT", location=Location(field=field),
                         value=address) from None
    except OSError as err:
        raise InputError(f"no Ray cluster answers there ({err.strerror or err})",
                         location=Location(field=field), value=address) from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


@contextmanager
def progress_bar(
    total: int, *, enabled: bool | None = None, label: str = "runs"
) -> Iterator[ProgressCallback]:
    """A rich progress bar over all runs on stderr (shown when stderr is a terminal, or when forced)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    show = console.is_terminal if enabled is None else enabled
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        disable=not show,
        transient=False,
    )
    task = bar.add_task(label, total=total, last="")

    def update(done: int, _total: int, job: RunJob) -> None:
        bar.update(task, completed=done, last=job.label)

    with bar:
        yield update
