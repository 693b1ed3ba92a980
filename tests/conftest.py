"""Shared pytest configuration: hypothesis profiles.

``default`` keeps the suite fast on a 2-core machine; ``thorough`` (HYPOTHESIS_PROFILE=thorough)
explores more examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# The ledger's real PostgreSQL server and database fixtures (tests/ledger_db.py); a real Prometheus and a
# DCGM-format exporter for the telemetry tests (tests/prometheus_server.py).
pytest_plugins = ("tests.ledger_db", "tests.prometheus_server")

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
