from __future__ import annotations

import pytest

from fairshare.history import NodeKind, NodePath

from .helpers import path


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("/", []),
        ("/cohort:eng", ["cohort"]),
        ("/cohort:eng/cohort:research/cq:frontier", ["cohort", "cohort", "cq"]),
        ("/cq:solo/lq:team-a/default", ["cq", "lq"]),
        ("/cohort:eng/cq:frontier/lq:ai-research/default/project:llm", ["cohort", "cq", "lq", "project"]),
    ],
    ids=["root", "cohort", "nested-cohorts", "cq-without-cohort", "full-depth"],
)
def test_a_path_round_trips_through_its_text_form(text: str, kinds: list[str]) -> None:
    p = NodePath.parse(text)
    assert str(p) == text
    assert [s.kind for s in p.segments] == kinds
    assert NodePath.parse(str(p)) == p


@pytest.mark.parametrize(
    "text",
    ["cohort:eng", "/lq:ns/q", "/cq:a/cohort:b", "/cohort:eng/cq:a/lq:ns", "/cohort:eng/unknown:x",
     "/cohort:a:b", "/cq:a/project:p"],
    ids=["no-leading-slash", "lq-under-root", "cohort-under-cq", "lq-without-name", "unknown-kind",
         "colon-in-name", "project-under-cq"],
)
def test_a_malformed_path_is_refused_with_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        NodePath.parse(text)


def test_paths_order_parents_before_children_and_siblings_by_name() -> None:
    paths = [path("/cohort:b"), path("/cohort:a/cq:z"), path("/"), path("/cohort:a"), path("/cohort:a/cq:b")]
    expected = ["/", "/cohort:a", "/cohort:a/cq:b", "/cohort:a/cq:z", "/cohort:b"]
    assert [str(p) for p in sorted(paths)] == expected


def test_a_path_knows_its_parent_kind_name_and_ancestors() -> None:
    p = NodePath.of((NodeKind.COHORT, "eng"), (NodeKind.CLUSTER_QUEUE, "a"), (NodeKind.LOCAL_QUEUE, "ns/q"))
    assert (p.kind, p.name, p.depth) == (NodeKind.LOCAL_QUEUE, "ns/q", 3)
    assert p.parent == path("/cohort:eng/cq:a")
    assert [str(a) for a in p.ancestors()] == ["/", "/cohort:eng", "/cohort:eng/cq:a"]
    assert NodePath.root().parent is None
