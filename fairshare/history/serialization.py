"""A compact, schema-versioned, JSON-able form of the history graph (it lives in a CR's status).

Layout (schemaVersion 1)::

    {"schemaVersion": 1, "halfLifeMs": int, "createdMs": int, "epochMs": int, "watermarkMs": int,
     "flavorResources": [[flavor, resource], ...],                    # column table, sorted
     "nodes": [[parentIndex, "kind:name", weightMilli, [mass per column]], ...],   # root first, parents first
     "running": [[workloadKey, nodeIndex, startMs, [milli per column]], ...]}

Masses are the epoch-frame floats of decay.py, written with Python's shortest round-trip repr, so a
round trip is exact: the restored graph answers every read bit-for-bit as the original. The root is
node 0 with parent -1 and segment "".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError

from fairshare.errors import InputError, Location
from fairshare.history.decay import HalfLife
from fairshare.history.graph import MAX_REBASE_AFTER, OpenInterval, UsageHistoryGraph
from fairshare.history.paths import NodeKind, NodePath
from fairshare.models import FlavorResource

SCHEMA_VERSION = 1


class _Serialized(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_version: int = Field(alias="schemaVersion")
    half_life_ms: int = Field(alias="halfLifeMs", gt=0)
    created_ms: int = Field(alias="createdMs")
    epoch_ms: int = Field(alias="epochMs")
    watermark_ms: int = Field(alias="watermarkMs")
    flavor_resources: list[tuple[str, str]] = Field(alias="flavorResources")
    nodes: list[tuple[int, str, int, list[FiniteFloat]]]  # NaN/inf would poison every read
    running: list[tuple[str, int, int, list[int]]] = []


def to_dict(graph: UsageHistoryGraph) -> dict[str, Any]:
    """The graph as a JSON-able dict (deterministic: same graph, same dict)."""
    state = list(graph.stored_state())
    running = graph.running()
    # Only the columns that hold something: a mass or a quantity of 0 reads back as absent (from_dict), so a
    # column of zeros would not survive a round trip; dropping it here keeps to_dict(from_dict(d)) == d.
    columns = sorted({fr for _, _, masses in state for fr, m in masses.items() if m != 0.0}
                     | {fr for interval in running for fr, q in interval.usage if q != 0})
    col = {fr: i for i, fr in enumerate(columns)}
    index = {path: i for i, (path, _, _) in enumerate(state)}
    nodes: list[list[Any]] = []
    for path, weight, masses in state:
        row = [0.0] * len(columns)
        for fr, m in masses.items():
            if m != 0.0:
                row[col[fr]] = m
        parent = path.parent
        segment = str(path[-1]) if path else ""
        nodes.append([index[parent] if parent is not None else -1, segment, weight, _compact(row)])
    runs: list[list[Any]] = []
    for interval in running:
        qty = [0] * len(columns)
        for fr, q in interval.usage:
            if q != 0:
                qty[col[fr]] = q
        runs.append([interval.key, index[interval.path], interval.start_tick, qty])
    return {
        "schemaVersion": SCHEMA_VERSION,
        "halfLifeMs": graph.half_life.ticks,
        "createdMs": graph.created_tick,
        "epochMs": graph.frame.epoch_tick,
        "watermarkMs": graph.watermark_tick,
        "flavorResources": [[fr.flavor, fr.resource] for fr in columns],
        "nodes": nodes,
        "running": runs,
    }


def _compact(row: list[float]) -> list[float | int]:
    # 0 instead of 0.0 saves two bytes per empty cell; JSON readers give it back as a number either way.
    return [0 if m == 0.0 else m for m in row]


def from_dict(data: object, *, location: Location | None = None) -> UsageHistoryGraph:
    """Rebuild a graph from ``to_dict`` output; InputError naming the field on anything malformed."""
    loc = location or Location()
    if isinstance(data, dict) and data.get("schemaVersion") != SCHEMA_VERSION:
        version = data.get("schemaVersion")
        raise InputError(f"unsupported history schemaVersion (this build reads {SCHEMA_VERSION})",
                         location=_field(loc, "schemaVersion"), value=version, has_value=True)
    try:
        doc = _Serialized.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(first["msg"], location=_field(loc, field), value=first.get("input"),
                         has_value=True) from None
    # The epoch trails the newest accrual by at most MAX_REBASE_AFTER (+1) half-lives (graph._advance);
    # anything else was not written by to_dict and would overflow the 2^(t-E)/H arithmetic on read.
    span = doc.watermark_ms - doc.epoch_ms
    if not 0 <= span <= (MAX_REBASE_AFTER + 1) * doc.half_life_ms:
        raise InputError(f"epochMs must be at most watermarkMs and at most {MAX_REBASE_AFTER + 1} half-lives "
                         "before it", location=_field(loc, "epochMs"), value=doc.epoch_ms)
    columns = [FlavorResource(f, r) for f, r in doc.flavor_resources]
    graph = UsageHistoryGraph(HalfLife(doc.half_life_ms), created_at=doc.created_ms / 1000)
    paths: list[NodePath] = []
    nodes: list[tuple[NodePath, int, dict[FlavorResource, float]]] = []
    for i, (parent, segment, weight, row) in enumerate(doc.nodes):
        where = _field(loc, f"nodes[{i}]")
        path = _node_path(i, parent, segment, paths, where)
        if len(row) != len(columns) or weight < 0:
            raise InputError("node row needs a weight >= 0 and one mass per flavorResources column",
                             location=where, value=[parent, segment, weight, row], has_value=True)
        paths.append(path)
        nodes.append((path, weight, {columns[c]: float(m) for c, m in enumerate(row) if m != 0}))
    opens: list[OpenInterval] = []
    for i, (key, node, start, qty) in enumerate(doc.running):
        where = _field(loc, f"running[{i}]")
        if not 0 <= node < len(paths) or len(qty) != len(columns):
            raise InputError("running entry names an unknown node or has the wrong number of columns",
                             location=where, value=[key, node, start, qty], has_value=True)
        usage = tuple((columns[c], q) for c, q in enumerate(qty) if q != 0)
        opens.append(OpenInterval(key, paths[node], usage, start))
    graph.restore_state(epoch_tick=doc.epoch_ms, watermark_tick=doc.watermark_ms, nodes=nodes,
                        open_intervals=opens)
    return graph


def _node_path(i: int, parent: int, segment: str, paths: list[NodePath], where: Location) -> NodePath:
    if i == 0:
        if parent != -1 or segment != "":
            raise InputError("node 0 must be the root: [-1, \"\", weight, masses]", location=where,
                             value=[parent, segment], has_value=True)
        return NodePath.root()
    if not 0 <= parent < i:
        raise InputError("parentIndex must name an earlier node", location=where, value=parent)
    kind_text, _, name = segment.partition(":")
    if kind_text not in {k.value for k in NodeKind}:
        kinds = ", ".join(k.value for k in NodeKind)
        raise InputError(f"unknown node kind {kind_text!r} (one of {kinds})", location=where, value=segment)
    try:
        return paths[parent].child(NodeKind(kind_text), name)
    except ValueError as err:
        raise InputError(str(err), location=where, value=segment) from None


def _field(loc: Location, field: str) -> Location:
    full = f"{loc.field}.{field}" if loc.field else field
    return Location(file=loc.file, document=loc.document, field=full)
