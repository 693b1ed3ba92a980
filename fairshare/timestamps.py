"""The one formatter of times for people and the API: RFC 3339 in UTC to the second
(`2026-12-05T11:32:36Z`), as Kubernetes writes metav1.Time. Status fields, Events, reports and the CLIs all
format here; reading a time from a manifest is `fairshare.manifests.parse_time`."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
