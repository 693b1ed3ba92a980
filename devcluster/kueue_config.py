"""A user's Kueue ``Configuration`` for the launcher (``qm dev-cluster up --kueue-config FILE``).

The launcher owns the fields that keep an out-of-cluster manager on loopback (webhook, health,
metrics, leader election, internal cert management, namespace, client connection); a user's file
sets the scheduling behaviour: ``fairSharing`` (presence = on, v1beta2, with its
``preemptionStrategies``: Kueue v0.19.2 does not start without them), ``admissionFairSharing``,
``waitForPodsReady`` (with ``requeuingStrategy``), ``featureGates``, ``resources`` and the rest of
``apis/config/v1beta2/configuration_types.go`` (Kueue v0.19.2). Everything the user does not set
keeps Kueue's defaults (``apis/config/v1beta2/defaults.go``).

Only the shape is checked here (a mapping, the right apiVersion/kind, known top-level fields,
none of the launcher's). Kueue itself decodes the file strictly and validates every field
(pkg/config/config.go ``fromFile`` with ``serializer.EnableStrict``, pkg/config/validation.go):
a bad value makes it exit at start-up, and the launcher's error then names kueue.log and its tail.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

import yaml

CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
CONFIG_KIND = "Configuration"

# Top-level fields of Configuration (v0.19.2, configuration_types.go) a user may set.
USER_FIELDS = (
    "admissionFairSharing",
    "controller",
    "fairSharing",
    "featureGates",
    "integrations",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "multiKueue",
    "objectRetentionPolicies",
    "resources",
    "waitForPodsReady",
)
# Fields the launcher sets to run Kueue out of cluster on loopback (see kueue.configuration).
LAUNCHER_FIELDS = (
    "clientConnection",
    "health",
    "internalCertManagement",
    "leaderElection",
    "metrics",
    "namespace",
    "pprofBindAddress",
    "tls",
    "visibilityServer",
    "webhook",
)

KueueConfig = Mapping[str, object]


class KueueConfigError(ValueError):
    """A Kueue Configuration file the launcher cannot use; the message names file, field and value."""


def _fail(file: str, field: str, message: str, value: object = None) -> KueueConfigError:
    shown = "" if value is None else f" (got {value!r})"
    where = f"{file}: {field}: " if field else f"{file}: "
    return KueueConfigError(f"{where}{message}{shown}")


def validate_kueue_config(raw: object, *, file: str = "<kueue config>") -> dict[str, object]:
    """The user part of a Configuration (apiVersion/kind dropped), or KueueConfigError."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(file, "", "must be a Kueue Configuration (a mapping)", type(raw).__name__)
    doc = cast(dict[str, object], raw)
    api = doc.get("apiVersion", CONFIG_API_VERSION)
    if api != CONFIG_API_VERSION:
        raise _fail(file, "apiVersion", f"must be {CONFIG_API_VERSION}", api)
    kind = doc.get("kind", CONFIG_KIND)
    if kind != CONFIG_KIND:
        raise _fail(file, "kind", f"must be {CONFIG_KIND}", kind)
    out: dict[str, object] = {}
    for key in sorted(str(k) for k in doc):
        if key in ("apiVersion", "kind"):
            continue
        if key in LAUNCHER_FIELDS:
            raise _fail(file, key, "set by the launcher (Kueue runs out of cluster on loopback); remove it")
        if key not in USER_FIELDS:
            raise _fail(file, key, f"unknown Configuration field (expected one of {', '.join(USER_FIELDS)})")
        out[key] = doc[key]
    integrations = out.get("integrations")
    if integrations is not None and not isinstance(integrations, dict):
        raise _fail(file, "integrations", "must be a mapping", integrations)
    fair = out.get("fairSharing")
    if fair is not None:
        listed = cast(dict[str, object], fair).get("preemptionStrategies") if isinstance(fair, dict) else None
        if not isinstance(listed, list) or not listed:
            # pkg/config/validation.go validateFairSharing: "must be specified" (no v1beta2 default).
            raise _fail(file, "fairSharing.preemptionStrategies", "must list the strategies (Kueue v0.19.2 "
                        "does not start without them; its documented default is "
                        "[LessThanOrEqualToFinalShare, LessThanInitialShare])", listed)
    gates = out.get("featureGates")
    if gates is not None and (
        not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values())
    ):
        raise _fail(file, "featureGates", "must map gate names to true/false", gates)
    return out


def load_kueue_config(path: Path) -> dict[str, object]:
    """Read and check a Configuration file (YAML, one document)."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(file, "", f"cannot read: {err}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise _fail(file, "", f"not valid YAML: {' '.join(str(err).split())}") from None
    if len(docs) != 1:
        raise _fail(file, "", f"must hold exactly one YAML document (found {len(docs)})")
    return validate_kueue_config(docs[0], file=file)


def merge_configuration(base: Mapping[str, object], user: KueueConfig) -> dict[str, object]:
    """The launcher's Configuration with the user's fields on top.

    ``featureGates`` and ``integrations`` are merged key by key (the launcher turns
    VisibilityOnDemand off and names its frameworks); every other user field replaces the
    launcher's (it sets none of them).
    """
    out = dict(base)
    for key, value in user.items():
        if key in ("featureGates", "integrations") and isinstance(value, dict):
            merged = dict(cast(dict[str, object], out.get(key) or {}))
            merged.update(cast(dict[str, object], value))
            out[key] = merged
        else:
            out[key] = value
    return out


def frameworks_of(user: KueueConfig, default: tuple[str, ...]) -> tuple[str, ...]:
    """The job integrations a user's Configuration asks for (``integrations.frameworks``)."""
    integrations = user.get("integrations")
    if isinstance(integrations, dict):
        fw = cast(dict[str, object], integrations).get("frameworks")
        if isinstance(fw, list):
            return tuple(str(f) for f in fw)
    return default


def describe(user: KueueConfig) -> str:
    """One line for logs and `qm dev-cluster status`: which scheduling features are on."""
    parts = []
    fs = user.get("fairSharing")
    if fs is not None:
        strategies = cast(dict[str, object], fs).get("preemptionStrategies") if isinstance(fs, dict) else None
        parts.append("fairSharing" + (f" {strategies}" if strategies else ""))
    for key in ("admissionFairSharing", "waitForPodsReady"):
        if user.get(key) is not None:
            parts.append(key)
    gates = user.get("featureGates")
    if isinstance(gates, dict) and gates:
        parts.append("featureGates " + ", ".join(f"{k}={v}" for k, v in sorted(gates.items())))
    integrations = user.get("integrations")
    copied = (cast(dict[str, object], integrations).get("labelKeysToCopy") if isinstance(integrations, dict)
              else None)
    if isinstance(copied, list) and copied:
        parts.append("labelKeysToCopy " + ", ".join(str(k) for k in copied))
    return "; ".join(parts) or "Kueue defaults"
