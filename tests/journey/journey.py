"""The journey's stages, as a platform engineer runs them (docs/operator.md, "The journey"):

1. a local cluster whose KWOK GPU nodes carry the sample flavor's labels and taints
   (`qm dev-cluster up --policy manifests/samples/quotapolicy.yaml`), and a PostgreSQL ledger;
2. the CRD, the operator's namespace, the teams' namespaces and the sample policy (`kubectl apply -k
   manifests/samples`, by alice, the platform engineer); the operator as its own process (`qm run`);
3. long-running sample Jobs of both teams (`kubectl create -f manifests/samples/jobs.yaml -l ...`): two
   research experiments (2 GPUs, 600 s: research's 4 GPUs) by rita, five business serving jobs (4 GPUs,
   300 s) by bob, four of which fill business's 16 GPUs while the fifth waits;
4. `qm plan manifests/samples/quotapolicy-shift.yaml -o json`: the seed's shift (research 4 -> 1 GPU, business
   16 -> 19) with a short transition (a step every 20 s, drain, a deadline at 90 s);
5. alice applies it (`kubectl apply -f`); the cluster is watched every half second until the transition
   is complete and business's waiting job runs;
6. `qm usage`, `qm cost`, `qm audit`, `qm budget status` (the file, and the operator's) and `qm explain`
   answer; the operator's /metrics is read.

Every command runs as a subprocess, as typed; `Record` keeps what each said and what the cluster did.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
SAMPLES = ROOT / "manifests" / "samples"
SAMPLE = SAMPLES / "quotapolicy.yaml"
SHIFT = SAMPLES / "quotapolicy-shift.yaml"
GPU = "nvidia.com/gpu"
RESEARCH, BUSINESS = "ai-frontier-research", "biz-model-serving"
POLICY = "gpu-cluster"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QP = ("queuemanager.dev", "v1alpha1", "quotapolicies")
PEOPLE = {"alice": "alice@example.com", "rita": "rita@example.com", "bob": "bob@example.com"}
# Their groups: alice administers the cluster; rita and bob are members of their teams by the sample's SSO
# groups (spec.teams[].members), so its tenancy lets each use only the team's queue, classes and projects.
GROUPS = {"alice": "system:masters", "rita": f"oidc:{RESEARCH}", "bob": f"oidc:{BUSINESS}"}
EXPERIMENTS, SERVING = 2, 5
HISTORY_S = 15.0  # the jobs run this long before the plan (the ledger has their starts)
SETTLE_TIMEOUT_S = 300.0  # the transition (deadline 90 s) and business's waiting job
HORIZON = "5m"  # the forecast's horizon: the transition and its deadline, with room

Narrate = Callable[[str], None]


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class Command:
    """One command as the user typed it, and what it said."""

    argv: list[str]
    code: int
    out: str
    err: str
    at: float
    seconds: float

    def shown(self) -> str:
        return " ".join(shlex.quote(a.replace(str(ROOT) + "/", "")) for a in self.argv)

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass(frozen=True)
class Life:
    """A Workload as one poll saw it."""

    key: str  # namespace/name
    job: str
    team: str
    gpus: int
    reserved: bool  # QuotaReserved=True
    reserved_at: float | None
    evicted_at: float | None  # Evicted=True
    active: bool
    finished: bool


@dataclass(frozen=True)
class Observation:
    at: float
    quotas: dict[str, int]  # team -> GPU nominalQuota (milli)
    lives: dict[str, Life]


@dataclass
class Record:
    """Everything the journey saw; `seams.py` reads it."""

    commands: list[Command] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)
    plan_at: float = 0.0
    applied_at: float = 0.0
    observations: list[Observation] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)  # as stored at the end
    operator_log: list[dict[str, Any]] = field(default_factory=list)
    policy_status: dict[str, Any] = field(default_factory=dict)
    until: float = 0.0  # the end of the ledger queries' window
    usage: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)
    budget_file: dict[str, Any] = field(default_factory=dict)
    budget_live: dict[str, Any] = field(default_factory=dict)
    cost_at_measure: dict[str, Any] = field(default_factory=dict)  # qm cost up to status.budgets' measure
    explain: str = ""
    metrics: str = ""

    def command(self, needle: str) -> Command:
        return next(c for c in self.commands if needle in c.shown())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cond(w: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (w.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _true_at(w: dict[str, Any], kind: str) -> float | None:
    c = _cond(w, kind)
    return epoch(str(c["lastTransitionTime"])) if c is not None and c.get("status") == "True" else None


def life_of(w: dict[str, Any]) -> Life:
    meta = w["metadata"]
    owner = next((o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), "")
    gpus = 0
    for ps in w["spec"].get("podSets") or []:
        for c in ps["template"]["spec"].get("containers") or []:
            gpus += int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)) * int(
                ps.get("count", 1)
            )
    return Life(
        key=f"{meta['namespace']}/{meta['name']}",
        job=owner,
        team=str(meta["namespace"]),
        gpus=gpus,
        reserved=_true_at(w, "QuotaReserved") is not None,
        reserved_at=_true_at(w, "QuotaReserved"),
        evicted_at=_true_at(w, "Evicted"),
        active=bool(w["spec"].get("active", True)),
        finished=_true_at(w, "Finished") is not None,
    )


class Journey:
    """One run of the journey in `workdir`, on the ledger at `ledger_url` (a PostgreSQL database)."""

    def __init__(self, workdir: Path, ledger_url: str, narrate: Narrate = print, *,
                 kueue_config: Path | None = None) -> None:
        self.workdir = workdir
        self.kueue_config = kueue_config  # a Kueue Configuration the cluster runs with (`--kueue-config`)
        self.ledger_url = ledger_url
        self.say = narrate
        self.record = Record()
        self.state_dir = workdir / "dev-cluster"
        self.kubeconfig = Path()
        self.people: dict[str, Path] = {}
        self.operator: subprocess.Popen[bytes] | None = None
        self.operator_log = workdir / "operator.log"
        self.metrics_port = _free_port()
        self.health_port = _free_port()
        self._api: Any = None

    # --- commands --------------------------------------------------------------------------------------

    def env(self, person: str | None = None) -> dict[str, str]:
        env = {**os.environ, "QM_LEDGER_URL": self.ledger_url, "QM_CORE": os.environ.get("QM_CORE", "python")}
        if self.kubeconfig.name:
            env["KUBECONFIG"] = str(self.people[person] if person else self.kubeconfig)
        return env

    def run(
        self,
        *argv: str,
        person: str | None = None,
        check: bool = True,
        show: bool = True,
        timeout: float = 300.0,
    ) -> Command:
        """A command as typed (`qm ...` and `kubectl ...` from the project's .venv), from the repository."""
        full = [str(BIN / argv[0]), *argv[1:]] if argv[0] in ("qm", "kubectl") else list(argv)
        began = time.time()
        done = subprocess.run(
            full, cwd=ROOT, env=self.env(person), capture_output=True, text=True, timeout=timeout, check=False
        )
        cmd = Command(full, done.returncode, done.stdout, done.stderr, began, time.time() - began)
        self.record.commands.append(cmd)
        if show:
            who = f"{person}$ " if person else "$ "
            self.say(f"  {who}{cmd.shown()}   ({cmd.seconds:.1f} s, exit {cmd.code})")
        if check and cmd.code != 0:
            raise RuntimeError(f"`{cmd.shown()}` exited {cmd.code}:\n{cmd.err[-3000:]}{cmd.out[-2000:]}")
        return cmd

    # --- the cluster, read by the observer ----------------------------------------------------------------

    @property
    def api(self) -> Any:
        if self._api is None:
            from kubernetes import config as k8s_config

            self._api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    def workloads(self) -> list[dict[str, Any]]:
        from kubernetes import client as k8s

        out = []
        for ns in (RESEARCH, BUSINESS):
            out += k8s.CustomObjectsApi(self.api).list_namespaced_custom_object(*KUEUE, ns, "workloads")[
                "items"
            ]
        return [dict(w) for w in out]

    def quotas(self) -> dict[str, int]:
        from kubernetes import client as k8s

        from fairshare.quantity import parse_quantity

        out = {}
        for team in (RESEARCH, BUSINESS):
            cq = k8s.CustomObjectsApi(self.api).get_cluster_custom_object(*KUEUE, "clusterqueues", team)
            for group in cq["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for r in flavor["resources"]:
                        if r["name"] == GPU:
                            out[team] = parse_quantity(str(r["nominalQuota"]))
        return out

    def policy_status(self) -> dict[str, Any]:
        from kubernetes import client as k8s

        body = k8s.CustomObjectsApi(self.api).get_cluster_custom_object(*QP[:2], QP[2], POLICY)
        return dict(body.get("status") or {})

    def observe(self) -> Observation:
        obs = Observation(
            time.time(), self.quotas(), {life.key: life for life in map(life_of, self.workloads())}
        )
        self.record.observations.append(obs)
        return obs

    def wait(self, what: str, fn: Callable[[], bool], timeout: float, every: float = 0.5) -> float:
        began = time.monotonic()
        while not fn():
            if time.monotonic() - began > timeout:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(every)
        return time.monotonic() - began

    # --- the stages -------------------------------------------------------------------------------------

    def run_all(self) -> Record:
        with self.running():
            self.cluster()
            self.install()
            self.start_operator()
            self.submit()
            self.plan()
            self.apply()
            self.watch()
            self.account()
        return self.record

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.stop_operator()
            if self._api is not None:
                self._api.close()
            subprocess.run(
                [str(BIN / "qm"), "dev-cluster", "--state-dir", str(self.state_dir), "down"],
                cwd=ROOT,
                capture_output=True,
                timeout=120,
                check=False,
            )

    def cluster(self) -> None:
        self.say(
            "1. a local cluster for the sample policy: KWOK GPU nodes with its flavor's labels and taints"
        )
        up = self.run(
            "qm",
            "dev-cluster",
            "--state-dir",
            str(self.state_dir),
            "up",
            "--policy",
            str(SAMPLE.relative_to(ROOT)),
            *(["--kueue-config", str(self.kueue_config)] if self.kueue_config is not None else []),
            timeout=240,
        )
        found = re.search(r"^export KUBECONFIG=(\S+)$", up.out, re.M)
        if found is None:
            raise RuntimeError(f"qm dev-cluster up printed no KUBECONFIG:\n{up.out}")
        self.kubeconfig = Path(found.group(1))
        for line in up.out.splitlines():
            if line.strip().startswith("nodes:"):
                self.say(f"     {line.strip()}")
        for person, user in PEOPLE.items():
            cmd = self.run(
                "qm",
                "dev-cluster",
                "--state-dir",
                str(self.state_dir),
                "kubeconfig",
                "--user",
                user,
                "--group",
                GROUPS[person],
                show=False,
            )
            self.people[person] = Path(cmd.out.strip().removeprefix("export KUBECONFIG="))
        self.say(f"     people: {', '.join(f'{p} ({u})' for p, u in PEOPLE.items())}; ledger: PostgreSQL")

    def install(self) -> None:
        self.say("2. the CRD, the operator's namespace, the tenancy stamps, the teams and the sample policy")
        self.run("kubectl", "apply", "-f", "manifests/crd/quotapolicies.yaml")
        self.run("kubectl", "wait", "--for", "condition=established", "crd/quotapolicies.queuemanager.dev")
        self.run("kubectl", "create", "namespace", "queue-manager")
        self.run("kubectl", "apply", "-k", "manifests/tenancy")  # who submitted, who edited: stamped
        # New admission policies (the stamps) take seconds before the API server admits what they match: it
        # answers ServiceUnavailable until then (docs/operator.md's `until ... apply` says the same).
        for _ in range(30):
            cmd = self.run("kubectl", "apply", "-k", "manifests/samples", person="alice", check=False)
            if cmd.code == 0 or "ServiceUnavailable" not in cmd.err:
                break
            time.sleep(2)
        if cmd.code != 0:
            raise RuntimeError(f"`{cmd.shown()}` exited {cmd.code}:\n{cmd.err[-3000:]}")

    def start_operator(self) -> None:
        argv = [
            str(BIN / "qm"),
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--log-format",
            "json",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            "--ledger-spool",
            str(self.workdir / "spool"),
        ]
        self.say(
            "  $ qm run --kubeconfig $KUBECONFIG --log-format json ...   (the operator; ledger "
            "$QM_LEDGER_URL)"
        )
        with self.operator_log.open("wb") as out:
            self.operator = subprocess.Popen(
                argv, cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.run("kubectl", "wait", "--for", "condition=Ready", f"quotapolicy/{POLICY}", "--timeout", "90s")

    def stop_operator(self) -> None:
        if self.operator is None or self.operator.poll() is not None:
            return
        self.operator.send_signal(signal.SIGTERM)
        try:
            self.operator.wait(30)
        except subprocess.TimeoutExpired:
            self.operator.kill()
            self.operator.wait(10)

    def submit(self) -> None:
        self.say(
            f"3. long-running sample Jobs: {EXPERIMENTS} research experiments (rita), {SERVING} business "
            "serving jobs (bob)"
        )
        for _ in range(EXPERIMENTS):
            self.run(
                "kubectl",
                "create",
                "-f",
                "manifests/samples/jobs.yaml",
                "-l",
                f"kueue.x-k8s.io/queue-name={RESEARCH}",
                person="rita",
            )
        # The experiments hold research's 4 GPUs before business asks for the cohort's rest.
        self.wait(
            "the experiments admitted",
            lambda: (
                sum(life.reserved for life in self.observe().lives.values() if life.team == RESEARCH)
                == EXPERIMENTS
            ),
            90,
        )
        for _ in range(SERVING):
            self.run(
                "kubectl",
                "create",
                "-f",
                "manifests/samples/jobs.yaml",
                "-l",
                f"kueue.x-k8s.io/queue-name={BUSINESS}",
                person="bob",
            )
        self.wait(
            "four serving jobs admitted, the fifth waiting",
            lambda: (
                sorted(life.reserved for life in self.observe().lives.values() if life.team == BUSINESS)
                == [False] + [True] * (SERVING - 1)
            ),
            90,
        )
        time.sleep(HISTORY_S)
        obs = self.observe()
        for team in (RESEARCH, BUSINESS):
            held = sum(life.gpus for life in obs.lives.values() if life.team == team and life.reserved)
            waiting = sum(1 for life in obs.lives.values() if life.team == team and not life.reserved)
            self.say(f"     {team}: {held} GPUs held of {obs.quotas[team] // 1000}, {waiting} job(s) waiting")

    def plan(self) -> None:
        self.say(
            "4. qm plan: the seed's shift (research 4 -> 1 GPU, business 16 -> 19), a one-minute transition"
        )
        self.record.plan_at = time.time()
        cmd = self.run(
            "qm", "plan", str(SHIFT.relative_to(ROOT)), "--horizon", HORIZON, "-o", "json", timeout=600
        )
        self.record.plan = cmd.json()
        for t in self.record.plan.get("transitions") or []:
            self.say(f"     plan {t['offsetSeconds']:+7.1f} s  {t.get('quota') or 'evictions'}: {t['what']}")

    def apply(self) -> None:
        self.say("5. alice applies it; the cluster is watched until the transition is done")
        cmd = self.run("kubectl", "apply", "-f", str(SHIFT.relative_to(ROOT)), person="alice")
        self.record.applied_at = cmd.at + cmd.seconds

    def watch(self) -> None:
        def settled() -> bool:
            obs = self.observe()
            status = self.policy_status()
            done = bool(status.get("transitions")) and all(
                t.get("phase") == "Complete" for t in status.get("transitions") or []
            )
            business_in = all(
                life.reserved or life.finished for life in obs.lives.values() if life.team == BUSINESS
            )
            return done and business_in

        took = self.wait(
            "the transition complete and business's waiting job admitted", settled, SETTLE_TIMEOUT_S
        )
        self.say(f"     settled {took:.0f} s after the apply")
        time.sleep(3)  # what the last polls may race with (a reactivation, the last Events)
        self.observe()
        self.record.policy_status = self.policy_status()
        self.record.workloads = self.workloads()

    def account(self) -> None:
        self.say("6. the ledger's answers, the operator's budgets and metrics, qm explain")
        self.record.until = time.time()
        until = rfc3339(self.record.until)
        with contextlib.suppress(OSError):
            self.record.metrics = (
                urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
                .read()
                .decode()
            )
        self.stop_operator()  # flushes the spool (the database is up) and writes the last history
        self.record.operator_log = [
            json.loads(line) for line in self.operator_log.read_text().splitlines() if line.startswith("{")
        ]
        window = ("--since", "1h", "--until", until)
        self.record.usage = self.run("qm", "usage", *window, "--by", "team,project", "-o", "json").json()
        self.record.cost = self.run("qm", "cost", *window, "--by", "team", "-o", "json").json()
        self.record.audit = self.run("qm", "audit", *window, "-o", "json").json()
        self.record.budget_file = self.run(
            "qm", "budget", "status", str(SHIFT.relative_to(ROOT)), "--at", until, "-o", "json"
        ).json()
        self.record.budget_live = self.run(
            "qm", "budget", "status", "--kubeconfig", str(self.kubeconfig), "-o", "json"
        ).json()
        # What the operator measured was the ledger at its measuring time: the cost up to that time.
        measured = [
            r.get("measured_at") for r in self.record.budget_live.get("rows") or [] if r.get("measured_at")
        ]
        if measured:
            at_measure = ("--since", "1h", "--until", str(measured[0]))
            self.record.cost_at_measure = self.run(
                "qm", "cost", *at_measure, "--by", "team", "-o", "json"
            ).json()
        self.record.explain = self.run("qm", "explain", "--kubeconfig", str(self.kubeconfig)).out


def main(narrate: Narrate = print) -> Record:
    """`make journey`: the journey in a temporary directory with a throwaway PostgreSQL, narrated, then the
    seams with their figures (tests/journey/seams.py)."""
    import tempfile

    from tests.journey import seams
    from tests.ledger_db import start_server

    with tempfile.TemporaryDirectory(prefix="qm-journey-") as tmp:
        server = start_server()
        try:
            url = server.create_database("ledger")
            narrate(f"the journey: {ROOT}, work dir {tmp}")
            given = os.environ.get("QM_JOURNEY_KUEUE_CONFIG")
            record = Journey(Path(tmp), url, narrate, kueue_config=Path(given) if given else None).run_all()
        finally:
            server.destroy()
    narrate("")
    for seam in seams.check(record):
        narrate(seam.report())
    return record
