"""PromQL answers are hostile input (queue_manager/telemetry.py): an answer that is not what Prometheus's HTTP
API documents (not JSON, not a matrix, wrong types, too large, too slow, a server that is not there) is one
line, in bounded time, and the reading's activity is unknown; never a traceback, never a hang. NaN and
out-of-range values are numbers, read as samples that are not a utilization (the rule's "unknown").

The server here is a test server that answers what each case says: a real Prometheus never sends these (the
answers of a real one are tested in tests/integration/test_telemetry_prometheus.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fairshare.control import PolicyRules
from fairshare.control.idle import Activity, verdict
from fairshare.policy import parse_policy
from fairshare.policy.settings import idle_settings
from queue_manager.telemetry import PrometheusClient, Series, TelemetryError, parse_matrix, reduce_series
from tests.unit.policy.helpers import sample

Answer = Callable[[BaseHTTPRequestHandler], None]


def _send(status: int, body: bytes, content_type: str = "application/json") -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return answer


def _json(doc: Any, status: int = 200) -> Answer:
    return _send(status, json.dumps(doc).encode())


def _matrix(result: Any) -> Answer:
    return _json({"status": "success", "data": {"resultType": "matrix", "result": result}})


def _slow(seconds: float) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        try:
            _matrix([])(h)
        except OSError:  # the client gave up long ago
            return
    return answer


def _trickle(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.end_headers()
    for _ in range(40):  # a byte every 0.1 s: each read answers within the socket timeout, the whole never
        try:
            h.wfile.write(b" ")
            h.wfile.flush()
        except OSError:
            return
        time.sleep(0.1)


class Server:
    def __init__(self) -> None:
        self.answer: Answer = _matrix([])
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


SERIES = {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "namespace": "ns", "pod": "p", "gpu": "0"},
          "values": [[1.5, "0"], [2.5, "0"]]}
NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("answer", "line"),
    [
        pytest.param(_send(200, b"<html>oops</html>", "text/html"),
                     "the answer is not JSON (got '<html>oops</html>')", id="an HTML page"),
        pytest.param(_send(200, b""), "the answer is not JSON (got '')", id="an empty body"),
        pytest.param(_send(200, NESTED), "the answer is not JSON", id="JSON nested 100,000 deep"),
        pytest.param(_json([1, 2]), "the answer is not a JSON object (got '[1, 2]')", id="a JSON list"),
        pytest.param(_json({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
                     "the query failed: bad_data: parse error at char 3",
                     id="Prometheus says the query failed"),
        pytest.param(_json({"status": "error", "errorType": "bad_data", "error": "invalid parameter"}, 400),
                     "HTTP 400: the query failed: bad_data: invalid parameter",
                     id="HTTP 400 with its JSON error"),
        pytest.param(_send(503, b"Service Unavailable", "text/plain"),
                     "HTTP 503: the answer is not JSON (got 'Service Unavailable')", id="HTTP 503 as text"),
        pytest.param(_json({"status": "success", "data": {"resultType": "vector", "result": []}}),
                     "data.resultType: expected \"matrix\" (got 'vector')", id="a vector, not a matrix"),
        pytest.param(_json({"status": "success", "data": "x"}), "data: expected an object (got 'x')",
                     id="data is a string"),
        pytest.param(_matrix({"a": 1}), "data.result: expected a list", id="result is an object"),
        pytest.param(_matrix([{"metric": {"pod": 7}, "values": []}]),
                     "data.result[0].metric: expected labels as strings", id="a label that is a number"),
        pytest.param(_matrix([{**SERIES, "values": [[1.5, 0]]}]),
                     "data.result[0].values[0][1]: expected a number as a string (got '0')",
                     id="a value that is a number, not a string"),
        pytest.param(_matrix([{**SERIES, "values": [["now", "0"]]}]),
                     "data.result[0].values[0][0]: expected a time in seconds (got 'now')",
                     id="a time that is a string"),
        pytest.param(_matrix([{**SERIES, "values": [[1.5, "zero"]]}]),
                     "data.result[0].values[0][1]: expected a number as a string (got 'zero')",
                     id="a value that is not a number"),
        pytest.param(_matrix([{**SERIES, "values": [[1.5]]}]),
                     "data.result[0].values[0]: expected [time, \"value\"] (got '[1.5]')",
                     id="a pair of one"),
        pytest.param(_matrix([{**SERIES, "values": "0"}]), "data.result[0].values: expected a list",
                     id="values as a string"),
        pytest.param(_send(200, b'{"status": "success", "data": {"resultType": "matrix", "result": ['
                           + b'{"metric": {}, "values": []},' * 60000 + b'{"metric": {}, "values": []}]}}'),
                     "the answer is larger than 1 MiB", id="a 1.7 MiB answer (limit 1 MiB)"),
        pytest.param(_slow(5.0), "no answer within 1s", id="a server that answers after 5 s (timeout 1 s)"),
        pytest.param(_trickle, "no whole answer within 1s", id="a server that trickles a byte every 0.1 s"),
    ],
)
def test_a_hostile_answer_is_one_line_in_bounded_time(server: Server, answer: Answer, line: str) -> None:
    server.answer = answer
    client = PrometheusClient(server.url, timeout_s=1.0, max_bytes=1024 * 1024)
    started = time.monotonic()
    with pytest.raises(TelemetryError) as err:
        client.query('DCGM_FI_DEV_GPU_UTIL{namespace=~"ns"}[60s]', time.time())
    took = time.monotonic() - started
    text = str(err.value)
    assert line in text and "\n" not in text and "Traceback" not in text, text
    assert took < 3.0, f"{took:.2f} s"


def test_a_server_that_is_not_there_is_one_line() -> None:
    s = Server()
    url = s.url
    s.close()
    with pytest.raises(TelemetryError, match=r"^cannot connect: .*Connection refused"):
        PrometheusClient(url, timeout_s=1.0).query("up[1m]", time.time())


def test_nan_and_out_of_range_values_are_read_and_make_the_activity_unknown() -> None:
    values = [[t, v] for t, v in zip(range(940, 1001, 10), ["0", "NaN", "0", "+Inf", "-3", "0", "1e999"],
                                     strict=True)]
    [series] = parse_matrix(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"namespace": "ns", "pod": "p", "gpu": "0"}, "values": values}]}}).encode())
    doc = sample()
    doc["spec"]["idle"] = {"enabled": True, "window": "60s", "scrapeInterval": "10s"}
    policy = parse_policy(doc)
    reading = reduce_series([series], {("ns", "p"): "ns/w"}, idle_settings(policy), 1000.0, "http://x")
    [gpu] = reading.workloads["ns/w"]
    assert (gpu.valid, gpu.invalid) == (3, 4)
    rules = PolicyRules.of(policy).idle
    assert rules is not None
    v = verdict(rules, reading, "ns/w", 1, 1000.0)
    assert (v.activity, v.reason) == (Activity.UNKNOWN, "pod p GPU 0: 4 sample(s) not a number in 0-100%")


def test_a_series_of_a_pod_no_workload_owns_is_left_out() -> None:
    doc = sample()
    doc["spec"]["idle"] = {"enabled": True}
    settings = idle_settings(parse_policy(doc))
    series = [Series({"namespace": "ns", "pod": "other", "gpu": "0"}, ((1.0, 0.0),))]
    assert reduce_series(series, {("ns", "p"): "ns/w"}, settings, 2.0, "http://x").workloads == {}
