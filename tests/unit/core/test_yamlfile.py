"""The one file reader (fairshare/yamlfile.py): every hostile file is one located line, fast."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshare import yamlfile
from fairshare.errors import InputError

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)
)

BAD_TEXT: dict[str, tuple[str, str]] = {
    "a key given twice is refused as kubectl does": (
        "a: 1\nb: 2\na: 3\n",
        "f.yaml: invalid YAML at line 3, column 1: duplicate key 'a' (first at line 1)"),
    "a key given twice in a nested mapping names its line": (
        "spec:\n  x: 1\n  y: 2\n  x: 3\n",
        "f.yaml: invalid YAML at line 4, column 3: duplicate key 'x' (first at line 2)"),
    "block mappings nested 3,000 deep stop at the 101st level": (
        "".join("  " * i + "a:\n" for i in range(3000)),
        "f.yaml: invalid YAML at line 101, column 201: nested more than 100 levels deep"),
    "flow lists nested 500 deep stop at the 101st level": (
        "a: " + "[" * 500 + "]" * 500, "f.yaml: invalid YAML at line 1, column 103: nested more than 100 "
        "levels deep"),
    "flow lists nested 3,000 deep stop where libyaml's own cap (1,000 flow levels) does": (
        "a: " + "[" * 3000 + "]" * 3000, "f.yaml: invalid YAML at line 1, column 1003: nested more than 100 "
        "levels deep"),
    "aliases that expand to a billion values are refused": (
        BOMB, "f.yaml: invalid YAML at line 6, column 4: aliases expand to more than 1,000,000 values"),
    "an unclosed list points at the end": (
        "spec: [unclosed", "f.yaml: invalid YAML at line 1, column 16: expected ',' or ']', but got "
        "'<stream end>'"),
    "a Python tag is not constructed": (
        "a: !!python/object:os.system x\n", "f.yaml: invalid YAML at line 1, column 4: could not determine a "
        "constructor for the tag 'tag:yaml.org,2002:python/object:os.system'"),
    "a timestamp with month 13": (
        "a: 2026-13-01\n", "f.yaml: invalid YAML: a value cannot be read: month must be in 1..12"),
}


@pytest.mark.parametrize(("text", "line"), BAD_TEXT.values(), ids=BAD_TEXT.keys())
def test_a_hostile_yaml_text_is_one_located_line(text: str, line: str) -> None:
    with pytest.raises(InputError) as err:
        yamlfile.load_yaml_text(text, file="f.yaml")
    assert str(err.value) == line


def test_merge_keys_and_anchors_that_expand_little_are_read() -> None:
    text = "x: &x {a: 1}\ny: {<<: *x, b: 2}\nz: [*x, *x]\n---\nc: 3\n"
    assert yamlfile.load_yaml_text(text) == [
        {"x": {"a": 1}, "y": {"a": 1, "b": 2}, "z": [{"a": 1}, {"a": 1}]}, {"c": 3}]


BAD_BYTES: dict[str, tuple[bytes, str]] = {
    "a binary file names its first NUL byte": (
        b"a: 1\nb: \x00\x01\x02", "{f}: binary data, not text (a NUL byte at line 2, column 4)"),
    "Latin-1 text names the byte and its position": (
        b"a: 1\nname: caf\xe9\n", "{f}: not UTF-8 text (byte 0xe9 at line 2, column 10)"),
}


@pytest.mark.parametrize(("data", "line"), BAD_BYTES.values(), ids=BAD_BYTES.keys())
def test_a_file_that_is_not_text_is_one_located_line(tmp_path: Path, data: bytes, line: str) -> None:
    f = tmp_path / "in.yaml"
    f.write_bytes(data)
    with pytest.raises(InputError) as err:
        yamlfile.load_yaml_file(f)
    assert str(err.value) == line.format(f=f)


def test_a_file_over_the_cap_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    f = tmp_path / "big.yaml"
    f.write_bytes(b"a: b\n" * (yamlfile.MAX_FILE_BYTES // 5 + 1))
    with pytest.raises(InputError) as err:
        yamlfile.load_yaml_file(f)
    assert str(err.value) == f"{f}: file too large: more than 4,194,304 bytes"


def test_an_endless_device_is_capped_too() -> None:
    with pytest.raises(InputError) as err:
        yamlfile.read_text_file("/dev/zero", max_bytes=1024)
    assert str(err.value) == "/dev/zero: file too large: more than 1,024 bytes"


@pytest.mark.parametrize(("path", "line"), [
    ("/nonexistent/x.yaml", "/nonexistent/x.yaml: cannot read file: No such file or directory"),
    ("/", "/: cannot read file: Is a directory"),
], ids=["missing", "directory"])
def test_an_unreadable_path_names_the_reason(path: str, line: str) -> None:
    with pytest.raises(InputError) as err:
        yamlfile.load_yaml_file(path)
    assert str(err.value) == line


@pytest.mark.parametrize(("text", "line"), [
    ("", "{f}: expected one YAML document (a scenario), found no document"),
    ("a: 1\n---\nb: 2\n", "{f}: expected one YAML document (a scenario), found 2 documents"),
    ("- 1\n", "{f}: document 1: the document must be a scenario (got 'list')"),
], ids=["empty", "two documents", "a list"])
def test_one_mapping_document_is_required_where_a_file_holds_one_object(
        tmp_path: Path, text: str, line: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        yamlfile.load_yaml_one(f, what="a scenario")
    assert str(err.value) == line.format(f=f)
