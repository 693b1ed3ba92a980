"""Issue 32's looping state on the real Kueue (docs/kueue-fair-sharing-loop.md): three ClusterQueues of 4 GPUs
in one cohort with fair sharing, five experiments admitted in b (4, 2, 1, 4 and 1 GPUs), then a 6-GPU training
job in a. Under the weights a=545m, b=1, c=1834m Kueue can preempt three experiments for it every second
without ever admitting it; under the weights the policy controller pushes from that state it admits it.

    .venv/bin/python -m tests.differential.storm --trials 6          # a fair-sharing control plane is started

Each trial builds the state afresh (new Jobs, so new random UIDs: Kueue orders re-admitted victims that share
a QuotaReserved second by UID, which decides whether a loop goes on), submits the trainer and watches for
`watch` seconds: how many times the experiments were preempted, and whether the trainer holds quota.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubernetes import client as k8s

from tests.differential.cluster import GROUP, RealCluster, holds_quota, preemptions, submission_name
from tests.differential.generator import GROUP_VERSION, GeneratedState, PodSetSpec, WorkloadSpec
from tests.unit.control.storm_world import EXPERIMENTS, GPU, LOOPING_WEIGHTS, TRAINER

Obj = dict[str, object]


def storm_state(weights: Mapping[str, str], tag: str) -> GeneratedState:
    """The looping state with `weights` (team -> fairSharing.weight), its names prefixed `storm<tag>`."""
    prefix = f"storm{tag}"
    objects: list[Obj] = [
        {"apiVersion": GROUP_VERSION, "kind": "ResourceFlavor", "metadata": {"name": f"{prefix}-gpu"},
         "spec": {}}]
    for team in ("a", "b", "c"):
        objects.append({
            "apiVersion": GROUP_VERSION, "kind": "ClusterQueue", "metadata": {"name": f"{prefix}-{team}"},
            "spec": {
                "namespaceSelector": {}, "cohortName": f"{prefix}-pool",
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": f"{prefix}-gpu", "resources": [{"name": GPU, "nominalQuota": 4}]}]}],
                "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
                "fairSharing": {"weight": weights[team]},
            }})
    namespace = f"{prefix}-ns"
    for team in ("a", "b", "c"):
        objects.append({"apiVersion": GROUP_VERSION, "kind": "LocalQueue",
                        "metadata": {"name": f"lq-{team}", "namespace": namespace},
                        "spec": {"clusterQueue": f"{prefix}-{team}"}})
    for name, value in (("train", 1000), ("exp", 100)):
        objects.append({"apiVersion": GROUP_VERSION, "kind": "WorkloadPriorityClass",
                        "metadata": {"name": f"{prefix}-{name}"}, "value": value})
    workloads = [WorkloadSpec(name, "lq-b", f"{prefix}-exp", 100,
                              (PodSetSpec("main", 1, ((GPU, str(gpus)),)),))
                 for name, gpus in EXPERIMENTS]
    name, gpus = TRAINER
    workloads.append(WorkloadSpec(name, "lq-a", f"{prefix}-train", 1000,
                                  (PodSetSpec("main", 1, ((GPU, str(gpus)),)),)))
    return GeneratedState(0, "fair-sharing", prefix, namespace, tuple(objects), tuple(workloads))


@dataclass(frozen=True)
class Trial:
    weights: Mapping[str, str]
    preemptions: Mapping[str, int]  # experiment -> times Kueue preempted it after the trainer came
    trainer_admitted: bool
    seconds: float

    @property
    def rounds(self) -> int:
        """Preemption rounds: the most preemptions of one experiment."""
        return max(self.preemptions.values(), default=0)

    def line(self) -> str:
        shown = ", ".join(f"{t}={w}" for t, w in sorted(self.weights.items()))
        total = sum(self.preemptions.values())
        return (f"weights {shown}: {total} preemptions in {self.seconds:.0f} s ({self.rounds} rounds, "
                f"{60 * total / self.seconds:.0f} a minute), trainer "
                + ("admitted" if self.trainer_admitted else "NOT admitted"))


def run_trial(api: k8s.ApiClient, weights: Mapping[str, str], tag: str, *, watch: float = 20.0) -> Trial:
    """The state on the real Kueue, the experiments admitted one by one, then the trainer, watched for
    `watch` seconds (or until it holds quota and nothing moved for 3 s)."""
    state = storm_state(weights, tag)
    cluster = RealCluster(api, state)
    cluster.teardown()  # leftovers of an interrupted run
    cluster.setup()
    try:
        for spec in state.workloads[:-1]:
            before = cluster.list_workloads()
            cluster.submit(spec)
            obs = cluster.settle(spec.name, before)
            held = {submission_name(w) for w in obs.workloads if holds_quota(w)}
            if spec.name not in held:
                raise RuntimeError(f"experiment {spec.name} was not admitted: {sorted(held)}")
        base = {submission_name(w): preemptions(w) for w in cluster.list_workloads()}
        cluster.submit(state.workloads[-1])
        began = time.monotonic()
        last_change, last_sig = began, None
        while True:
            items = cluster.list_workloads()
            now = time.monotonic()
            sig = tuple((submission_name(w), holds_quota(w), preemptions(w)) for w in items)
            if sig != last_sig:
                last_sig, last_change = sig, now
            trainer = next((w for w in items if submission_name(w) == TRAINER[0]), None)
            admitted = trainer is not None and holds_quota(trainer)
            if now - began >= watch or (admitted and now - last_change >= 3.0):
                break
            time.sleep(0.1)
        counts = {submission_name(w): preemptions(w) - base.get(submission_name(w), 0) for w in items
                  if submission_name(w) != TRAINER[0]}
        return Trial(dict(weights), {k: v for k, v in sorted(counts.items()) if v}, admitted, now - began)
    finally:
        cluster.teardown()


def controller_weights() -> dict[str, str]:
    """The weights the policy controller pushes from the looping state: the simulator's shell with the
    pushed weights a=545m, b=1, c=1834m in force, after the trainer's first round (tests/unit/control/
    test_storms.py StormWorld)."""
    from tests.unit.control.test_storms import T0, StormWorld

    world = StormWorld(weights=dict(LOOPING_WEIGHTS), controller=True)
    world.run(T0 + 5)
    assert world.shell is not None and world.shell.status is not None
    pushed = world.shell.status.pushed_weights
    assert pushed is not None
    return dict(pushed)


def main(argv: Sequence[str] | None = None) -> int:
    from kubernetes import config as k8s_config

    from tests.differential.targets import CONTROL_PLANE
    from tests.integration.controlplanes import POOL, binaries_or_skip

    parser = argparse.ArgumentParser(prog="python -m tests.differential.storm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=6, help="trials per set of weights (default 6)")
    parser.add_argument("--watch", type=float, default=30.0, help="seconds to watch each trial (default 30)")
    parser.add_argument("--ties", type=int, default=0, metavar="N",
                        help="instead: N trials under the looping weights through the differential harness, "
                        "the model resynced from the real Workloads (their UIDs) before each submission")
    args = parser.parse_args(argv)
    plane = POOL.get(CONTROL_PLANE["fair-sharing"], binaries_or_skip())
    api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
    try:
        if args.ties:
            return _ties(api, args.ties)
        pushed = controller_weights()
        run = f"{int(time.time()) % 100000}"  # a namespace being deleted cannot be used again
        for phase, (label, weights) in enumerate((("looping (pushed before)", LOOPING_WEIGHTS),
                                                  ("the controller's (pushed now)", pushed))):
            print(f"{label}:")
            for i in range(args.trials):
                trial = run_trial(api, weights, f"{run}p{phase}t{i}", watch=args.watch)
                print(f"  trial {i + 1}: {trial.line()}", flush=True)
    finally:
        api.close()
        POOL.stop_all()
    return 0


def _ties(api: k8s.ApiClient, trials: int) -> int:
    """The trainer's step under the looping weights, Kueue and the resynced model side by side: which rounds
    follow the first depends on how victims re-admitted in one second are ordered (by UID)."""
    from tests.differential.runner import run_generated

    run = f"{int(time.time()) % 100000}"
    agree = 0
    for i in range(trials):
        record = run_generated(api, storm_state(LOOPING_WEIGHTS, f"{run}u{i}"))
        last = record.steps[-1]
        real_rounds = max((n for n, _ in last.real.preempted.values()), default=0)
        model_rounds = max((n for n, _ in last.resynced.preempted.values()), default=0)
        held = {submission_name(w) for w in last.real.workloads if holds_quota(w)}
        verdict = last.resynced_verdict
        agree += verdict.agree
        print(f"  trial {i + 1}: Kueue {'loops' if last.real.livelock else 'settles'} ({real_rounds} rounds, "
              f"trainer {'admitted' if 'train' in held else 'pending'}); the model "
              f"{'loops' if last.resynced.livelock else 'settles'} ({model_rounds} rounds): "
              + ("agree" if verdict.agree else f"{verdict.cls}: {verdict.difference}"), flush=True)
    print(f"the model decided {agree} of {trials} trials as Kueue did")
    return 0


__all__ = ["GROUP", "Trial", "controller_weights", "run_trial", "storm_state"]

if __name__ == "__main__":
    raise SystemExit(main())
