"""What went wrong in a reconcile, said in one line for the policy's Degraded condition, its Event and the log
(pure). Two reasons: the reconcile itself failed (an exception while observing, deciding or applying), or
the API server or a webhook refused an object the policy renders."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from fairshare.errors import QueueManagerError
from fairshare.policy import POLICY_LABEL, ObjectKey

RECONCILE_FAILED = "ReconcileFailed"
APPLY_REFUSED = "ApplyRefused"
_MAX = 1000  # a condition message, an Event message (the API server caps the latter at 1 KiB)


def api_message(err: ApiException) -> str:
    """The API server's own message (names the verb, resource and field, and a webhook's words)."""
    body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:300] or str(err.reason)
    return str(doc.get("message", body))[:500] if isinstance(doc, dict) else body[:300]


class Refused(Exception):
    """The API server (or an admission webhook) refused a write of a rendered object, or the operator did:
    the object is another policy's (`owned`). `status` 0: no HTTP status (the operator's own refusal)."""

    def __init__(self, key: ObjectKey, status: int, message: str) -> None:
        super().__init__(f"{key}: {f'{status} ' if status else ''}{message}")
        self.key = key
        self.status = status
        self.message = message

    @staticmethod
    def of(key: ObjectKey, err: ApiException) -> Refused:
        return Refused(key, int(err.status or 0), api_message(err))

    @staticmethod
    def owned(key: ObjectKey, owner: str) -> Refused:
        """Two policies rendering one object would take it from each other on every reconcile."""
        return Refused(key, 0, f"it belongs to QuotaPolicy {owner} (label {POLICY_LABEL}={owner}); "
                               "each Kueue object is rendered by one policy: name it differently in one of "
                               "the two")

    def line(self) -> str:
        where = f"{self.key.namespace}/" if self.key.namespace else ""
        code = f"{self.status} " if self.status else ""
        return f"{self.key.kind} {where}{self.key.name} not applied: {code}{self.message}"


def describe(stage: str, err: BaseException) -> str:
    """One line: the stage and the error, its field and value when it names them (an InputError does)."""
    if isinstance(err, QueueManagerError):
        text = str(err)
    elif isinstance(err, ApiException):
        text = f"API error {err.status} {err.reason}: {api_message(err)}"
    else:
        text = f"{type(err).__name__}: {err}"
    return clip(f"{stage}: {' '.join(text.split())}")


def clip(text: str) -> str:
    return text if len(text) <= _MAX else text[:_MAX - 3] + "..."
