"""Fixtures for tests against the real control plane (etcd + kube-apiserver + Kueue).

Every test under tests/integration/ is marked ``integration``. When the binaries are not built
(`make controlplane`) the tests are skipped locally and FAIL with CI=true. The API is documented
in docs/controlplane.md.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from tests.integration.controlplanes import (
    KUEUE_CONFIGS,
    POOL,
    WITH_NODES,
    ControlPlanePool,
    binaries_or_skip,
    ci,
)

_HERE = Path(__file__).resolve().parent
T = TypeVar("T")

ApiClientFactory = Callable[..., k8s.ApiClient]
KubeconfigMinter = Callable[..., Path]
WaitUntil = Callable[..., object]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection, so `-m 'not integration'` sees the mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


# The modules that take longest, longest first (serial CI of 2026-12-07: the fault tests about 510 s, the
# two journeys 330 s, fidelity 175 s, ...). `make test` runs the integration tests on 2 processes, a module
# on one (`--dist loadfile --no-loadscope-reorder`), handed out in collection order: starting these first
# keeps the other process busy with the short modules instead of idle behind a long one at the end. A hint
# for the order only: a module missing here, or renamed, runs later and nothing else changes.
SLOW_FIRST = (
    "test_operator_faults.py",
    "test_journey.py",
    "test_ledger_operator_hold.py",
    "test_fidelity.py",
    "test_ledger_operator_deprioritize.py",
    "test_plan.py",
    "test_ledger_operator_budget.py",
    "test_ledger_operator.py",
    "test_docs_runnable.py",
    "test_ledger_operator_faults.py",
    "test_twin.py",
)


class _SlowFirst:
    """Sorts the integration modules by SLOW_FIRST (stable: the order within a module, and of the others,
    is kept), after pytest's own reordering by fixture scope (hence a plugin: this conftest's hook of the
    same name runs first)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        rank = {name: i for i, name in enumerate(SLOW_FIRST)}
        items.sort(key=lambda item: rank.get(Path(str(item.path)).name, len(rank))
                   if _HERE in Path(str(item.path)).resolve().parents else len(rank))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_SlowFirst(), "queue-manager-slow-first")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop every control plane of the pool (idempotent; tests/differential's conftest calls it too)."""
    del session, exitstatus
    POOL.stop_all()


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    """One control plane for the whole session (started on first use, stopped at the end), running
    Kueue with its default Configuration.

    QM_KEEP_LOGS=1 keeps its workdir (logs/<component>.log) after the session.
    """
    return POOL.default(binaries_or_skip())


@pytest.fixture(scope="session")
def control_plane_pool() -> ControlPlanePool:
    """The session's pool (tests/integration/controlplanes.py): ``pool.get(name, binaries, config=None)``
    gives a control plane per Kueue configuration, at most one besides the default at a time."""
    binaries_or_skip()
    return POOL


@pytest.fixture(scope="module", params=sorted(KUEUE_CONFIGS))
def kueue_control_plane(request: pytest.FixtureRequest) -> ControlPlane:
    """A control plane per named Kueue configuration (``KUEUE_CONFIGS``: ``default``,
    ``fair-sharing``); parametrize indirectly to choose, e.g.
    ``@pytest.mark.parametrize("kueue_control_plane", ["fair-sharing"], indirect=True)``.
    Module-scoped params make pytest group a module's tests by configuration. The pool keeps an
    extra control plane alive until another configuration is asked for (at most one extra at a
    time) or the session ends; module scope means a cached value is never a stopped one."""
    return POOL.get(str(request.param), binaries_or_skip())


@pytest.fixture(scope="module")
def control_plane_with_nodes() -> ControlPlane:
    """A second control plane, started only when a test asks for it, that also runs
    kube-controller-manager, kube-scheduler and KWOK with 2 fake GPU nodes (8 nvidia.com/gpu
    each, label ``type=kwok``): Jobs get pods that are scheduled, "run" and complete (see
    ``devcluster.nodes.run_for``). It is the pool's extra control plane (stopped when another
    configuration is asked for)."""
    binaries = binaries_or_skip()
    if not binaries.has_nodes_support:
        reason = "kube-controller-manager/kube-scheduler/KWOK not built (`make controlplane`)"
        if ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return POOL.get(WITH_NODES, binaries, {}, fake_nodes=2)


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    """Path of the admin kubeconfig (system:masters)."""
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def api_client_factory(kubeconfig: Path) -> ApiClientFactory:
    """``factory(kubeconfig_path=None) -> kubernetes.client.ApiClient``; admin when no path is given."""

    def factory(path: Path | None = None) -> k8s.ApiClient:
        return k8s_config.new_client_from_config(config_file=str(path or kubeconfig))

    return factory


@pytest.fixture(scope="session")
def api_client(api_client_factory: ApiClientFactory) -> Iterator[k8s.ApiClient]:
    """A shared admin ApiClient."""
    client = api_client_factory()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def mint_kubeconfig(control_plane: ControlPlane) -> KubeconfigMinter:
    """``mint(user, groups=()) -> Path``: a kubeconfig for a restricted identity (RBAC applies)."""

    def mint(user: str, groups: tuple[str, ...] | list[str] = ()) -> Path:
        return control_plane.mint_kubeconfig(user, list(groups))

    return mint


@pytest.fixture
def namespace(request: pytest.FixtureRequest, api_client: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace named after the test; deleted afterwards.

    There is no kube-controller-manager, so the deleted namespace stays Terminating with its
    objects: use unique names for cluster-scoped objects (ClusterQueues, flavors) too.
    """
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base or 't'}-{uuid.uuid4().hex[:6]}"
    core = k8s.CoreV1Api(api_client)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture(scope="session")
def wait_until() -> WaitUntil:
    """``wait_until(fn, timeout=10.0, what="...")``: poll ``fn`` until it returns a truthy value and
    return that value; fail the test with ``what`` and the last value on timeout. No fixed sleeps."""

    def wait(fn: Callable[[], T], timeout: float = 10.0, what: str = "condition") -> T:
        deadline = time.monotonic() + timeout
        delay = 0.05
        last: T = fn()
        while not last:
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
            last = fn()
        return last

    return wait
