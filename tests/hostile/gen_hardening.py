"""Hostile cases of issue 33's surfaces (items 1, 2 and 6): the policy fields added since the first hardening
pass (spec.budgets, spec.ledger, spec.forecasts), what Kueue's webhooks refuse of the rendered objects (label
keys and values, taints, tolerations, weights), the bounds of every duration, strict types (`dryRun: "yes"`),
budgets in scenarios (and their wake-ups), the `qm run` duration and port flags, and `qm plan --fail-if`.

As in generator.py: one edit of a valid file (tests/hostile/bases.py) or one bad flag per case, its expected
line computed from the edit (which field, which value, which bound), never by running `qm`; the generator and
the program share no code but the message wording. The seed alone decides the cases.
"""

from __future__ import annotations

import copy
import random
import string
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from simulations.metrics import KINDS

from .bases import KUBECONFIG, POLICY, SCENARIO
from .generator import DURATION_EXAMPLES, GUARD_TAIL, TARGETS, Case, _about

SEED = 20261205
BASE: dict[str, Any] = yaml.safe_load(POLICY)
TEN_YEARS = "must be at most 3650d (ten years)"
DAY, TEN_YEARS_S = 86400, 3650 * 86400

# The wording of the messages (fairshare/policy/loader.py, names.py, semantics.py).
LABEL_KEY = (
    "must be a label key: an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, "
    "'-', '_' or '.' (e.g. cost-center, example.com/project)"
)
LABEL_VALUE = (
    "must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit"
)
PREFIX = "the prefix of a label key (before '/') must be at most 253 characters"
DURATION = f"must be a duration such as {DURATION_EXAMPLES}"
QUANTITY = "must be a non-negative Kubernetes quantity such as 4, 500m, 16Gi"
BOOLEAN, INTEGER = "must be true or false", "must be an integer"
METRICS = ("wait_mean", "wait_p50", "wait_p95", "never_admitted", "gpu_hours", "lost_gpu_hours")
METRIC_PATTERN = f"must be one of {', '.join(METRICS)}, optionally with [NAME]"

# Characters a label key or value never has; digits that are not ASCII (Arabic-Indic, fullwidth,
# Devanagari, superscript), which Python's int() and float() would read.
BAD_CHARS = " \t!@#$%^&*()+=[]{}|\\:;\"'<>,?~`é日€"
UNICODE_DIGITS = ("٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "०१२३४५६७८९", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _shown(value: object) -> str:
    """fairshare.errors._shown: a value quoted as repr, cut at 100 characters."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


def _line(text: str) -> str:
    return " ".join(text.split())  # InputError.one_line collapses whitespace


def _dump(doc: dict[str, Any]) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10_000).encode()


def _with(edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    edit(doc)
    return doc


def _word(rng: random.Random, lo: int = 1, hi: int = 12, alphabet: str = string.ascii_lowercase) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(lo, hi + 1)))


def _budget(**fields: Any) -> dict[str, Any]:
    budget: dict[str, Any] = {
        "name": "b",
        "selector": {"team": "research"},
        "period": {"rolling": "1h"},
        "limit": {"gpuHours": 10},
        "thresholds": [{"percent": 80, "action": "alert"}],
    }
    budget.update(fields)
    return budget


# ------------------------------------------------------------------ policy fields (qm policy check / render)
Edit = tuple[str, dict[str, Any], str, str, object]  # id, document, field, message, value (None: no value)


def _long_duration(rng: random.Random) -> str:
    """A duration past ten years in one of the grammar's forms (at most 32 characters)."""
    kind = rng.randrange(5)
    if kind == 0:
        return f"{rng.randrange(3651, 10**9)}d"
    if kind == 1:
        return f"{rng.randrange(522, 10**8)}w"
    if kind == 2:
        return f"{rng.randrange(87601, 10**12)}h"
    if kind == 3:
        return f"{rng.randrange(5256001, 10**14)}m"
    return f"3650d{rng.randrange(1, 1000)}ms"


def _short_duration(rng: random.Random, below_s: int) -> str:
    """A duration of the grammar shorter than `below_s` seconds (0 included)."""
    kind = rng.randrange(3)
    if kind == 0:
        return f"{rng.randrange(0, below_s)}s"
    if kind == 1:
        return f"{rng.randrange(0, below_s * 1000)}ms"
    return f"{rng.randrange(0, below_s)}.{rng.randrange(0, 10)}s"


def budget_fields(rng: random.Random) -> list[Edit]:
    out: list[Edit] = []
    for i in range(14):
        value = _short_duration(rng, 60)
        out.append(
            (
                f"budget rolling {value} under a minute ({i})",
                _with(lambda d, v=value: d["spec"].update(budgets=[_budget(period={"rolling": v})])),
                "spec.budgets[0].period.rolling",
                "a rolling window must be at least 1m",
                value,
            )
        )
    for i in range(14):
        value = _long_duration(rng)
        out.append(
            (
                f"budget rolling {value} past ten years ({i})",
                _with(lambda d, v=value: d["spec"].update(budgets=[_budget(period={"rolling": v})])),
                "spec.budgets[0].period.rolling",
                TEN_YEARS,
                value,
            )
        )
    for i in range(6):
        zone = rng.choice(
            [
                "Mars/Olympus_Mons",
                "UTC+1",
                "Europe/Atlantis",
                "../../etc/passwd",
                "/etc/localtime",
                "Ut c",
                f"{_word(rng)}/{_word(rng)}",
            ]
        )
        out.append(
            (
                f"budget timeZone {zone!r} ({i})",
                _with(
                    lambda d, z=zone: d["spec"].update(
                        budgets=[_budget(period={"rolling": "1h", "timeZone": z})]
                    )
                ),
                "spec.budgets[0].period.timeZone",
                "not an IANA time zone (e.g. UTC, Europe/Paris)",
                zone,
            )
        )
    for i in range(8):
        value: object = rng.choice(["80", "eighty", True, False, 80.5, "8e1"])
        out.append(
            (
                f"budget threshold percent {value!r} ({i})",
                _with(
                    lambda d, v=value: d["spec"].update(
                        budgets=[_budget(thresholds=[{"percent": v, "action": "alert"}])]
                    )
                ),
                "spec.budgets[0].thresholds[0].percent",
                INTEGER,
                value,
            )
        )
    for i in range(6):
        value = rng.choice(["yes", "no", "true", "True", 1, 0, "on"])
        out.append(
            (
                f"budget dryRun {value!r} ({i})",
                _with(lambda d, v=value: d["spec"].update(budgets=[_budget(dryRun=v)])),
                "spec.budgets[0].dryRun",
                BOOLEAN,
                value,
            )
        )
    for i in range(8):
        value = _word(rng, 1, 8) + rng.choice(BAD_CHARS) + _word(rng, 1, 8)
        out.append(
            (
                f"budget project {value!r} ({i})",
                _with(
                    lambda d, v=value: d["spec"].update(
                        budgets=[_budget(selector={"team": "research", "project": v})]
                    )
                ),
                "spec.budgets[0].selector.project",
                LABEL_VALUE,
                value,
            )
        )
    return out


def _key_with_a_bad_character(rng: random.Random) -> str:
    key = _word(rng, 2, 10)
    at = rng.randrange(1, len(key))
    return key[:at] + rng.choice(BAD_CHARS) + key[at:]


def _long_prefix(rng: random.Random) -> str:
    """A label key whose DNS-subdomain prefix is longer than 253 characters (the whole key fits 317)."""
    labels, size = [], 0
    while size <= 253:
        label = _word(rng, 20, 60)
        labels.append(label)
        size += len(label) + 1
    prefix = ".".join(labels)[: rng.randrange(254, 300)].rstrip(".")
    if len(prefix) < 254:
        prefix += "a" * (254 - len(prefix))
    return f"{prefix}/{_word(rng, 1, 10)}"


def ledger_fields(rng: random.Random) -> list[Edit]:
    out: list[Edit] = []
    for i in range(12):
        key = _key_with_a_bad_character(rng)
        out.append(
            (
                f"ledger label {key!r} ({i})",
                _with(lambda d, k=key: d["spec"].update(ledger={"labels": [k]})),
                "spec.ledger.labels[0]",
                LABEL_KEY,
                key,
            )
        )
    for i in range(8):
        key = _long_prefix(rng)
        out.append(
            (
                f"ledger label prefix of {key.index('/')} characters ({i})",
                _with(lambda d, k=key: d["spec"].update(ledger={"labels": [k]})),
                "spec.ledger.labels[0]",
                PREFIX,
                key,
            )
        )
    for i in range(6):
        key = f"example.com/{_word(rng, 64, 100, string.ascii_lowercase)}"
        out.append(
            (
                f"ledger label name of {len(key) - 12} characters ({i})",
                _with(lambda d, k=key: d["spec"].update(ledger={"labels": [k]})),
                "spec.ledger.labels[0]",
                LABEL_KEY,
                key,
            )
        )
    for i in range(8):
        key = rng.choice(["team", "project", "cost-center", "example.com/owner", _word(rng)])
        others = [_word(rng, 3, 6) + str(n) for n in range(rng.randrange(0, 4))]
        labels = [key, *others, key]
        out.append(
            (
                f"ledger label {key!r} listed twice ({i})",
                _with(lambda d, ls=labels: d["spec"].update(ledger={"labels": ls})),
                f"spec.ledger.labels[{len(labels) - 1}]",
                "listed twice",
                key,
            )
        )
    for i in range(6):
        value = _long_duration(rng)
        out.append(
            (
                f"ledger retention {value} ({i})",
                _with(lambda d, v=value: d["spec"].update(ledger={"retention": v})),
                "spec.ledger.retention",
                TEN_YEARS,
                value,
            )
        )
    return out


def forecast_fields(rng: random.Random) -> list[Edit]:
    out: list[Edit] = []
    for i in range(10):
        value = _short_duration(rng, 60)
        out.append(
            (
                f"forecast horizon {value} ({i})",
                _with(lambda d, v=value: d["spec"].update(forecasts={"horizon": v})),
                "spec.forecasts.horizon",
                "horizon must be at least 1m",
                value,
            )
        )
    for i in range(10):
        value = _long_duration(rng)
        out.append(
            (
                f"forecast horizon {value} ({i})",
                _with(lambda d, v=value: d["spec"].update(forecasts={"horizon": v})),
                "spec.forecasts.horizon",
                TEN_YEARS,
                value,
            )
        )
    for i in range(10):
        name = rng.choice(["wait_mean", "wait_p50", "wait_p95", "never_admitted"])
        metric = f"{name}[{_word(rng, 1, 20, string.ascii_lowercase + '-')}]"
        out.append(
            (
                f"forecast of {metric} (no such class) ({i})",
                _with(lambda d, m=metric: d["spec"].update(forecasts={"metrics": [m]})),
                "spec.forecasts.metrics[0]",
                f"{name}[...] names a priority class; known: none (spec.priorityClasses is empty)",
                metric,
            )
        )
    for i in range(10):
        name = rng.choice(["gpu_hours", "lost_gpu_hours"])
        team = _word(rng, 1, 20, string.ascii_lowercase + "-")
        if team == "research":
            team += "x"
        metric = f"{name}[{team}]"
        out.append(
            (
                f"forecast of {metric} (no such team) ({i})",
                _with(lambda d, m=metric: d["spec"].update(forecasts={"metrics": [m]})),
                "spec.forecasts.metrics[0]",
                f"{name}[...] names a team; known: research",
                metric,
            )
        )
    for i in range(6):
        metric = rng.choice(["wait_p99", "gpu_hour", "WAIT_P95", "wait_p95 ", "lost", "p95", _word(rng)])
        out.append(
            (
                f"forecast of {metric!r} (no such metric) ({i})",
                _with(lambda d, m=metric: d["spec"].update(forecasts={"metrics": [m]})),
                "spec.forecasts.metrics[0]",
                METRIC_PATTERN,
                metric,
            )
        )
    for i in range(4):
        metric = rng.choice(["wait_p95", "gpu_hours", "lost_gpu_hours", "gpu_hours[research]"])
        out.append(
            (
                f"forecast of {metric} twice ({i})",
                _with(lambda d, m=metric: d["spec"].update(forecasts={"metrics": [m, m]})),
                "spec.forecasts.metrics[1]",
                "listed twice",
                metric,
            )
        )
    for i in range(6):
        value = rng.choice(["yes", "no", 1, 0, "enabled", "null"])
        out.append(
            (
                f"forecasts enabled {value!r} ({i})",
                _with(lambda d, v=value: d["spec"].update(forecasts={"enabled": v})),
                "spec.forecasts.enabled",
                BOOLEAN,
                value,
            )
        )
    for i in range(4):
        value = rng.choice(["5", "five", True, 2.5])
        out.append(
            (
                f"forecast replications {value!r} ({i})",
                _with(lambda d, v=value: d["spec"].update(forecasts={"replications": v})),
                "spec.forecasts.replications",
                INTEGER,
                value,
            )
        )
    return out


def label_fields(rng: random.Random) -> list[Edit]:
    """What Kueue's ResourceFlavor webhook refuses, and the project label (a label key)."""
    out: list[Edit] = []
    flavor = "spec.flavors[0]"
    for i in range(10):
        key = _key_with_a_bad_character(rng)
        out.append(
            (
                f"nodeLabels key {key!r} ({i})",
                _with(lambda d, k=key: d["spec"]["flavors"][0].update(nodeLabels={k: "a100"})),
                f"{flavor}.nodeLabels[{key!r}]",
                LABEL_KEY,
                key,
            )
        )
    for i in range(6):
        key = _long_prefix(rng)
        out.append(
            (
                f"nodeLabels key prefix of {key.index('/')} characters ({i})",
                _with(lambda d, k=key: d["spec"]["flavors"][0].update(nodeLabels={k: "a100"})),
                f"{flavor}.nodeLabels[{key!r}]",
                PREFIX,
                key,
            )
        )
    for i in range(10):
        value = _word(rng, 1, 6) + rng.choice(BAD_CHARS) + _word(rng, 1, 6)
        out.append(
            (
                f"nodeLabels value {value!r} ({i})",
                _with(lambda d, v=value: d["spec"]["flavors"][0].update(nodeLabels={"gpu": v})),
                f"{flavor}.nodeLabels.gpu",
                LABEL_VALUE,
                value,
            )
        )
    for i in range(4):
        value = _word(rng, 64, 90)
        out.append(
            (
                f"nodeLabels value of {len(value)} characters ({i})",
                _with(lambda d, v=value: d["spec"]["flavors"][0].update(nodeLabels={"gpu": v})),
                f"{flavor}.nodeLabels.gpu",
                "String should have at most 63 characters",
                value,
            )
        )
    for i in range(3):
        labels = {f"k{j}": "" for j in range(rng.randrange(9, 40))}
        out.append(
            (
                f"{len(labels)} nodeLabels ({i})",
                _with(lambda d, ls=labels: d["spec"]["flavors"][0].update(nodeLabels=ls)),
                f"{flavor}.nodeLabels",
                "must have at most 8 entries",
                labels,
            )
        )
    for i in range(6):
        key = _key_with_a_bad_character(rng)
        out.append(
            (
                f"taint key {key!r} ({i})",
                _with(
                    lambda d, k=key: d["spec"]["flavors"][0].update(
                        nodeTaints=[{"key": k, "effect": "NoSchedule"}]
                    )
                ),
                f"{flavor}.nodeTaints[0].key",
                LABEL_KEY,
                key,
            )
        )
    for i in range(4):
        effect = rng.choice(["NoSchedule", "PreferNoSchedule", "NoExecute"])
        key = rng.choice(["nvidia.com/gpu", "dedicated", _word(rng)])
        out.append(
            (
                f"taint {key}:{effect} twice ({i})",
                _with(
                    lambda d, k=key, e=effect: d["spec"]["flavors"][0].update(
                        nodeTaints=[{"key": k, "effect": e}, {"key": k, "value": "x", "effect": e}]
                    )
                ),
                f"{flavor}.nodeTaints[1]",
                "taints must be unique by key and effect",
                f"{key}:{effect}",
            )
        )
    for i in range(4):
        value = _word(rng, 1, 8)
        out.append(
            (
                f"toleration Exists with value {value!r} ({i})",
                _with(
                    lambda d, v=value: d["spec"]["flavors"][0].update(
                        tolerations=[{"key": "k", "operator": "Exists", "value": v}]
                    )
                ),
                f"{flavor}.tolerations[0].value",
                "a toleration with operator Exists has no value",
                value,
            )
        )
    for i in range(3):
        seconds = rng.randrange(0, 10**6)
        out.append(
            (
                f"tolerationSeconds {seconds} with NoSchedule ({i})",
                _with(
                    lambda d, s=seconds: d["spec"]["flavors"][0].update(
                        tolerations=[
                            {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": s}
                        ]
                    )
                ),
                f"{flavor}.tolerations[0].tolerationSeconds",
                "tolerationSeconds needs effect NoExecute",
                seconds,
            )
        )
    out.append(
        (
            "toleration without key or Exists",
            _with(
                lambda d: d["spec"]["flavors"][0].update(tolerations=[{"operator": "Equal", "value": "x"}])
            ),
            f"{flavor}.tolerations[0].operator",
            "a toleration without a key needs operator Exists (it then matches every taint)",
            "Equal",
        )
    )
    for i in range(8):
        key = _key_with_a_bad_character(rng)
        out.append(
            (
                f"projectLabel {key!r} ({i})",
                _with(lambda d, k=key: d["spec"]["fairShare"].update(projectLabel=k)),
                "spec.fairShare.projectLabel",
                LABEL_KEY,
                key,
            )
        )
    for i in range(3):
        key = _long_prefix(rng)
        out.append(
            (
                f"projectLabel prefix of {key.index('/')} characters ({i})",
                _with(lambda d, k=key: d["spec"]["fairShare"].update(projectLabel=k)),
                "spec.fairShare.projectLabel",
                PREFIX,
                key,
            )
        )
    for i in range(6):
        weight = rng.choice(["1n", "0.5n", "1e-9", "1e-10", "0.000000001", "0.0000000005", "500e-12"])
        out.append(
            (
                f"fairShareWeight {weight} ({i})",
                _with(lambda d, w=weight: d["spec"]["teams"][0].update(fairShareWeight=w)),
                "spec.teams[0].fairShareWeight",
                "fairShareWeight must be 0 or more than 1n (Kueue refuses a weight that collapses to 0)",
                weight,
            )
        )
    return out


def typed_fields(rng: random.Random) -> list[Edit]:
    """Booleans and integers as the API server types them: `dryRun: "yes"` is refused, not read as true."""
    booleans = [
        ("spec.preemption.dryRun", lambda d, v: d["spec"]["preemption"].update(dryRun=v)),
        (
            "spec.preemption.holdCompetingExperiments",
            lambda d, v: d["spec"]["preemption"].update(holdCompetingExperiments=v),
        ),
        (
            "spec.fairShare.pushWeightsToKueue",
            lambda d, v: d["spec"]["fairShare"].update(pushWeightsToKueue=v),
        ),
        (
            "spec.transitions.defaults.drain",
            lambda d, v: d["spec"].update(transitions={"defaults": {"drain": v}}),
        ),
        (
            "spec.transitions.defaults.rampUp",
            lambda d, v: d["spec"].update(transitions={"defaults": {"rampUp": v}}),
        ),
        (
            "spec.teams[0].transition.drain",
            lambda d, v: d["spec"]["teams"][0].update(transition={"drain": v}),
        ),
        (
            "spec.priorityClasses[0].experiment",
            lambda d, v: d["spec"].update(priorityClasses=[{"name": "x", "value": 1, "experiment": v}]),
        ),
    ]
    integers = [
        (
            "spec.preemption.budget.maxVictims",
            lambda d, v: d["spec"]["preemption"]["budget"].update(maxVictims=v),
        ),
        (
            "spec.preemption.maxEvictionsPerWorkload",
            lambda d, v: d["spec"]["preemption"].update(maxEvictionsPerWorkload=v),
        ),
        (
            "spec.preemption.experimentPriorityThreshold",
            lambda d, v: d["spec"]["preemption"].update(experimentPriorityThreshold=v),
        ),
        (
            "spec.transitions.defaults.maxVictimsPerHour",
            lambda d, v: d["spec"].update(transitions={"defaults": {"maxVictimsPerHour": v}}),
        ),
        (
            "spec.priorityClasses[0].value",
            lambda d, v: d["spec"].update(priorityClasses=[{"name": "x", "value": v}]),
        ),
    ]
    out: list[Edit] = []
    for i in range(28):
        field, edit = rng.choice(booleans)
        value: object = rng.choice(
            ["yes", "no", "true", "false", "True", "on", "off", "y", 1, 0, 1.0, "1", ""]
        )
        out.append(
            (f"{field} {value!r} ({i})", _with(lambda d, e=edit, v=value: e(d, v)), field, BOOLEAN, value)
        )
    for i in range(24):
        field, edit = rng.choice(integers)
        value = rng.choice(["5", "10", "five", "0x10", True, False, 2.5, 1e-3, "1e3", ""])
        out.append(
            (f"{field} {value!r} ({i})", _with(lambda d, e=edit, v=value: e(d, v)), field, INTEGER, value)
        )
    return out


def duration_fields(rng: random.Random) -> list[Edit]:
    """Every duration of the policy is at most ten years: past it, dates computed from now leave 1-9999."""
    fields = [
        ("spec.fairShare.halfLife", lambda d, v: d["spec"]["fairShare"].update(halfLife=v)),
        ("spec.preemption.minRuntime", lambda d, v: d["spec"]["preemption"].update(minRuntime=v)),
        ("spec.preemption.starvationGrace", lambda d, v: d["spec"]["preemption"].update(starvationGrace=v)),
        ("spec.preemption.victimHold", lambda d, v: d["spec"]["preemption"].update(victimHold=v)),
        ("spec.preemption.budget.window", lambda d, v: d["spec"]["preemption"]["budget"].update(window=v)),
        (
            "spec.transitions.defaults.duration",
            lambda d, v: d["spec"].update(transitions={"defaults": {"duration": v}}),
        ),
        (
            "spec.transitions.defaults.deadline",
            lambda d, v: d["spec"].update(transitions={"defaults": {"deadline": v}}),
        ),
        (
            "spec.teams[0].transition.deadline",
            lambda d, v: d["spec"]["teams"][0].update(transition={"deadline": v}),
        ),
    ]
    out: list[Edit] = []
    for i in range(32):
        field, edit = rng.choice(fields)
        value = _long_duration(rng)
        out.append(
            (f"{field} {value} ({i})", _with(lambda d, e=edit, v=value: e(d, v)), field, TEN_YEARS, value)
        )
    for i in range(12):
        field, edit = rng.choice(fields)
        digits = rng.choice(UNICODE_DIGITS)
        value = "".join(rng.choice(digits) for _ in range(rng.randrange(1, 4))) + rng.choice(
            ["s", "m", "h", "d"]
        )
        out.append(
            (f"{field} {value!r} ({i})", _with(lambda d, e=edit, v=value: e(d, v)), field, DURATION, value)
        )
    for i in range(6):
        field, edit = rng.choice(fields)
        value = f"{rng.randrange(1, 100)}{rng.choice(['s', 'm', 'h'])}\n"
        out.append(
            (f"{field} {value!r} ({i})", _with(lambda d, e=edit, v=value: e(d, v)), field, DURATION, value)
        )
    for i in range(8):
        digits = rng.choice(UNICODE_DIGITS)
        value = "".join(rng.choice(digits) for _ in range(rng.randrange(1, 4)))
        out.append(
            (
                f"nominal {value!r} ({i})",
                _with(
                    lambda d, v=value: d["spec"]["teams"][0]["quotas"][0]["resources"][0].update(nominal=v)
                ),
                "spec.teams[0].quotas[0].resources[0].nominal",
                QUANTITY,
                value,
            )
        )
    for i in range(4):
        name = _word(rng, 64, 120, string.ascii_lowercase)
        doc = _with(lambda d, n=name: d["metadata"].update(name=n))
        out.append(
            (
                f"metadata.name of {len(name)} characters ({i})",
                doc,
                "metadata.name",
                "must be at most 63 characters (it is the value of the queuemanager.dev/policy label on "
                "every object it renders)",
                name,
            )
        )
    return out


def policy_cases(rng: random.Random) -> Iterator[Case]:
    edits = [
        *budget_fields(rng),
        *ledger_fields(rng),
        *forecast_fields(rng),
        *label_fields(rng),
        *typed_fields(rng),
        *duration_fields(rng),
    ]
    for t in (x for x in TARGETS if x.command.startswith("policy")):
        for id_, doc, field, message, value in edits:
            name = doc["metadata"]["name"]
            got = "" if value is None else f" (got {_shown(value)})"
            yield t.case(
                id_, _dump(doc), _line(f"document 1 (QuotaPolicy {name}): field {field}: {message}{got}")
            )


# ------------------------------------------------------------------ budgets in scenarios (qm simulate)
# The bundled scenario's cost by hand, as generator.py computes it: 672 h, research 0.45/h, business 2.6/h,
# 337 samples, 4 variants (three of them edit the policy once, on day 7), 3 replications.
HOURS, RESEARCH, BUSINESS, SAMPLES, VARIANTS, REPS, EDITS = 672, 0.45 * 672, 2.6 * 672, 337, 4, 3, 3
HORIZON_S, EDIT_S = HOURS * 3600, 7 * DAY
ANCHOR = "      fairShare: {halfLife: 7d}\n"


def _scenario_with(period: str) -> bytes:
    budget = (
        f"      budgets: [{{name: b, selector: {{team: ai-frontier-research}}, period: {period}, "
        "limit: {gpuHours: 10}, thresholds: [{percent: 80, action: alert}]}]\n"
    )
    if ANCHOR not in SCENARIO:  # the bundled scenario changed shape: the edit must still apply
        raise ValueError("scenario budget edit does not apply")
    return SCENARIO.replace(ANCHOR, ANCHOR + budget, 1).encode()


def scenario_cases(rng: random.Random) -> Iterator[Case]:
    argv = ("simulate", "{f}")
    where = "QuotaPolicy gpu-pool: field cluster.quotaPolicy.spec.budgets[0].period"

    def case(id_: str, content: bytes, message: str) -> Case:
        return Case(
            f"simulate budgets: {id_}",
            "simulate",
            argv,
            content,
            stderr=f"qm simulate: error: {{f}}: {message}\n",
        )

    for i in range(10):
        value = _short_duration(rng, 60)
        yield case(
            f"rolling {value} ({i})",
            _scenario_with(f"{{rolling: {value}}}"),
            f"{where}.rolling: a rolling window must be at least 1m (got {value!r})",
        )
    for i in range(8):
        value = _long_duration(rng)
        yield case(
            f"rolling {value} ({i})",
            _scenario_with(f"{{rolling: {value}}}"),
            f"{where}.rolling: {TEN_YEARS} (got {value!r})",
        )
    # Windows whose re-checks (every window / 60, here whole seconds) divide a week: 7d and 21d of the runs
    # with an edit on day 7 are whole numbers of re-checks. A run counts horizon / re-check + 1 per version.
    divisors = [m for m in range(1, 49) if EDIT_S % m == 0]
    for i, minutes in enumerate(rng.sample(divisors, 14)):
        per_edited = EDIT_S // minutes + 1 + (HORIZON_S - EDIT_S) // minutes + 1
        unchanged = HORIZON_S // minutes + 1
        wakeups = unchanged + EDITS * per_edited
        events = REPS * (VARIANTS * (2 * (RESEARCH + BUSINESS) + SAMPLES) + wakeups + EDITS)
        message = (
            f"the scenario would simulate about {_about(REPS * VARIANTS * (RESEARCH + BUSINESS))} workloads "
            f"and {_about(events)} events in {VARIANTS * REPS} runs: more than 50,000 budget wake-ups in one "
            f"run (abrupt cut 4 -> 1: {_about(per_edited)}; spec.budgets[].period.rolling){GUARD_TAIL}"
        )
        yield case(
            f"rolling {minutes}m wakes every {minutes} s ({i})",
            _scenario_with(f"{{rolling: {minutes}m}}"),
            message,
        )


# ------------------------------------------------------------------ qm run flags
RUN_BOUNDS = {
    "--tick": "1d",
    "--history-persist": "1d",
    "--budget-refresh": "1d",
    "--forecast-timeout": "1d",
    "--lease-duration": "1h",
    "--starvation-grace": "3650d",
    "--victim-hold": "3650d",
    "--forecast-history": "3650d",
}
NOT_A_DURATION = f"not a duration (e.g. {DURATION_EXAMPLES}, or seconds)"
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": DAY, "w": 7 * DAY}


def run_flag_cases(rng: random.Random) -> Iterator[Case]:
    def bad(id_: str, argv: tuple[str, ...], line: str) -> Case:
        return Case(f"run bounds: {id_}", "run", argv, stderr=line + "\n")

    for i in range(40):
        flag, most = rng.choice(sorted(RUN_BOUNDS.items()))
        bound = int(most[:-1]) * SECONDS[most[-1]]
        unit = rng.choice(["s", "m", "h", "d", "w", ""])
        scale = SECONDS.get(unit, 1)
        amount = rng.randrange(bound // scale + 1, bound // scale * 1000 + 2)
        value = f"{amount}{unit}"
        yield bad(
            f"{flag} {value} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: must be at most {most}: {value!r}",
        )
    for i in range(6):
        value = rng.choice(["100000000d", "9999999999999999w", "1e300", "1e18", "99999999999h"])
        yield bad(
            f"--lease-duration {value} ({i})",
            ("run", f"--lease-duration={value}"),
            f"qm run: error: argument --lease-duration: must be at most 1h: {value!r}",
        )
    for i in range(16):
        flag = rng.choice(sorted(RUN_BOUNDS))
        digits = rng.choice(UNICODE_DIGITS)
        value = "".join(rng.choice(digits[1:]) for _ in range(rng.randrange(1, 4))) + rng.choice(
            ["", "s", "m"]
        )
        yield bad(
            f"{flag} {value!r} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: {NOT_A_DURATION}: {value!r}",
        )
    for i in range(6):
        flag = rng.choice(sorted(RUN_BOUNDS))
        value = rng.choice(["1_0", "1_000", "5_0s", "0x10", "1 0", "1h 30m"])
        yield bad(
            f"{flag} {value!r} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: {NOT_A_DURATION}: {value!r}",
        )
    for i in range(12):
        flag = rng.choice(("--metrics-port", "--health-port"))
        digits = rng.choice(UNICODE_DIGITS)
        value = rng.choice(
            ["".join(rng.choice(digits[1:]) for _ in range(4)), "80_80", " 8080", "8080 ", "8 0"]
        )
        yield bad(
            f"{flag} {value!r} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: not a port: {value!r}",
        )


def run_ledger_cases(rng: random.Random) -> Iterator[Case]:
    """`qm run --ledger URL` with a scheme the ledger cannot use: one line before anything starts (the
    kubeconfig at {f} is valid, so the URL is what is judged)."""
    for i in range(12):
        scheme = rng.choice(
            [
                "mysql",
                "http",
                "https",
                "oracle",
                "mssql+pyodbc",
                "redis",
                "file",
                "ftp",
                "postgres+asyncpg",
                "sqlite+aiosqlite",
                _word(rng, 2, 8),
            ]
        )
        if scheme in ("sqlite", "postgresql", "postgresql+psycopg", "postgres"):
            continue
        url = f"{scheme}://{_word(rng)}/{_word(rng)}"
        yield Case(
            f"run ledger: --ledger {url} ({i})",
            "run",
            ("run", "--kubeconfig", "{f}", "--ledger", url),
            KUBECONFIG.encode(),
            stderr=f"qm run: error: unsupported database URL {url!r}: the ledger uses SQLite (a path or "
            "sqlite:///PATH) or PostgreSQL (postgresql+psycopg://...)\n",
        )


# ------------------------------------------------------------------ qm plan --fail-if
PLAN_PREFIX = "qm plan: error: field --fail-if: "
GRAMMAR = (
    "must be METRIC OP BOUND, e.g. 'wait_p95[CLASS] > +10%' or 'lost_gpu_hours > 50' (OP: > >= < <=; "
    "BOUND: a number, a signed change, or a signed percentage)"
)
KNOWN = ", ".join(sorted(KINDS))  # the metric vocabulary `unknown metric` lists (wording, not code)
CLUSTER_WIDE = ("utilization", "stranded_gpu_hours", "preemptions", "evictions_max", "fairness_jain")
NEEDS_TEAM = ("team_wait_p50", "team_wait_p95", "demand_met")
COUNTED = {
    "lost_gpu_hours": "GPU-h",
    "goodput": "GPU-h",
    "finished": "workloads",
    "evictions": "evictions",
    "never_admitted": "%",
    "utilization": "%",
}


def fail_if_cases(rng: random.Random) -> Iterator[Case]:
    def bad(id_: str, expr: str, message: str) -> Case:
        return Case(
            f"plan --fail-if: {id_}",
            "plan",
            ("plan", "{f}", "--fail-if", expr),
            stderr=_line(f"{PLAN_PREFIX}{message} (got {_shown(expr)})") + "\n",
        )

    metrics = ["wait_p95", "lost_gpu_hours", "goodput[research]", "wait_mean[business]", "utilization"]
    for i in range(24):
        digits = rng.choice(UNICODE_DIGITS)
        number = "".join(rng.choice(digits) for _ in range(rng.randrange(1, 4)))
        if rng.random() < 0.3:
            number = str(rng.randrange(1, 9)) + number  # mixed: an ASCII digit, then others
        expr = (
            f"{rng.choice(metrics)} {rng.choice(['>', '>=', '<', '<='])} {rng.choice(['', '+', '-'])}{number}"
        )
        yield bad(f"Unicode digits {expr!r} ({i})", expr, GRAMMAR)
    for i in range(8):
        expr = f"lost_gpu_hours > {rng.randrange(1, 10)}{'0' * rng.randrange(30, 400)}"
        yield bad(f"a bound of {len(expr) - 17} digits ({i})", expr, "the bound has more than 30 digits")
    for i in range(12):
        name = _word(rng, 2, 14, string.ascii_lowercase + "_")
        if name in KNOWN.split(", ") or not name[0].isalpha():
            continue
        expr = f"{name} > {rng.randrange(0, 100)}"
        yield bad(f"unknown metric {name} ({i})", expr, f"unknown metric {name!r}; known: {KNOWN}")
    for i in range(6):
        name = rng.choice(CLUSTER_WIDE)
        expr = f"{name}[{_word(rng)}] > 1"
        yield bad(
            f"{name} with an argument ({i})", expr, f"{name} is cluster-wide: write it without brackets"
        )
    for i in range(4):
        name = rng.choice(NEEDS_TEAM)
        expr = f"{name} > 1"
        yield bad(f"{name} without a team ({i})", expr, f"{name} needs a team in brackets, e.g. {name}[NAME]")
    for i in range(4):
        expr = f"wait_p95 > {rng.randrange(1, 100)}%"
        yield bad(
            f"an unsigned percentage ({i})",
            expr,
            "a percentage is a change vs the current policy: write it signed, e.g. +10% or -5%",
        )
    for i in range(6):
        name, unit = rng.choice(sorted(COUNTED.items()))
        suffix = rng.choice(["h", "min", "d"])
        expr = f"{name} > {rng.randrange(1, 50)}{suffix}"
        shown = unit or "plain numbers"
        yield bad(
            f"{name} with a time unit ({i})",
            expr,
            f"{name} is measured in {shown}: a unit {suffix!r} does not apply (write the number alone)",
        )
    for i in range(10):
        expr = rng.choice(
            [
                "wait_p95 == 1",
                "wait_p95 => 1",
                "wait_p95 != 1",
                "wait_p95 >",
                "> 1",
                "wait_p95 1",
                "wait_p95 > 1 and goodput < 2",
                "wait_p95 > 1; rm -rf /",
                "wait_p95 > inf",
                "wait_p95 > nan",
                "wait_p95 > .5",
                "wait_p95 > -",
                "",
            ]
        )
        yield bad(f"not METRIC OP BOUND {expr!r} ({i})", expr, GRAMMAR)
    for i in range(4):
        expr = rng.choice(
            ["__import__('os').system('true') > 1", "eval(1) > 1", "Wait_P95 > 1", "wait-p95 > 1"]
        )
        yield bad(
            f"not a metric name {expr!r} ({i})",
            expr,
            "must be NAME or NAME[ARGUMENT], e.g. wait_p95[high-priority-business]",
        )


def generate(seed: int = SEED) -> list[Case]:
    """Every case of this module, in a stable order (ids unique within it; test_hostile.py keeps them
    unique across modules)."""
    rng = random.Random(seed)
    cases = [
        *policy_cases(rng),
        *scenario_cases(rng),
        *run_flag_cases(rng),
        *run_ledger_cases(rng),
        *fail_if_cases(rng),
    ]
    seen: dict[str, int] = {}
    unique = []
    for case in cases:
        n = seen.get(case.id, 0)
        seen[case.id] = n + 1
        unique.append(
            case
            if n == 0
            else Case(
                f"{case.id} #{n + 1}",
                case.command,
                case.argv,
                case.content,
                case.path_kind,
                case.rc,
                case.stdout,
                case.stderr,
            )
        )
    return unique
