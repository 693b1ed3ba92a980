"""The one reader of the files the core is given: Kueue manifests, conformance cases, QuotaPolicies and
scenarios (and the text checks of trace files).

A file a person hands us can be anything: a binary, a 2 GB log, text in Latin-1, YAML nested 3,000
levels deep, an alias bomb, or a mapping with the same key twice. Each of these is ONE `InputError`
naming the file and, where it has one, the line and column; never a traceback, never a hang:

- size: at most `MAX_FILE_BYTES` (4 MiB) are read (the read itself stops there: a FIFO or /dev/zero ends too);
- text: UTF-8 (YAML 1.2 section 5.2; a byte-order mark is allowed), and no NUL byte (a binary file);
- depth: at most `MAX_DEPTH` nested collections, checked on the parser's event stream BEFORE any node
  is built: the composer and constructor recurse, so a deeper file would exhaust Python's stack (or,
  in libyaml's Cython composer, the C stack);
- aliases: at most `MAX_NODES` nodes once aliases are expanded (the "billion laughs" document is a few
  hundred bytes that expand to 10^9 nodes when anything walks it);
- duplicate keys are an error, as kubectl reports them (sigs.k8s.io/yaml in strict mode: `mapping key
  "x" already defined at line N`). PyYAML would silently keep the last value, so a policy with two
  `nominal:` lines would apply one of them without a word.

libyaml (`yaml.CSafeLoader`) is used when PyYAML has it: about 10x faster on large manifests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import yaml

from .errors import InputError, Location

# Dense YAML parses at roughly 1 MiB per 2 s on a busy 2-core machine (libyaml + PyYAML's constructor):
# 4 MiB keeps the worst file a few seconds, and is above any manifest set a person writes by hand (the
# largest Kueue object we know, the Workload CRD, is 1.4 MB).
MAX_FILE_BYTES = 4 * 1024 * 1024
# Kubernetes objects nest about 20 levels deep (a pod template's affinity terms); 100 leaves room.
MAX_DEPTH = 100
MAX_NODES = 1_000_000

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_REPARSE_LIMIT = 512 * 1024


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def decode_text(data: bytes, *, file: str | None = None) -> str:
    """UTF-8 text of a file's bytes; InputError naming the position of a NUL byte or an invalid byte."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(f"binary data, not text (a NUL byte at {_position(data, nul)})",
                         location=Location(file=file))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} at {_position(data, err.start)})",
            location=Location(file=file),
        ) from None


def read_bytes(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """A file's bytes, at most `max_bytes`; InputError naming the file when it cannot be read or is larger."""
    file = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as err:
        # strerror ("No such file or directory", "Is a directory"), not Python's exception repr.
        raise InputError(f"cannot read file: {err.strerror or err}", location=Location(file=file)) from None
    if len(data) > max_bytes:
        raise InputError(f"file too large: more than {max_bytes:,} bytes", location=Location(file=file))
    return data


def read_text_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A file's text (UTF-8, no NUL, size-capped); InputError naming the file otherwise."""
    return decode_text(read_bytes(path, max_bytes=max_bytes), file=str(path))


def _at(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


class _Loader(_BaseLoader):  # type: ignore[misc]  # PyYAML's loaders are untyped
    """The safe loader that rejects duplicate keys (kubectl does) instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None,
                    f"duplicate key {key_node.value!r} (first at line {seen[key].line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark
        return dict(super().construct_mapping(node, deep=deep))


def _scan(text: str, file: str | None, loader_class: Any = _BaseLoader) -> bool:
    """Check the nesting depth on the event stream (iterative, in both PyYAML's and libyaml's parser);
    True when the text has aliases (only then is the expansion worth counting)."""
    loader = loader_class(text)
    aliases = False
    try:
        depth = 0
        while True:
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                aliases = True
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"invalid YAML{_at(event.start_mark)}: nested more than {MAX_DEPTH} "
                                     "levels deep", location=Location(file=file))
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.StreamEndEvent):
                return aliases
    finally:
        loader.dispose()


def _check_expansion(node: yaml.Node, file: str | None) -> None:
    """The node count with aliases expanded (an alias is the same node object; memoized, iterative):
    an error when the aliases add more than MAX_NODES values."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(current, yaml.SequenceNode):
            children = list(current.value)
        elif isinstance(current, yaml.MappingNode):
            children = [n for pair in current.value for n in pair]
        if not children_done:
            stack.append((current, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        # What the aliases add beyond the distinct nodes seen so far: a large plain file is fine.
        if total - len(sizes) > MAX_NODES:
            raise InputError(f"invalid YAML{_at(current.start_mark)}: aliases expand to more than "
                             f"{MAX_NODES:,} values", location=Location(file=file))
        sizes[id(current)] = total


def _scan_with_plain_messages(text: str, file: str | None) -> bool:
    """`_scan` with libyaml; on a syntax error, the same text through PyYAML's own parser for its message,
    which points at the offending character ("line 1, column 16: expected ',' or ']', but got '<stream
    end>'") where libyaml names the next line. Only for texts up to 512 KiB: the pure parser is slow."""
    try:
        return _scan(text, file)
    except yaml.YAMLError as err:
        if "maximum nesting depth" in str(getattr(err, "problem", "")):
            # libyaml's own cap (1,000 flow levels), hit while it scans ahead, before our event count reaches
            # MAX_DEPTH; PyYAML's scanner would take seconds to get there (its simple-key lookahead is
            # quadratic in the nesting), so say it here, where libyaml stopped.
            raise InputError(f"invalid YAML{_at(getattr(err, 'problem_mark', None))}: nested more than "
                             f"{MAX_DEPTH} levels deep", location=Location(file=file)) from None
        if _BaseLoader is yaml.SafeLoader or len(text) > _REPARSE_LIMIT:
            raise
        return _scan(text, file, yaml.SafeLoader)  # raises the plain error (or the depth error)


def load_yaml_text(text: str, *, file: str | None = None) -> list[object]:
    """Every document of a YAML text (safe, duplicate keys rejected, depth and alias expansion capped)."""
    try:
        aliases = _scan_with_plain_messages(text, file)
        loader = _Loader(text)
        try:
            documents: list[object] = []
            while loader.check_node():
                node = loader.get_node()
                if aliases:
                    _check_expansion(node, file)
                documents.append(loader.construct_document(node))
            return documents
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"invalid YAML{_at(mark)}: {problem}", location=Location(file=file)) from None
    except ValueError as err:
        # PyYAML's constructors raise ValueError for a timestamp such as 2026-13-01 and for an integer
        # longer than Python converts (sys.get_int_max_str_digits, 4300 digits by default).
        problem = "an integer has too many digits" if "digits" in str(err) else str(err)
        raise InputError(f"invalid YAML: a value cannot be read: {problem}",
                         location=Location(file=file)) from None
    except RecursionError:  # pragma: no cover - the depth check comes first; kept as a last line
        raise InputError("invalid YAML: nested too deeply", location=Location(file=file)) from None


def load_yaml_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> list[object]:
    """Every document of a YAML file, with all the checks above."""
    return load_yaml_text(read_text_file(path, max_bytes=max_bytes), file=str(path))


def load_yaml_one(path: str | Path, *, what: str = "a mapping") -> dict[str, object]:
    """The single mapping document of a file (a scenario, a config): InputError when it has none, several
    or a document that is not a mapping."""
    file = str(path)
    documents = [d for d in load_yaml_file(path) if d is not None]
    if len(documents) != 1:
        found = "no document" if not documents else f"{len(documents)} documents"
        raise InputError(f"expected one YAML document ({what}), found {found}", location=Location(file=file))
    doc = documents[0]
    if not isinstance(doc, dict):
        raise InputError(f"the document must be {what}", location=Location(file=file, document="document 1"),
                         value=type(doc).__name__)
    return cast(dict[str, object], doc)
