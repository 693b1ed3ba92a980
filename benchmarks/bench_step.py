"""The operator's step without a cluster (issue 38 item 2): CPU of one `PolicyController.step` (observe,
decide, what is in force) at tens of thousands of Workloads, with a few Workloads changed between steps as
watch events change them (a new object each) and a few created (named anywhere in the key order: the
snapshot's queue is kept in it), and the policy edited half-way (business's quota 4 -> 3, the
operator benchmark's edit). Two controllers in one run over the same steps: one is given the keys of the
Workloads that changed, as the operator's cache records them, and patches its observation
(fairshare.control.standing); one forgets its memo every step (each step derives every Workload again).
The operator benchmark's world: the bulk of queued batch Workloads of `bench_operator`, the operator's
policy.

Environment: QM_BENCH_STEP_WORKLOADS (default 20000,50000), QM_BENCH_STEP_CHANGED (default 10 Workloads
changed per step), QM_BENCH_STEP_CREATED (default 2 created per step). The operator image runs the
pure-Python core: `QM_CORE=python make bench BENCH=step`.
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import time
from typing import Any

from benchmarks import bench_operator
from fairshare.compiled import state as core_state
from fairshare.control import HistoryBook, PolicyController, PolicyRules
from fairshare.control.cluster import ClusterView
from fairshare.control.standing import ObservationMemo
from fairshare.control.storms import EvictionCounts
from fairshare.models import Workload
from fairshare.policy import ObjectKey, parse_policy, render_index
from fairshare.scheduler import SchedulerConfig
from queue_manager.workloads import _parsed

NOW = 1_800_000_000.0
STEPS = 12  # the first two (the memo's first fill) are left out of the medians
EDIT = 7  # the step given the edited policy


def _workloads(n: int) -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for i in range(n):
        body: dict[str, Any] = bench_operator._workload(i)
        body["metadata"].update(creationTimestamp="2027-01-15T08:00:00Z", uid=f"uid-{i}")
        wl = _parsed({k: v for k, v in body.items() if k not in ("apiVersion", "kind")})
        assert wl is not None
        out[wl.key] = wl
    return out


def _run(n: int, changed: int, created: int) -> tuple[list[float], list[float]]:
    doc = bench_operator._policy(3)
    rules = PolicyRules.of(parse_policy(doc))
    doc["spec"]["teams"][1]["quotas"][0]["resources"][0]["nominal"] = 3
    edited = PolicyRules.of(parse_policy(doc))
    policy = rules.policy
    index: dict[ObjectKey, dict[str, Any]] = {k: dict(v) for k, v in render_index(policy).items()}
    workloads = _workloads(n)
    keys = sorted(workloads)
    rng = random.Random(0)
    keeps, forgets = PolicyController(), PolicyController()
    books = [HistoryBook.restore(policy, None, NOW)[0] for _ in range(2)]
    cpu: tuple[list[float], list[float]] = ([], [])
    touched: set[str] | None = None
    for step in range(STEPS):
        if step:
            touched = set(rng.sample(keys, changed))
            for key in list(touched):  # a watch event: a new object
                workloads[key] = dataclasses.replace(workloads[key])
            for j in range(created):  # a new Workload, its name anywhere in the key order
                like = workloads[keys[rng.randrange(len(keys))]]
                new = dataclasses.replace(like, name=f"{like.name}-{step}-{j}", uid=f"{like.uid}-{step}-{j}")
                workloads[new.key] = new
                touched.add(new.key)
        if step == EDIT:
            rules = edited
        decisions = []
        for i, pc in enumerate((keeps, forgets)):
            if pc is forgets:
                pc.seen = ObservationMemo()
                if pc.counts is not None:
                    pc.counts = EvictionCounts(pc.counts.counts)
            view = ClusterView(live=index.get, workloads=dict(workloads), config=SchedulerConfig(),
                               changed=touched if pc is keeps else None)
            started = time.process_time()
            reply = pc.step(rules, view, None, NOW + step, history=books[i], generation=1)
            cpu[i].append(time.process_time() - started)
            books[i] = reply.history
            decisions.append(reply.decision)
        if decisions[0] != decisions[1]:
            raise SystemExit(f"bench step: the two controllers decided differently at step {step} "
                             f"({n} Workloads)")
    return cpu


def main() -> None:
    sizes = [int(s) for s in os.environ.get("QM_BENCH_STEP_WORKLOADS", "20000,50000").split(",") if s]
    changed = int(os.environ.get("QM_BENCH_STEP_CHANGED", "10"))
    created = int(os.environ.get("QM_BENCH_STEP_CREATED", "2"))
    print(f"operator step without a cluster: {changed} Workloads changed and {created} created per step, "
          f"{STEPS} steps; core: "
          f"{core_state().why}; load average {os.getloadavg()[0]:.1f}", flush=True)
    for n in sizes:
        keeps, forgets = _run(n, changed, created)
        kept, forgot = statistics.median(keeps[2:]), statistics.median(forgets[2:])
        print(f"  {n:>7,} Workloads: {kept * 1000:6.0f} ms CPU per step given the changed keys, "
              f"{forgot * 1000:6.0f} ms deriving every Workload ({forgot / kept:.1f}x); the edit's step "
              f"{keeps[EDIT] * 1000:.0f} / {forgets[EDIT] * 1000:.0f} ms; the first step "
              f"{keeps[0] * 1000:.0f} ms; decisions identical", flush=True)


if __name__ == "__main__":
    main()
