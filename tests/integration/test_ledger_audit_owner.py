"""Every audit row of an action on a workload names its team, LocalQueue, project and user, so that
`qm audit --team X --action 'preempt*'` answers "what did you do to my team's jobs" (the operator's ledger
feed, queue_manager/ledger_feed.py, writing to a SQLite file and a real PostgreSQL database; the operator
end to end: tests/integration/test_ledger_seam.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from fairshare.control import AuditAction
from fairshare.models import Admission, PodSet, PodSetAssignment, Workload
from fairshare.policy import load_policy_file
from ledger.ledger import open_ledger
from qm.cli import main
from queue_manager.audit import AuditRecord
from queue_manager.cache import State
from queue_manager.ledger_feed import LedgerFeed, ledger_config
from queue_manager.metrics import Metrics
from queue_manager.refs import ObjectRef

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "quotapolicy.yaml"
RESEARCH = "ai-frontier-research"
ACTIONS = (AuditAction.PREEMPT, AuditAction.PREEMPT_DRY_RUN, AuditAction.PREEMPT_VERIFIED,
           AuditAction.PREEMPT_OVERDUE, AuditAction.REACTIVATED, AuditAction.PREEMPT_BLOCKED,
           AuditAction.WORKLOAD_HELD)


def _workload(name: str, *, queue: str = RESEARCH, admitted_to: str | None = None) -> Workload:
    requests = (("nvidia.com/gpu", 2000),)
    admission = None
    if admitted_to is not None:
        admission = Admission(admitted_to, (PodSetAssignment("main", (("nvidia.com/gpu", "gpu-a100"),),
                                                             requests, 1),))
    return Workload(namespace=RESEARCH, name=name, queue_name=queue, pod_sets=(PodSet("main", 1, requests),),
                    uid=f"uid-{name}", labels=(("queuemanager.dev/project", "scaling-laws"),
                                               ("queuemanager.dev/user", "alice")), admission=admission)


@pytest.fixture
def feed(ledger_url: str, tmp_path: Path) -> LedgerFeed:
    policy = load_policy_file(str(SAMPLE))
    state = State()
    state.runtime(policy.name, {"metadata": {"name": policy.name}}).policy = policy
    state.workloads.items = {f"{RESEARCH}/{w.name}": w for w in (
        _workload("running", admitted_to=RESEARCH), _workload("pending"),
        _workload("elsewhere", queue="someone-elses-queue"))}
    ledger = open_ledger(ledger_url, spool_dir=tmp_path / "spool", config=ledger_config([policy]))
    return LedgerFeed(ledger, state, Metrics(), time.time, budget_refresh_s=3600)


def test_every_action_on_a_workload_names_its_team_local_queue_project_and_user(
        feed: LedgerFeed, ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        for action in ACTIONS:
            for name in ("running", "pending"):
                target = ObjectRef("Workload", name, RESEARCH)
                feed.audit(AuditRecord(action, target, f"{action} {name}", "why", "gpu-cluster", 3),
                           editor="alice", team=None)
        assert feed.ledger.flush(30)
    finally:
        feed.close()
    assert main(["audit", "--db", ledger_url, "--team", RESEARCH, "--action", "preempt*",
                 "--action", "reactivated", "--action", "workload-held", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 * len(ACTIONS)
    assert {(r["team"], r["local_queue"], r["project"], r["user"]) for r in rows} == {
        (RESEARCH, RESEARCH, "scaling-laws", "alice")}
    assert sorted({r["action"] for r in rows}) == sorted(str(a) for a in ACTIONS)


def test_the_team_of_a_workload_is_the_one_rule_s_whatever_asks(feed: LedgerFeed) -> None:
    try:
        wl = feed.state.workloads.items
        assert feed.cluster_queue(wl[f"{RESEARCH}/pending"]) == RESEARCH  # its LocalQueue's ClusterQueue
        assert feed.cluster_queue(wl[f"{RESEARCH}/running"]) == RESEARCH  # its admission's
        # Queued in a LocalQueue the policy did not render: not the policy's, though in its namespace.
        assert feed.cluster_queue(wl[f"{RESEARCH}/elsewhere"]) is None
        gone = feed.workload_owner(RESEARCH, "deleted-meanwhile")
        assert (gone.team, gone.local_queue, gone.project, gone.user) == (None, None, None, None)
    finally:
        feed.close()
