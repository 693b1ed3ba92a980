"""A minimal JSON client for the kube-apiserver (stdlib only: fast to import, no kubeconfig parsing).

The launcher needs a dozen calls (readiness, CRDs, webhook configurations, a probe object); the
official client would add about a second of import time to every start.
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

JSON = dict[str, object]


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: JSON
    text: str


class RestClient:
    """HTTPS + client-cert requests against one server; one connection per call (robust to restarts)."""

    def __init__(self, host: str, port: int, ca_file: Path, cert_file: Path, key_file: Path) -> None:
        self._host, self._port = host, port
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        self._ctx.load_cert_chain(str(cert_file), str(key_file))

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, object] | None = None,
        *,
        timeout: float = 10.0,
        content_type: str = "application/json",
    ) -> Response:
        conn = http.client.HTTPSConnection(self._host, self._port, context=self._ctx, timeout=timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        parsed: JSON = {}
        if text.startswith("{"):
            try:
                parsed = cast(JSON, json.loads(text))
            except ValueError:
                parsed = {}
        return Response(resp.status, parsed, text)

    def get(self, path: str, *, timeout: float = 10.0) -> Response:
        return self.request("GET", path, timeout=timeout)

    def post(self, path: str, body: Mapping[str, object]) -> Response:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Response:
        return self.request("DELETE", path)
