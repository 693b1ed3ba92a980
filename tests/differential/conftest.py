"""The differential suite runs against the real control plane: every test here is marked
``integration`` and shares the session's control-plane pool with tests/integration
(tests/integration/controlplanes.py), so the default control plane is started once per session
and at most one extra (the fair-sharing one) runs at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import ControlPlane
from tests.differential.report import COLLECTED, lines, summarize
from tests.integration.controlplanes import POOL, binaries_or_skip

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection, so `-m 'not integration'` sees the mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if COLLECTED:
        terminalreporter.section("differential: the model against the real Kueue")
        for line in lines(summarize(COLLECTED)):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    del session, exitstatus
    POOL.stop_all()


@pytest.fixture(scope="module")
def differential_control_plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The pool's control plane for a mode (indirect param: classical | fair-sharing)."""
    from tests.differential.targets import CONTROL_PLANE

    return POOL.get(CONTROL_PLANE[str(request.param)], binaries_or_skip())
