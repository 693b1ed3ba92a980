from __future__ import annotations

from pathlib import Path

import pytest

from fairshare.errors import InputError
from simulations.scenario import TraceSpec, WorkloadSource
from simulations.traces import import_trace, read_trace

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT.parent / "shared" / "traces"
DATA = ROOT / "tests" / "data"


def _spec(fmt: str, paths: list[str], **extra: object) -> TraceSpec:
    return TraceSpec.model_validate(
        {"format": fmt, "paths": paths, "queues": {"rule": "single", "localQueue": "team/main"}, **extra}
    )


def test_itp_import_totals_are_exactly_the_published_figures() -> None:
    jobs, stats = read_trace(_spec("itp", [str(TRACES / "itp" / "cluster*.csv")]), ROOT)
    assert (len(stats.files), stats.jobs, len(jobs)) == (10, 69_351, 69_351)
    # 5,877,791,065 GPU-seconds exactly; 1,632,719.7 GPU-hours to the published precision.
    assert stats.gpu_milli_seconds == 5_877_791_065_000
    assert round(stats.gpu_hours, 1) == 1_632_719.7
    assert stats.skipped == {}


def test_the_itp_slice_in_tests_data_matches_its_source_rows() -> None:
    jobs, stats = read_trace(_spec("itp", [str(DATA / "itp-cluster10-head.csv")]), ROOT)
    source = (TRACES / "itp" / "cluster10.csv").read_text().splitlines()[1:51]
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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("job_id,submission_time,duration\n", "no column(s) num_gpu"),
        ("job_id,submission_time,duration,num_gpu\nx,1,2,two\n", "line 2: column num_gpu is not an integer"),
    ],
    ids=["missing column", "bad number"],
)
def test_a_broken_trace_is_one_line_naming_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(content)
    with pytest.raises(InputError) as err:
        read_trace(_spec("itp", [str(f)]), tmp_path)
    assert message in str(err.value)
    assert str(f) in str(err.value)
