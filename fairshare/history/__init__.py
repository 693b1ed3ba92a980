"""Usage history graph, decay, serialization, Fair Tree and history DRS (docs/history-and-planners.md)."""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)

from fairshare.history.decay import HalfLife
from fairshare.history.drs import HistoryDrsNode, history_drs
from fairshare.history.fair_tree import FairTreeConfig, FairTreeNode, FairTreeResult, fair_tree
from fairshare.history.graph import OpenInterval, UsageHistoryGraph, UsageVector
from fairshare.history.paths import NodeKind, NodePath
from fairshare.history.serialization import SCHEMA_VERSION, from_dict, to_dict

__all__ = [
    "SCHEMA_VERSION",
    "FairTreeConfig",
    "FairTreeNode",
    "FairTreeResult",
    "HalfLife",
    "HistoryDrsNode",
    "NodeKind",
    "NodePath",
    "OpenInterval",
    "UsageHistoryGraph",
    "UsageVector",
    "fair_tree",
    "from_dict",
    "history_drs",
    "to_dict",
]
