"""What the next scheduling cycle does and why (`qm explain`): the whole cycle from a state (cycle.py: a
file, stdin, or the live cluster), and one workload or one ClusterQueue in it (workload.py)."""

from .cycle import Explanation, explain_documents, explain_file, explain_state, explain_text, render
from .workload import (
    QueueExplanation,
    WorkloadExplanation,
    WorkloadState,
    explain_cluster_queue,
    explain_workload,
    render_cluster_queue,
    render_workload,
)

__all__ = [
    "Explanation",
    "QueueExplanation",
    "WorkloadExplanation",
    "WorkloadState",
    "explain_cluster_queue",
    "explain_documents",
    "explain_file",
    "explain_state",
    "explain_text",
    "explain_workload",
    "render",
    "render_cluster_queue",
    "render_workload",
]
