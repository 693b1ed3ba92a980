from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairshare.errors import InputError
from fairshare.quantity import MAX_UNITS, MILLI, format_human, format_quantity, parse_quantity

CASES = [
    ("500m", 500),
    ("1", 1000),
    ("1.5", 1500),
    ("100Gi", 100 * 2**30 * 1000),
    ("2e3", 2_000_000),
    ("1Ki", 1_024_000),
    ("1k", 1_000_000),
    ("1M", 10**9),
    ("1E", 10**21),
    ("1Ei", 2**60 * 1000),
    ("1E-3", 1),
    (".5", 500),
    ("5.", 5000),
    ("-1.5", -1500),
    ("0.1m", 1),  # below one milli-unit: rounded up, as Quantity.MilliValue()
    ("100n", 1),
    ("3u", 1),
    (" 2 ", 2000),
    (4, 4000),
    (1.25, 1250),
]


@pytest.mark.parametrize(("text", "milli"), CASES, ids=[str(c[0]) for c in CASES])
def test_a_kubernetes_quantity_parses_to_exact_milli_units(text: str | int | float, milli: int) -> None:
    assert parse_quantity(text) == milli


GARBAGE = ["", "abc", "1.2.3", "1Kb", "--1", "1e", "e3", "1 Gi", "1e999999", "Ki"]


@pytest.mark.parametrize("text", GARBAGE, ids=[repr(g) for g in GARBAGE])
def test_garbage_is_an_input_error_that_shows_the_value(text: str) -> None:
    with pytest.raises(InputError) as err:
        parse_quantity(text)
    assert repr(text) in str(err.value)


def test_booleans_and_other_types_are_not_quantities() -> None:
    with pytest.raises(InputError):
        parse_quantity(True)
    with pytest.raises(InputError):
        parse_quantity([1])  # type: ignore[arg-type]


@given(st.integers(min_value=-MAX_UNITS * MILLI, max_value=MAX_UNITS * MILLI))
def test_format_then_parse_round_trips_every_milli_amount_kueue_can_count(milli: int) -> None:
    assert parse_quantity(format_quantity(milli)) == milli


@given(st.integers(min_value=MAX_UNITS * MILLI + 1, max_value=10**30), st.booleans())
def test_an_amount_beyond_what_kueue_can_count_is_refused(milli: int, negative: bool) -> None:
    with pytest.raises(InputError, match="quantity too large"):
        parse_quantity(format_quantity(-milli if negative else milli))


@given(
    st.integers(min_value=0, max_value=10**6),  # 10**6 Ti is still below 2^63-1 units (MAX_UNITS)
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]),
)
def test_parse_then_format_then_parse_is_stable(number: int, suffix: str) -> None:
    once = parse_quantity(f"{number}{suffix}")
    assert parse_quantity(format_quantity(once)) == once


def test_human_format_uses_binary_suffixes_for_memory_only() -> None:
    assert [
        format_human(parse_quantity("2Gi"), "memory"),
        format_human(parse_quantity("1536Mi"), "memory"),
        format_human(2000, "cpu"),
        format_human(1500, "memory"),
    ] == ["2Gi", "1536Mi", "2", "1500m"]
