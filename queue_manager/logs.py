"""JSON (or plain text) logs for the operator and kopf, one object per line.

Structured fields travel in `extra={"qm": {...}}` so an audit line can be parsed back
(what, why, object, policy generation) by log pipelines without regexes.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from .config import LogFormat

FIELDS_ATTR = "qm"  # LogRecord attribute holding structured fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the `qm` fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, dict):
            for key in sorted(fields):
                doc.setdefault(key, fields[key])
        # kopf attaches the object it is handling as `k8s_ref`.
        ref = getattr(record, "k8s_ref", None)
        if isinstance(ref, dict):
            doc.setdefault("object", ref)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, sort_keys=False)


def configure_logging(fmt: LogFormat, level: str) -> None:
    """Route every logger (ours and kopf's) to stderr in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # kopf is chatty at INFO about every handler run; its warnings and errors still show.
    logging.getLogger("kopf").setLevel(max(logging.WARNING, root.level))
