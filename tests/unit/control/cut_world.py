"""The seed's shift decided by the controller and applied by the simulator's shell to its Kueue, second by
second, as in a simulation (the controller's table tests of deadlines, NEXT STEP): research runs one-GPU
experiments, 4 within its quota and the rest borrowed from business's idle quota, when the edit research
4 -> 1 GPU, business 16 -> 19 arrives at T0."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fairshare.manifests import parse_manifests
from fairshare.models import FlavorResource
from fairshare.policy import parse_policy, render
from fairshare.policy.status import TransitionPhase
from fairshare.scheduler.types import SchedulerConfig
from fairshare.workload import WorkloadInfo
from simulations.control import ControllerShell
from simulations.kueue import KueueModel
from simulations.record import ActionRecord
from tests.builders import SeedShiftBuilder
from tests.futile import Readmission
from tests.unit.operator.kube_objects import workload

T0 = 1_800_000_000.0
DEADLINE = {"deadline": "30s", "maxVictimsPerHour": 2}
_FR = FlavorResource("gpu", SeedShiftBuilder.GPU)


@dataclass
class _Lives:
    """Kueue's admissions and evictions as the simulation sees them: each admission with its team's usage
    and quota in force then (for the futile-eviction check)."""

    shell: ControllerShell | None = None
    kueue: KueueModel | None = None
    admitted: list[tuple[float, str, int, int]] = field(default_factory=list)
    evicted: list[tuple[float, str, str]] = field(default_factory=list)

    def admitted_at(self, key: str) -> list[tuple[float, int, int]]:
        return [(t, used, quota) for t, k, used, quota in self.admitted if k == key]


class _Listener:
    def __init__(self, lives: _Lives) -> None:
        self.lives = lives

    def admitted(self, info: WorkloadInfo, t: float) -> None:
        assert self.lives.kueue is not None
        node = self.lives.kueue.snapshot.cluster_queues[info.cluster_queue].node
        self.lives.admitted.append((t, info.key, node.usage.get(_FR, 0), node.quota(_FR).nominal))
        if self.lives.shell is not None:
            self.lives.shell.admitted(info, t)

    def evicted(self, info: WorkloadInfo, t: float, *, by: str, preemptor: str, reason: str) -> None:
        self.lives.evicted.append((t, info.key, by))
        if self.lives.shell is not None:
            self.lives.shell.released(info.key, t)


class Cut:
    """Research runs `running` one-GPU experiments (4 within its quota, the rest borrowed from business's
    idle quota) when the seed's shift is applied at T0; the controller decides at every second."""

    def __init__(self, spec: SeedShiftBuilder, running: int = 6, worn: tuple[int, ...] = ()) -> None:
        """`worn`: the experiments (by index) Kueue has evicted 3 times already (schedulingStats), the
        policy's default maxEvictionsPerWorkload."""
        self.lives = _Lives()
        before = parse_policy(spec.before())
        state = parse_manifests([dict(o) for o in render(before)])
        self.kueue = KueueModel(state, SchedulerConfig(), _Listener(self.lives), track_pending=True)
        self.lives.kueue = self.kueue
        self.shell = ControllerShell(before, self.kueue, start=T0 - 3600)
        self.lives.shell = self.shell
        for i in range(running):
            w = workload("research", f"exp-{i}", queue="research", gpus=1, priority=100, priority_class="exp",
                         admitted_to="research", reserved_at=T0 - 3000 + 60 * i, created=T0 - 3000)
            if i in worn:
                w = replace(w, eviction_stats=(("Preempted", "", 3),))
            info = WorkloadInfo.admitted(w)
            self.kueue.snapshot.add_workload(info)
            self.shell.admitted(info, T0 - 3000 + 60 * i)
        self.t = T0
        self.shell.step(T0)
        self.shell.edit(parse_policy(spec.after()), T0)

    def business(self, name: str, gpus: int) -> None:
        """Business submits a job (Kueue sees it at once)."""
        w = workload("business", name, queue="business", gpus=gpus, priority=1000000, priority_class="biz",
                     created=self.t)
        self.kueue.submit(WorkloadInfo.pending(w, "business"), self.t)

    def run_until(self, until: float) -> None:
        while self.t <= until:
            self.kueue.settle(self.t)
            self.shell.step(self.t)
            self.kueue.settle(self.t)
            self.t += 1.0

    def evictions(self) -> list[ActionRecord]:
        return [a for a in self.shell.log if a.kind == "evict"]

    def phase(self) -> TransitionPhase | None:
        assert self.shell.status is not None
        [research] = [t for t in self.shell.status.transitions if t.team == "research"]
        return research.phase

    def readmissions(self) -> list[Readmission]:
        """Every transition victim admitted again, with research's usage (with it) and quota then."""
        out = []
        for t_e, key, by in self.lives.evicted:
            back = [x for x in self.lives.admitted_at(key) if x[0] >= t_e]
            if by == "transition" and back:
                t, used, quota = back[0]
                out.append(Readmission(key, "research", t_e, t, used, quota))
        return out

    def research_usage(self) -> int:
        return self.kueue.snapshot.cluster_queues["research"].node.usage.get(_FR, 0)
