"""The identity test the controller's memories share (fairshare.control.same.same_objects): the same objects
in the same order, never equal copies."""

from __future__ import annotations

import pytest

from fairshare.control.same import same_objects

A, B, C = ["a"], ["b"], ["c"]  # lists: equal copies are distinct objects


@pytest.mark.parametrize(
    ("these", "those", "same"),
    [
        pytest.param([], [], True, id="two empty sequences are the same"),
        pytest.param([A, B, C], [A, B, C], True, id="the same objects in the same order are the same"),
        pytest.param((A, B), [A, B], True, id="a tuple and a list of the same objects are the same"),
        pytest.param([A, B], [A, ["b"]], False, id="an equal copy is not the same object"),
        pytest.param([A, B], [B, A], False, id="the same objects in another order are not the same"),
        pytest.param([A, B], [A, B, C], False, id="a longer sequence is not the same"),
        pytest.param([A, B, C], [A, B], False, id="a shorter sequence is not the same"),
        pytest.param([A, B, C], [A, B, A], False, id="a difference in the last place is found"),
        pytest.param([C, B, A], [A, B, A], False, id="a difference in the first place is found"),
    ],
)
def test_same_objects(these: list[object], those: list[object], same: bool) -> None:
    assert same_objects(these, those) is same
    assert same_objects(those, these) is same
