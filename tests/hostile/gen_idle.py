"""Hostile cases of spec.idle (idle-GPU reclamation, fairshare/policy/idle_spec.py) under `qm policy check`
and `qm policy render`, and of `qm run --prometheus-url`: one edit or one bad flag per case, its expected line
computed from the edit (the field, the value, the rule), never by running `qm`. The PromQL answers the
operator reads are hostile input too: tests/unit/operator/test_telemetry_answers.py.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from .gen_hardening import BASE, BOOLEAN, DURATION, INTEGER, TEN_YEARS, _dump, _line, _shown
from .generator import TARGETS, Case

SEED = 20261206
VALID: dict[str, Any] = {"enabled": True, "dryRun": True, "thresholdPercent": 5, "window": "30m",
                         "grace": "15m", "scrapeInterval": "30s", "staleAfterScrapes": 3}
METRICS = "Input should be 'DCGM_FI_DEV_GPU_UTIL' or 'DCGM_FI_PROF_GR_ENGINE_ACTIVE'"
URL = "must be an http(s) URL of a Prometheus, e.g. http://prometheus.monitoring:9090"
BAD_URLS = ("ftp://prometheus:9090", "prometheus:9090", "http://", "http:// prometheus", "http://p:9090/?q=1",
            "https://p#frag", "file:///etc/passwd", "javascript:alert(1)", "http://a b")

Edit = tuple[str, dict[str, Any], str, str, object]


def _idle(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"]["idle"] = {**VALID, **fields}
    return doc


def _nested(key: str, **fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"]["idle"] = {**VALID, key: fields}
    return doc


def idle_fields(rng: random.Random) -> list[Edit]:
    out: list[Edit] = []
    for v in (0, -1, -rng.randrange(2, 10**6)):
        out.append((f"idle thresholdPercent {v}", _idle(thresholdPercent=v), "spec.idle.thresholdPercent",
                    "Input should be greater than or equal to 1", v))
    for v in (101, rng.randrange(102, 10**9)):
        out.append((f"idle thresholdPercent {v}", _idle(thresholdPercent=v), "spec.idle.thresholdPercent",
                    "Input should be less than or equal to 100", v))
    for v in ("5", "5%", 5.5, True):
        out.append((f"idle thresholdPercent {v!r}", _idle(thresholdPercent=v), "spec.idle.thresholdPercent",
                    INTEGER, v))
    for v in (0, 101, 10**6):
        msg = ("Input should be greater than or equal to 1" if v < 1
               else "Input should be less than or equal to 100")
        out.append((f"idle staleAfterScrapes {v}", _idle(staleAfterScrapes=v), "spec.idle.staleAfterScrapes",
                    msg, v))
    for field in ("enabled", "dryRun"):
        for v in ("yes", "on", 1, "True"):
            out.append((f"idle {field} {v!r}", _idle(**{field: v}), f"spec.idle.{field}", BOOLEAN, v))
    for v in ("DCGM_FI_DEV_FB_USED", "dcgm_fi_dev_gpu_util", "", "GPU_UTIL"):
        out.append((f"idle metric {v!r}", _idle(metric=v), "spec.idle.metric", METRICS, v))
    for field in ("window", "grace", "scrapeInterval"):
        for v in ("forever", "30", "1h 30m", "-5m", "12h1d"):
            out.append((f"idle {field} {v!r}", _idle(**{field: v}), f"spec.idle.{field}", DURATION, v))
        v = f"{rng.randrange(3651, 10**9)}d"
        out.append((f"idle {field} {v}", _idle(**{field: v}), f"spec.idle.{field}", TEN_YEARS, v))
    for field in ("scrapeInterval", "window"):
        v = rng.choice(["0s", "0ms", "0m"])
        out.append((f"idle {field} {v} (zero)", _idle(**{field: v}), f"spec.idle.{field}",
                    f"{field} must be positive", v))
    # A window shorter than staleAfterScrapes x scrapeInterval is never seen whole.
    for scrape, n in ((30, 3), (60, 5), (10, rng.randrange(7, 50))):
        window = f"{scrape * n - 1}s"
        doc = _idle(window=window, scrapeInterval=f"{scrape}s", staleAfterScrapes=n)
        out.append((f"idle window {window} under {n} x {scrape}s", doc, "spec.idle.window",
                    f"window must be at least staleAfterScrapes x scrapeInterval ({scrape * n}s): a shorter "
                    "window is never seen whole", window))
    for v in ("0s", "0ms"):
        out.append((f"idle budget.window {v}", _nested("budget", window=v), "spec.idle.budget.window",
                    "window must be positive", v))
        out.append((f"idle prometheus.timeout {v}", _nested("prometheus", timeout=v),
                    "spec.idle.prometheus.timeout", "timeout must be positive", v))
    for v in (-1, 10001):
        msg = ("Input should be greater than or equal to 0" if v < 0
               else "Input should be less than or equal to 10000")
        out.append((f"idle budget.maxVictims {v}", _nested("budget", maxVictims=v),
                    "spec.idle.budget.maxVictims", msg, v))
    for v in ("forever", "8 hours"):
        out.append((f"idle keep.maxDuration {v!r}", _nested("keep", maxDuration=v),
                    "spec.idle.keep.maxDuration", DURATION, v))
    for v in BAD_URLS:
        out.append((f"idle prometheus.url {v!r}", _nested("prometheus", url=v), "spec.idle.prometheus.url",
                    URL, v))
    for v in ("bad resource", "nvidia.com/", "/gpu"):
        out.append((f"idle resource {v!r}", _idle(resource=v), "spec.idle.resource",
                    "must be a resource name such as cpu, memory or nvidia.com/gpu", v))
    for typo in ("enable", "threshold", "dry_run", "stale"):
        doc = _idle()
        doc["spec"]["idle"][typo] = True
        out.append((f"idle unknown field {typo}", doc, f"spec.idle.{typo}",
                    "unknown field (check its spelling and camelCase)", None))
    return out


def policy_cases(rng: random.Random) -> Iterator[Case]:
    edits = idle_fields(rng)
    for t in (x for x in TARGETS if x.command.startswith("policy")):
        for id_, doc, field, message, value in edits:
            name = doc["metadata"]["name"]
            got = "" if value is None else f" (got {_shown(value)})"
            yield t.case(
                id_, _dump(doc), _line(f"document 1 (QuotaPolicy {name}): field {field}: {message}{got}")
            )


def run_url_cases(rng: random.Random) -> Iterator[Case]:
    values = [*BAD_URLS, "http://" + "p" * rng.randrange(2100, 4000)]
    for i, value in enumerate(values):
        yield Case(f"run --prometheus-url {value[:40]!r} ({i})", "run", ("run", f"--prometheus-url={value}"),
                   stderr=f"qm run: error: argument --prometheus-url: not an http(s) URL such as "
                   f"http://prometheus:9090: {value[:80]!r}\n")


def generate(seed: int = SEED) -> list[Case]:
    """Every case of this module, in a stable order, ids unique."""
    rng = random.Random(seed)
    cases = [*policy_cases(rng), *run_url_cases(rng)]
    assert len({c.id for c in cases}) == len(cases)
    return cases
