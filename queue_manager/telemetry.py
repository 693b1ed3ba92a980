"""The GPUs' activity, read from Prometheus for the policies with spec.idle (docs/operator.md, "Idle GPUs").

A background thread reads, every policy's scrapeInterval, dcgm-exporter's series of the policy's namespaces
over its window (one instant query of a range selector: the raw samples, `METRIC{namespace=~"a|b"}[Ws]`),
maps each series' pod to its Workload and reduces its samples with the core's `read_series`
(fairshare.control.telemetry); a reconcile reads the last reading (never the network). The rule that judges
the reading is fairshare.control.idle; nothing here decides.

Pods to Workloads: Kueue writes the Workload's name on the pods of a started job (annotation
kueue.x-k8s.io/workload, apis/kueue/v1beta2/topology_types.go WorkloadAnnotation, set by pkg/controller/
jobframework/reconciler.go with TopologyAwareScheduling, on by default since v0.14) and labels them
kueue.x-k8s.io/podset (pkg/constants PodSetLabel); without the annotation, a pod's controlling Job is matched
to the Workload that Job owns. A pod that maps to no Workload is not counted.

The answer is hostile input like any other: a server that does not answer within the policy's timeout, an
answer larger than MAX_ANSWER_BYTES, one that is not JSON or not a Prometheus matrix, a value that is not a
number string: the reading fails with one line (qm_telemetry_up 0, the policy's status.telemetry.error) and
every workload's activity is unknown. A sample that is a number but not a utilization (NaN, +Inf, negative,
above 100%) is counted by the core as not a sample.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fairshare.control.telemetry import PERCENT_SCALE, ActivityReading, GpuReading, read_series
from fairshare.models import Workload
from fairshare.policy import QuotaPolicy
from fairshare.policy.settings import IdleSettings, idle_settings
from ledger.activity import ActivityRecord, parts_of

from .cache import WorkloadCache
from .metrics import Metrics

log = logging.getLogger("queue_manager")

MAX_ANSWER_BYTES = 32 * 1024 * 1024  # far above a cluster's window of samples; bounds a runaway answer
POD_SET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


class TelemetryError(Exception):
    """A reading that failed, in one line (no traceback reaches the log or the status)."""


@dataclass(frozen=True, slots=True)
class Series:
    labels: Mapping[str, str]
    values: tuple[tuple[float, float], ...]


def _shown(raw: object, limit: int = 60) -> str:
    text = raw if isinstance(raw, str) else json.dumps(raw)[:limit * 2] if _jsonable(raw) else repr(raw)
    text = " ".join(str(text).split())
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _jsonable(raw: object) -> bool:
    try:
        json.dumps(raw)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def parse_matrix(raw: bytes) -> list[Series]:
    """A Prometheus instant-query answer whose result is a matrix (a range selector's raw samples), checked
    field by field: TelemetryError naming the field and value of the first thing that is not as the HTTP
    API documents it (prometheus.io/docs/prometheus/latest/querying/api/#range-vectors)."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        head = raw[:60].decode("utf-8", errors="replace")
        raise TelemetryError(f"the answer is not JSON (got {_shown(head)})") from None
    if not isinstance(doc, dict):
        raise TelemetryError(f"the answer is not a JSON object (got {_shown(doc)})")
    status = doc.get("status")
    if status != "success":
        if status == "error":
            raise TelemetryError(f"the query failed: {str(doc.get('errorType'))[:40]}: "
                                 f"{str(doc.get('error'))[:200]}")
        raise TelemetryError(f"status: expected \"success\" (got {_shown(status)})")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise TelemetryError(f"data: expected an object (got {_shown(data)})")
    if data.get("resultType") != "matrix":
        raise TelemetryError(f"data.resultType: expected \"matrix\" (got {_shown(data.get('resultType'))})")
    result = data.get("result")
    if not isinstance(result, list):
        raise TelemetryError(f"data.result: expected a list (got {_shown(result)})")
    out: list[Series] = []
    for i, item in enumerate(result):
        where = f"data.result[{i}]"
        if not isinstance(item, dict):
            raise TelemetryError(f"{where}: expected an object (got {_shown(item)})")
        labels = item.get("metric")
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in labels.items()):
            raise TelemetryError(f"{where}.metric: expected labels as strings (got {_shown(labels)})")
        values = item.get("values")
        if not isinstance(values, list):
            raise TelemetryError(f"{where}.values: expected a list (got {_shown(values)})")
        samples: list[tuple[float, float]] = []
        for j, pair in enumerate(values):
            at = f"{where}.values[{j}]"
            if not isinstance(pair, list) or len(pair) != 2:
                raise TelemetryError(f"{at}: expected [time, \"value\"] (got {_shown(pair)})")
            t, v = pair
            if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
                raise TelemetryError(f"{at}[0]: expected a time in seconds (got {_shown(t)})")
            if not isinstance(v, str) or len(v) > 40:
                raise TelemetryError(f"{at}[1]: expected a number as a string (got {_shown(v)})")
            try:
                value = float(v)
            except ValueError:
                raise TelemetryError(f"{at}[1]: expected a number as a string (got {_shown(v)})") from None
            samples.append((float(t), value))
        out.append(Series(labels, tuple(samples)))
    return out


class PrometheusClient:
    """Instant queries of one Prometheus HTTP API, bounded in time and size."""

    def __init__(self, url: str, *, timeout_s: float, max_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes

    def query(self, promql: str, at: float) -> list[Series]:
        """The matrix the query returns at `at` (TelemetryError, one line, for anything else)."""
        qs = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        url = f"{self.url}/api/v1/query?{qs}"
        deadline = time.monotonic() + self.timeout_s
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                raw = self._read(resp, deadline)
        except urllib.error.HTTPError as err:
            # Prometheus answers 400/422/503 with its JSON error body: say what it said.
            body = self._read(err, deadline) if err.fp is not None else b""
            try:
                parse_matrix(body)
            except TelemetryError as inner:
                raise TelemetryError(f"HTTP {err.code}: {inner}") from None
            raise TelemetryError(f"HTTP {err.code}") from None
        except TimeoutError:
            raise TelemetryError(f"no answer within {self.timeout_s:g}s") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, socket.timeout | TimeoutError):
                raise TelemetryError(f"no answer within {self.timeout_s:g}s") from None
            raise TelemetryError(f"cannot connect: {' '.join(str(reason).split())[:200]}") from None
        return parse_matrix(raw)

    def _read(self, resp: Any, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TelemetryError(f"no whole answer within {self.timeout_s:g}s")
            # read1: what has arrived (read(n) waits for n bytes, past the deadline of a trickling server)
            reader = getattr(resp, "read1", None)
            chunk = reader(65536) if reader is not None else resp.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_bytes:
                raise TelemetryError(f"the answer is larger than {self.max_bytes // (1024 * 1024)} MiB")
            chunks.append(chunk)


def promql(metric: str, namespaces: Iterable[str], window_s: float) -> str:
    """The raw samples of the namespaces' series over the window (namespaces are DNS labels: no regex
    metacharacter to escape)."""
    names = "|".join(sorted(set(namespaces)))
    return f'{metric}{{namespace=~"{names}"}}[{math.ceil(window_s)}s]'


def pod_workloads(pods: Iterable[Mapping[str, Any]],
                  workloads: Mapping[str, Workload]) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the Workload key ("namespace/name") of the pods that map to one."""
    by_job: dict[tuple[str, str], str] = {}
    for key, w in sorted(workloads.items()):
        if w.owner_kind == "Job" and w.owner_name and (not w.is_finished or (w.namespace, w.owner_name)
                                                       not in by_job):
            by_job[(w.namespace, w.owner_name)] = key
    out: dict[tuple[str, str], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        if not isinstance(ns, str) or not isinstance(name, str):
            continue
        annotations = meta.get("annotations") or {}
        workload = annotations.get(WORKLOAD_ANNOTATION) if isinstance(annotations, dict) else None
        if isinstance(workload, str) and f"{ns}/{workload}" in workloads:
            out[(ns, name)] = f"{ns}/{workload}"
            continue
        for owner in meta.get("ownerReferences") or []:
            if isinstance(owner, dict) and owner.get("kind") == "Job" and owner.get("controller"):
                found = by_job.get((ns, str(owner.get("name"))))
                if found is not None:
                    out[(ns, name)] = found
    return out


def reduce_series(series: Iterable[Series], pods: Mapping[tuple[str, str], str], settings: IdleSettings,
                  measured_at: float, source: str) -> ActivityReading:
    """The reading of one policy: each series of a mapped pod reduced by the core (`read_series`), grouped by
    Workload; one series per (pod, GPU) (a device reported twice, e.g. by two exporters, counts once: the
    later samples)."""
    scale = PERCENT_SCALE[settings.metric]
    by_device: dict[tuple[str, str, str], Series] = {}
    for s in series:
        ns, pod = s.labels.get("namespace", ""), s.labels.get("pod", "")
        if (ns, pod) not in pods:
            continue
        gpu = s.labels.get("gpu") or s.labels.get("UUID") or ""
        key = (pods[(ns, pod)], pod, gpu)
        kept = by_device.get(key)
        if kept is None or (s.values and (not kept.values or s.values[-1][0] > kept.values[-1][0])):
            by_device[key] = s
    readings: dict[str, list[GpuReading]] = {}
    for (workload, pod, gpu), s in sorted(by_device.items()):
        readings.setdefault(workload, []).append(
            read_series(s.values, pod=pod, gpu=gpu, scale=scale, threshold=settings.threshold_percent))
    return ActivityReading(measured_at=measured_at, window=settings.window_s,
                           threshold=settings.threshold_percent,
                           workloads={k: tuple(v) for k, v in readings.items()}, source=source)


def activity_records(series: Iterable[Series], pods: Mapping[tuple[str, str], str],
                     workloads: Mapping[str, Workload], settings: IdleSettings, measured_at: float,
                     recorded: dict[tuple[str, str], int]) -> list[ActivityRecord]:
    """What the GPUs did, for the ledger (ledger.activity): per workload, its series over the window up to a
    scrape interval before the reading (Prometheus has every sample of it then), from where this process
    recorded last (`recorded`, updated; the ledger adds each part once anyway)."""
    scale = PERCENT_SCALE[settings.metric]
    by_workload: dict[str, list[list[tuple[int, float]]]] = {}
    for s in series:
        key = pods.get((s.labels.get("namespace", ""), s.labels.get("pod", "")))
        if key is not None:
            by_workload.setdefault(key, []).append([(round(t * 1000), v * scale) for t, v in s.values])
    until = round((measured_at - settings.scrape_interval_s) * 1000)
    start = round((measured_at - settings.window_s) * 1000)
    out: list[ActivityRecord] = []
    for key in sorted(by_workload):
        w = workloads.get(key)
        if w is None or not w.uid:
            continue
        mark = (w.uid, settings.resource)
        since = max(start, recorded.get(mark, start))
        parts = parts_of(by_workload[key], since_ms=since, until_ms=until,
                         hold_ms=round(settings.stale_s * 1000))
        if until > since:
            recorded[mark] = until
        if parts:
            out.append(ActivityRecord(w.uid, settings.resource, parts))
    return out


PodLister = Callable[[str], list[dict[str, Any]]]  # namespace -> the pods carrying Kueue's podset label


class TelemetryFeed:
    """Reads each registered policy's telemetry every scrapeInterval in a thread; `activity` hands a
    reconcile the last reading."""

    def __init__(self, pods: PodLister, workloads: WorkloadCache, metrics: Metrics,
                 clock: Callable[[], float], *, url: str | None = None,
                 record: Callable[[list[ActivityRecord]], None] | None = None) -> None:
        self.pods = pods
        self.workloads = workloads
        self.metrics = metrics
        self.clock = clock
        self.url = url  # qm run --prometheus-url: wins over the policies' spec.idle.prometheus.url
        self.record = record  # the ledger's record_activity (None: no ledger)
        self._recorded: dict[tuple[str, str], int] = {}  # (uid, resource) -> the end of the last minute sent
        self._lock = threading.Lock()
        self._policies: dict[str, QuotaPolicy] = {}
        self._readings: dict[str, ActivityReading] = {}
        self._due: dict[str, float] = {}
        self._failing: dict[str, str] = {}
        self._stop = threading.Event()
        self._poke = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()

    def activity(self, policy: QuotaPolicy) -> ActivityReading | None:
        """The policy's last reading with its workloads' keep-idle annotations (None: none yet, or spec.idle
        not enabled)."""
        if not policy.spec.idle.enabled:
            with self._lock:
                self._policies.pop(policy.name, None)
                self._readings.pop(policy.name, None)
            return None
        with self._lock:
            known = self._policies.get(policy.name)
            self._policies[policy.name] = policy
            reading = self._readings.get(policy.name)
            if known is not policy:
                self._due[policy.name] = 0.0
        if known is not policy:
            self._poke.set()  # a new or edited policy is read at once
        if reading is None:
            return None
        keep = self.workloads.keep_annotations()
        return ActivityReading(reading.measured_at, reading.window, reading.threshold, reading.workloads,
                               reading.error, reading.source, {k: v for k, v in keep.items()
                                                               if k in reading.workloads})

    def source(self, policy: QuotaPolicy) -> str | None:
        return self.url or policy.spec.idle.prometheus.url

    def read(self, policy: QuotaPolicy) -> ActivityReading:
        """One reading of the policy's telemetry now (errors in `error`, one line)."""
        settings = idle_settings(policy)
        now = self.clock()
        url = self.source(policy)
        namespaces = sorted({ns for t in policy.spec.teams for ns in t.namespaces})
        if url is None:
            return ActivityReading(now, settings.window_s, settings.threshold_percent,
                                   error="no Prometheus URL: set spec.idle.prometheus.url or qm run "
                                   "--prometheus-url")
        try:
            listed: list[dict[str, Any]] = []
            for ns in namespaces:
                listed += self.pods(ns)
        except Exception as err:  # the API or RBAC: unknown activity, said in one line
            return ActivityReading(now, settings.window_s, settings.threshold_percent, source=url,
                                   error=f"pods not listed: {' '.join(str(err).split())[:200]}")
        workloads = self.workloads.in_namespaces(namespaces)
        mapped = pod_workloads(listed, workloads)
        client = PrometheusClient(url, timeout_s=settings.timeout_s)
        started = time.perf_counter()
        try:
            series = client.query(promql(settings.metric, namespaces, settings.window_s), now)
        except TelemetryError as err:
            return ActivityReading(now, settings.window_s, settings.threshold_percent, source=url,
                                   error=f"{url}: {err}")
        finally:
            self.metrics.telemetry_query.observe(time.perf_counter() - started)
        if self.record is not None:
            records = activity_records(series, mapped, workloads, settings, now, self._recorded)
            try:
                self.record(records)
            except Exception as err:  # the ledger's spool refused them: said, never fatal for the reading
                log.warning("telemetry: activity not recorded in the ledger: %s", err)
        return reduce_series(series, mapped, settings, now, url)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                policies = list(self._policies.values())
                dues = dict(self._due)
            now = time.monotonic()
            wait = 5.0
            for policy in policies:
                name = policy.name
                interval = max(0.2, idle_settings(policy).scrape_interval_s)
                due = dues.get(name, 0.0)
                if due > now:
                    wait = min(wait, due - now)
                    continue
                with self._lock:
                    self._due[name] = now + interval
                wait = min(wait, interval)
                reading = self.read(policy)
                self._report(name, reading)
                with self._lock:
                    if name in self._policies:
                        self._readings[name] = reading
            self._poke.wait(max(0.05, wait))
            self._poke.clear()

    def _report(self, policy: str, reading: ActivityReading) -> None:
        up = reading.error is None
        self.metrics.telemetry_up.labels(policy).set(1 if up else 0)
        if up:
            self.metrics.telemetry_read_time.labels(policy).set(reading.measured_at)
            self.metrics.telemetry_series.labels(policy).set(sum(len(v) for v in reading.workloads.values()))
            if policy in self._failing:
                log.info("telemetry of policy %s read again", policy)
                self._failing.pop(policy)
        elif self._failing.get(policy) != reading.error:
            self._failing[policy] = reading.error or ""
            log.warning("telemetry of policy %s not read (activity unknown): %s", policy, reading.error)

    def close(self) -> None:
        self._stop.set()
        self._poke.set()
        self._thread.join(10)
