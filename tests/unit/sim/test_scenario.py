from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fairshare.errors import InputError
from qm.cli import main
from simulations.loader import load_scenario, merge_patch

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = ROOT / "simulations" / "scenarios" / "frontier-shrink.yaml"

MINIMAL = """
name: t
horizon: 1d
cluster: {objects: [{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}}]}
workloads:
  - name: w
    localQueue: ns/q
    generator:
      arrivals: {kind: poisson, ratePerHour: 1}
      durations: {kind: exponential, mean: 1h}
      requests: [{resources: {cpu: 1}}]
"""


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return f


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "horizon: 1d",
            "horizon: soon",
            "field horizon: must be a duration such as 90s, 30m, 1h30m, 336h, 14d, 2w (got 'soon')",
        ),
        (
            "ratePerHour: 1",
            "ratePerHour: -1",
            "field workloads[0].generator.arrivals.ratePerHour: Input should be",
        ),
        ("kind: poisson", "kind: bursty", "field workloads[0].generator.arrivals: Input tag 'bursty'"),
        ("{cpu: 1}", "{cpu: lots}", "field workloads[0].generator.requests[0].resources.cpu: not a quantity"),
        ("localQueue: ns/q", "localQueue: q", "field workloads[0]: localQueue must be namespace/name"),
        ("horizon: 1d", "horizon: 1d\nsurprise: 1", "field surprise: Extra inputs are not permitted"),
        ("name: t\n", "", "field name: Field required"),
    ],
    ids=[
        "bad duration",
        "negative rate",
        "unknown arrival kind",
        "bad quantity",
        "queue without namespace",
        "unknown field",
        "missing name",
    ],
)
def test_a_bad_scenario_is_one_line_naming_the_file_and_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    f = _write(tmp_path, MINIMAL.replace(old, new, 1))
    with pytest.raises(InputError) as err:
        load_scenario(f)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{f}: ")
    assert message in text


def test_an_error_inside_a_variant_names_the_variant(tmp_path: Path) -> None:
    f = _write(
        tmp_path, MINIMAL + "variants:\n  - name: base\n  - name: faster\n    overrides: {horizon: -3}\n"
    )
    with pytest.raises(
        InputError,
        match=r"field variants\[1\] \(faster\) overrides.horizon: must be a finite, non-negative "
        r"number of seconds \(got -3\)",
    ):
        load_scenario(f)


def test_a_variant_is_the_base_document_with_its_merge_patch(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        MINIMAL + "variants:\n  - name: base\n  - name: long\n    overrides: {horizon: 2d, seed: 5}\n",
    )
    loaded = load_scenario(f)
    got = [(v.name, v.baseline, v.scenario.horizon, v.scenario.seed) for v in loaded.variants]
    assert got == [("base", True, 86400.0, 0), ("long", False, 172800.0, 5)]


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 9}}, {"a": 1, "b": {"c": 9, "d": 3}}),
        ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),
        ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
    ],
    ids=["nested merge", "null deletes", "lists are replaced"],
)
def test_merge_patch_follows_rfc_7386(
    target: dict[str, object], patch: dict[str, object], expected: dict[str, object]
) -> None:
    assert merge_patch(target, patch) == expected


def test_the_bundled_scenario_compares_the_ways_to_move_research_gpus_to_business() -> None:
    loaded = load_scenario(BUNDLED)
    names = [v.name for v in loaded.variants]
    assert names[0] == "no change" and loaded.variants[0].baseline
    assert names[1:] == ["cut research only", "paired move at once", "paired move, gradual",
                         "paired move, gradual + experiment preemption"]

    def nominals(v: object) -> dict[str, int]:
        events = v.scenario.events
        if not events:
            return {}
        return {t["name"]: t["quotas"][0]["resources"][0]["nominal"]
                for t in events[0].policy_patch["spec"]["teams"]}

    paired = {"ai-frontier-research": 1, "biz-model-serving": 19}
    assert [nominals(v) for v in loaded.variants] == [{}, {"ai-frontier-research": 1}, paired, paired, paired]

    def protected(v: object) -> tuple[list[str], list[str]]:
        """The protected classes from day 0, and from the edit."""
        policy = v.scenario.cluster.quota_policy
        edit = v.scenario.events[0].policy_patch["spec"] if v.scenario.events else {}
        return (list(policy["spec"].get("preemption", {}).get("protectedClasses", [])),
                list(edit.get("preemption", {}).get("protectedClasses", [])))

    # The lever is turned on with the edit (day 7), not from day 0: compared with the gradual move it is
    # the lever alone (leverOf).
    assert [protected(v) for v in loaded.variants] == [([], [])] * 4 + [([], ["high-priority-business"])]
    assert [v.lever_of for v in loaded.base.variants] == [None] * 4 + ["paired move, gradual"]
    assert {o.metric for o in loaded.base.objectives} >= {"wait_p95[high-priority-business]",
                                                               "policy_evictions_max"}


def test_qm_simulate_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "Scenario"
    assert {"horizon", "workloads", "variants", "cluster", "checkpointInterval"} <= set(schema["properties"])


@pytest.mark.parametrize("path", sorted((ROOT / "simulations" / "scenarios").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_bundled_scenario_is_valid_under_the_published_json_schema(
        path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import jsonschema

    assert main(["simulate", "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    doc = yaml.safe_load(path.read_text())
    jsonschema.validate(doc, schema)  # raises with the path of the first violation


def test_qm_simulate_reports_a_bad_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _write(tmp_path, MINIMAL.replace("horizon: 1d", "horizon: [1]"))
    assert main(["simulate", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("qm simulate: error: ") and "field horizon" in err and "\n" not in err
