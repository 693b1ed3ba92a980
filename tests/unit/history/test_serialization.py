from __future__ import annotations

import json
from typing import Any

import pytest

from fairshare.errors import InputError, Location
from fairshare.history import SCHEMA_VERSION, from_dict, to_dict

from .helpers import CPU, GPU, graph, path


def sample() -> dict[str, Any]:
    g = graph(half_life_hours=24, created_at=1000)
    g.record_interval(path("/cohort:eng/cq:a/lq:ns-a/q"), GPU, 2000, 1000, 4600)
    g.record_interval(path("/cohort:eng/cq:b/lq:ns-b/q"), CPU, 8000, 2000, 3000)
    g.start("ns-b/train", path("/cohort:eng/cq:b/lq:ns-b/q"), {GPU: 1000}, 4600)
    g.add_node(path("/cohort:eng/cq:b"), weight=3000)
    return to_dict(g)


def test_the_serialized_form_is_compact_json_with_a_schema_version() -> None:
    data = sample()
    assert data["schemaVersion"] == SCHEMA_VERSION == 1
    assert data["flavorResources"] == [["a100", "nvidia.com/gpu"], ["default", "cpu"]]
    assert [row[:3] for row in data["nodes"]] == [
        [-1, "", 1000], [0, "cohort:eng", 1000], [1, "cq:a", 1000], [2, "lq:ns-a/q", 1000], [1, "cq:b", 3000],
        [4, "lq:ns-b/q", 1000]]
    assert data["running"] == [["ns-b/train", 5, 4600000, [1000, 0]]]
    assert json.loads(json.dumps(data)) == data


def mutate(data: dict[str, Any], field: str, value: object) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(data))
    target: Any = out
    *parents, last = field.split(".")
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return out


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("schemaVersion", 2, "field history.status.schemaVersion: unsupported history schemaVersion "
                             "(this build reads 1) (got 2)"),
        ("halfLifeMs", 0, "field history.status.halfLifeMs: Input should be greater than 0 (got 0)"),
        ("nodes.2.0", 7, "field history.status.nodes[2]: parentIndex must name an earlier node (got 7)"),
        ("nodes.2.1", "queue:a", "field history.status.nodes[2]: unknown node kind"),
        ("nodes.0", [0, "cq:a", 1000, [0, 0]], "field history.status.nodes[0]: node 0 must be the root"),
        ("nodes.3.3", [1.5], "field history.status.nodes[3]: node row needs a weight >= 0 and one mass per "
                              "flavorResources column"),
        ("running.0.1", 99, "field history.status.running[0]: running entry names an unknown node"),
        ("epochMs", 10**30, "field history.status.epochMs: epochMs must be at most watermarkMs and at most "
                            "901 half-lives before it (got 1000000000000000000000000000000)"),
        ("nodes.3.3.0", float("nan"), "field history.status.nodes.3.3.0: Input should be a finite number "
                                      "(got nan)"),
    ],
    ids=["schema-version", "half-life", "parent-index", "node-kind", "root-row", "mass-columns",
         "running-node", "an-epoch-after-the-watermark", "a-mass-that-is-not-a-number"],
)
def test_a_malformed_serialized_history_names_the_bad_field(field: str, value: object, message: str) -> None:
    bad = mutate(sample(), field, value)
    with pytest.raises(InputError) as err:
        from_dict(bad, location=Location(field="history.status"))
    assert err.value.one_line().startswith(message)
