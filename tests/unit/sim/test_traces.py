from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from fairshare.errors import InputError
from simulations.jobs import JobSpec
from simulations.scenario import TraceSpec, WorkloadSource
from simulations.traces import NeverFit, Oversized, import_trace, never_fit, never_fit_warning, read_trace

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="module")
def itp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole Microsoft ITP 2021 trace (10 clusters), from its vendored archive (tests/data/README.md)."""
    out = tmp_path_factory.mktemp("itp")
    with tarfile.open(DATA / "itp-2021.tar.xz") as archive:
        archive.extractall(out, filter="data")
    return out


def _spec(fmt: str, paths: list[str], **extra: object) -> TraceSpec:
    return TraceSpec.model_validate(
        {"format": fmt, "paths": paths, "queues": {"rule": "single", "localQueue": "team/main"}, **extra}
    )


def test_itp_import_totals_are_exactly_the_published_figures(itp: Path) -> None:
    jobs, stats = read_trace(_spec("itp", [str(itp / "cluster*.csv")]), ROOT)
    assert (len(stats.files), stats.jobs, len(jobs)) == (10, 69_351, 69_351)
    # 5,877,791,065 GPU-seconds exactly; 1,632,719.7 GPU-hours to the published precision.
    assert stats.gpu_milli_seconds == 5_877_791_065_000
    assert round(stats.gpu_hours, 1) == 1_632_719.7
    assert stats.skipped == {}


def test_the_itp_slice_in_tests_data_matches_its_source_rows(itp: Path) -> None:
    jobs, stats = read_trace(_spec("itp", [str(DATA / "itp-cluster10-head.csv")]), ROOT)
    source = (itp / "cluster10.csv").read_text().splitlines()[1:51]
    assert [j.id for j in jobs] == [line.split(",")[0] for line in source]
    assert stats.gpu_milli_seconds == sum(int(r.split(",")[2]) * int(r.split(",")[3]) * 1000 for r in source)


def test_openb_pods_that_never_ran_are_skipped_and_fractional_gpus_kept() -> None:
    jobs, stats = read_trace(_spec("openb", [str(DATA / "openb-head.csv")]), ROOT)
    assert stats.skipped.get("never scheduled", 0) + stats.jobs == 40
    by_id = {j.id: j for j in jobs}
    assert by_id["openb-pod-0001"].gpu_milli == 460
    assert by_id["openb-pod-0001"].duration == 12902960 - 427061


def test_swf_records_take_allocated_processors_and_run_time() -> None:
    jobs, stats = read_trace(_spec("swf", [str(DATA / "nasa-ipsc-head.swf")], resource="cpu"), ROOT)
    assert (stats.jobs, jobs[0].submit, jobs[0].duration, jobs[0].gpu_milli) == (30, 0.0, 1451.0, 128_000)
    assert (jobs[0].attrs["user"], jobs[0].attrs["queue"]) == ("1", "-1")


def test_a_generic_csv_maps_columns_and_assigns_queues_and_priorities_by_column(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("id,t,run,g,team,tier\na,10,5,2,x,gold\nb,12,7,500m,y,bronze\nc,11,1,1,z,gold\n")
    src = WorkloadSource.model_validate(
        {
            "name": "csv",
            "trace": {
                "format": "csv",
                "paths": [str(f)],
                "columns": {"id": "id", "submit": "t", "duration": "run", "gpus": "g", "priority": "tier"},
                "queues": {"rule": "column", "column": "team", "map": {"x": "nx/q", "y": "ny/q"}},
                "priorityMap": {"gold": "high"},
                "priorityClass": "low",
                "timeScale": 2,
            },
        }
    )
    jobs, stats = import_trace(src, tmp_path)
    got = [(j.namespace, j.arrival, j.duration, j.requests, j.priority_class) for j in jobs]
    assert got == [
        ("nx", 0.0, 10.0, (("nvidia.com/gpu", 2000),), "high"),
        ("ny", 4.0, 14.0, (("nvidia.com/gpu", 500),), "low"),
    ]
    assert stats.skipped == {"no queue for the job": 1}


def test_the_hash_rule_is_stable_and_spreads_jobs() -> None:
    src = WorkloadSource.model_validate(
        {
            "name": "itp",
            "trace": {
                "format": "itp",
                "paths": [str(DATA / "itp-cluster10-head.csv")],
                "queues": {"rule": "hash", "localQueues": ["a/q", "b/q", "c/q"]},
            },
        }
    )
    first, _ = import_trace(src, ROOT)
    second, _ = import_trace(src, ROOT)
    assert first == second
    assert {j.namespace for j in first} == {"a", "b", "c"}


ITP_HEADER = "job_id,submission_time,duration,num_gpu\n"

BAD_ITP: dict[str, tuple[bytes, str]] = {
    "a header without a required column": (
        b"job_id,submission_time,duration\n",
        "{f}: trace has no column(s) num_gpu (got ['job_id', 'submission_time', 'duration'])"),
    "a row with a missing column": (
        (ITP_HEADER + "a,1,2,1\nb,1,2\n").encode(),
        "{f}: line 3: the row has 3 fields, the header 4; column num_gpu is missing (got 'b,1,2')"),
    "a row with one field too many": (
        (ITP_HEADER + "a,1,2,1,9\n").encode(),
        "{f}: line 2: the row has 5 fields, the header 4 (got 'a,1,2,1,9')"),
    "a GPU count in words": (
        (ITP_HEADER + "a,1,2,ten\n").encode(), "{f}: line 2: column num_gpu is not an integer (got 'ten')"),
    "a negative duration": (
        (ITP_HEADER + "a,1,-600,1\n").encode(),
        "{f}: line 2: column duration must be >= 0 seconds (got '-600')"),
    "an infinite duration": (
        (ITP_HEADER + "a,1,inf,1\n").encode(),
        "{f}: line 2: column duration must be a finite number of seconds (got 'inf')"),
    "a submission time that is not a number": (
        (ITP_HEADER + "a,nan,5,1\n").encode(),
        "{f}: line 2: column submission_time must be a finite number of seconds (got 'nan')"),
    "a negative GPU count": (
        (ITP_HEADER + "a,1,5,-2\n").encode(), "{f}: line 2: column num_gpu must be >= 0 (got '-2')"),
    "an unterminated quote": (
        (ITP_HEADER + 'a,1,5,1\n"b,1,5,1\nc,1,5,1\n').encode(),
        "{f}: line 4: not a CSV trace: unexpected end of data"),
    "a 10 MB field": (
        (ITP_HEADER + "a,1,5," + "9" * 10_000_000 + "\n").encode(),
        "{f}: line 2: a line longer than 1,048,576 bytes (got b'a,1,5,9999999999999999999999999999999999')"),
    "a quoted field over the csv module's limit": (
        (ITP_HEADER + 'a,1,5,"' + "9" * 200_000 + '"\n').encode(),
        "{f}: line 2: not a CSV trace: field larger than field limit (131072)"),
    "binary data": (
        ITP_HEADER.encode() + b"a,1,5,1\n\x89PNG\x00\x1a\n",
        "{f}: line 3: binary data, not a text trace (a NUL byte)"),
    "bytes that are not UTF-8": (
        (ITP_HEADER + "a,1,5,1\n").encode() + b"caf\xe9,1,5,1\n",
        "{f}: line 3: not UTF-8 text (byte 0xe9 at column 4)"),
    "an empty file": (b"", "{f}: the trace is empty (no header line)"),
    "a header only": (ITP_HEADER.encode(), "{f}: the trace has a header but no rows"),
}


@pytest.mark.parametrize(("content", "line"), BAD_ITP.values(), ids=BAD_ITP.keys())
def test_a_broken_trace_is_one_line_naming_file_line_column_and_value(
        tmp_path: Path, content: bytes, line: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_trace(_spec("itp", [str(f)]), tmp_path)
    assert str(err.value) == line.format(f=f)


BAD_SWF: dict[str, tuple[str, str]] = {
    "an empty SWF file": ("", "{f}: the trace has no SWF records (the file is empty)"),
    "an SWF file of comments only": ("; Version: 2\n; Note: nothing\n",
                                      "{f}: the trace has no SWF records (only comments)"),
    "an SWF record with a field in words": (
        "1 0 0 ten 4 -1 -1 4 -1 -1 1 1 1 1 1 -1 -1 -1\n",
        "{f}: line 1: column run time is not an integer (got 'ten')"),
    "an SWF record below -1": (
        "1 0 0 5 -7 -1 -1 4 -1 -1 1 1 1 1 1 -1 -1 -1\n",
        "{f}: line 1: column allocated processors must be >= -1 (got '-7')"),
}


@pytest.mark.parametrize(("content", "line"), BAD_SWF.values(), ids=BAD_SWF.keys())
def test_a_broken_swf_trace_is_one_line(tmp_path: Path, content: str, line: str) -> None:
    f = tmp_path / "bad.swf"
    f.write_text(content)
    with pytest.raises(InputError) as err:
        read_trace(_spec("swf", [str(f)]), tmp_path)
    assert str(err.value) == line.format(f=f)


def _csv_source(path: Path, **queues: object) -> WorkloadSource:
    return WorkloadSource.model_validate({"name": "t", "trace": {
        "format": "csv", "paths": [str(path)],
        "columns": {"id": "id", "submit": "t", "duration": "run", "gpus": "g"},
        "queues": queues or {"rule": "single", "localQueue": "ns/q"}}})


def test_a_column_rule_on_a_column_the_csv_lacks_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("id,t,run,g\na,1,5,1\n")
    with pytest.raises(InputError) as err:
        import_trace(_csv_source(f, rule="column", column="team", map={"x": "a/q"}), tmp_path)
    assert str(err.value) == (f"{f}: field trace.queues.column: queues.column names a column the trace "
                              "does not have ('team'); it has: id, t, run, g (got 'team')")


def test_a_column_rule_on_a_format_without_that_column_is_an_error() -> None:
    src = WorkloadSource.model_validate({"name": "itp", "trace": {
        "format": "itp", "paths": [str(DATA / "itp-cluster10-head.csv")],
        "queues": {"rule": "column", "column": "team", "default": "a/q"}}})
    with pytest.raises(InputError) as err:
        import_trace(src, ROOT)
    assert str(err.value) == ("field trace.queues.column: format itp has no column 'team' to assign queues "
                              "by (columns a rule can read: none) (got 'team')")


def test_a_local_queue_without_a_namespace_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("id,t,run,g\na,1,5,1\n")
    with pytest.raises(InputError) as err:
        import_trace(_csv_source(f, rule="hash", localQueues=["ns/q", "q"]), tmp_path)
    assert str(err.value) == ("field trace.queues.localQueues[1]: a LocalQueue is written namespace/name "
                              "(got 'q')")


def test_the_report_counts_rows_read_skipped_by_reason_and_kept(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("id,t,run,g,team\na,1,5,1,x\nb,2,5,0,x\n\nc,3,5,2,y\nd,4,5,1,z\ne,5,5,1,x\n")
    src = WorkloadSource.model_validate({"name": "t", "trace": {
        "format": "csv", "paths": [str(f)], "limit": 4,
        "columns": {"id": "id", "submit": "t", "duration": "run", "gpus": "g"},
        "queues": {"rule": "column", "column": "team", "map": {"x": "nx/q", "y": "ny/q"}}}})
    jobs, report = import_trace(src, tmp_path)
    assert ([j.name for j in jobs], report.rows, report.jobs, report.kept, report.skipped) == (
        ["t-0000000", "t-0000002"], 5, 5, 2,
        {"beyond trace.limit": 1, "requests no GPU": 1, "no queue for the job": 1})
    assert report.summary_line("t") == ("trace t: 5 rows read from 1 file, 3 skipped (1 beyond trace.limit, "
                                        "1 no queue for the job, 1 requests no GPU), 2 kept")


def test_openb_counts_pods_that_never_ran_as_skipped_rows() -> None:
    src = WorkloadSource.model_validate({"name": "o", "trace": {
        "format": "openb", "paths": [str(DATA / "openb-head.csv")],
        "queues": {"rule": "column", "column": "qos", "map": {"LS": "a/q"}, "default": "b/q"}}})
    jobs, report = import_trace(src, ROOT)
    assert report.rows == 40
    assert report.rows == report.kept + sum(report.skipped.values())
    assert report.kept == len(jobs) and {j.namespace for j in jobs} <= {"a", "b"}


def _job(name: str, queue: str, gpus: int, duration: float = 3600.0) -> JobSpec:
    ns, lq = queue.split("/")
    return JobSpec(name, ns, lq, 0.0, duration, 1, (("nvidia.com/gpu", gpus * 1000),), None, "t")


def test_jobs_that_can_never_fit_are_counted_with_the_largest_named() -> None:
    jobs = [_job("a", "r/q", 4), _job("b", "r/q", 16), _job("c", "b/q", 2), _job("d", "x/q", 1)]
    found = never_fit(jobs, {"r/q": {"nvidia.com/gpu": 8000}, "b/q": {"nvidia.com/gpu": 2000}})
    assert found == NeverFit(jobs=2, total=4, gpu_milli_seconds=(16_000 + 1_000) * 3600,
                             largest=Oversized("r/q", "nvidia.com/gpu", 16_000, 8_000))
    assert never_fit_warning("itp", found) == (
        "warning: trace itp: 2 of 4 jobs (50.0%) can never be admitted: they request more than their queue "
        "can ever hold (largest: 16 nvidia.com/gpu in r/q, which can hold at most 8)")


def test_no_warning_when_every_job_can_fit() -> None:
    found = never_fit([_job("a", "r/q", 4)], {"r/q": {"nvidia.com/gpu": 4000}})
    assert (found.jobs, never_fit_warning("itp", found)) == (0, None)
