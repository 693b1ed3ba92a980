"""`qm plan NEW_POLICY.yaml`: what applying a QuotaPolicy would do to the live cluster, before it is applied
(docs/plan.md).

1. The diff, as `kubectl diff` shows it: the QuotaPolicy, then the Kueue objects the operator would apply
   at once (the controller's decision for the new policy over the live cluster), then the transitions it
   starts, step by step with their times.
2. The forecast: the current policy vs the new one (and each `--variant`) from the live state, with
   arrivals, shapes and run times calibrated from the ledger (or `--replay`ed), the same random numbers in
   every variant, through the one controller; per priority class and team, with paired 95% CIs and the
   verdict.
3. The gate: `--fail-if EXPR` (simulations/gate.py) exits 1 when a condition holds with significance.

Exit codes: 0 (no condition holds), 1 (one holds), 2 (bad input: one line naming the file, field, value).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qm.flags import seconds

if TYPE_CHECKING:
    from qm.planning.inputs import History, Live, PolicyFile

HORIZON, HISTORY, TIMEOUT = "14d", "28d", "10s"
REPLICATIONS = 5
# The longest --history and --replay: ten years (the ledger keeps 180 days unless told otherwise; longer is a
# unit mistake, such as 100000000d, and keeps the window's start a representable date).
MAX_HISTORY = 3650 * 86400.0
# The longest --timeout of one API request: an hour (a server that has not answered by then will not).
MAX_TIMEOUT = 3600.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="show what a QuotaPolicy change does to the live cluster: the diff, the transition plan, a "
        "forecast from the ledger's history, and a CI gate",
        description="Compare NEW_POLICY.yaml with the QuotaPolicy of the same name in the cluster: the "
        "objects the operator would apply (kubectl diff), the transitions it would start, and a forecast "
        "(current vs new, from the live state, calibrated from the ledger). Exit 0, 1 when a --fail-if "
        "condition holds, 2 on bad input.",
    )
    parser.add_argument("policy", metavar="NEW_POLICY.yaml", help="the edited QuotaPolicy")
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="default: $KUBECONFIG, ~/.kube/config, in-cluster")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--timeout", type=seconds, default=seconds(TIMEOUT), metavar="DURATION",
                        help="bound on each API request (default 10s, at most 1h)")
    parser.add_argument("--allow-unverified-kueue", action="store_true",
                        help="forecast for a Kueue of a minor version the differential does not verify "
                        "(a warning instead of a refusal)")
    parser.add_argument("--horizon", type=seconds, default=seconds(HORIZON), metavar="DURATION",
                        help="how far the forecast looks (default 14d)")
    parser.add_argument("--replications", type=int, default=REPLICATIONS, metavar="N",
                        help="replications per variant (default 5; CIs are over them)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--history", type=seconds, default=seconds(HISTORY), metavar="DURATION",
                        help="the ledger window arrivals are fitted from (default 28d, at most 3650d)")
    parser.add_argument("--replay", type=seconds, metavar="DURATION",
                        help="replay the arrivals recorded in this window before now instead of the "
                        "fitted ones (at most 3650d)")
    parser.add_argument("--db", metavar="URL", help="the ledger (default: $QM_LEDGER_URL, else "
                        "~/.local/share/queue-manager/ledger.db)")
    parser.add_argument("--ledger-cache", action=argparse.BooleanOptionalAction, default=True,
                        help="reuse the ended lives read by the last plan from this ledger, and read only "
                        "what changed since (default on; $QM_CACHE_DIR/plan)")
    parser.add_argument("--no-ledger", action="store_true",
                        help="no ledger: the forecast covers the work present now only")
    parser.add_argument("--variant", action="append", default=[], metavar="FILE",
                        help="another QuotaPolicy of the same name to forecast beside (repeatable)")
    parser.add_argument("--fail-if", action="append", default=[], metavar="EXPR", dest="fail_if",
                        help="exit 1 when this holds with significance, e.g. 'wait_p95[CLASS] > +10%%', "
                        "'lost_gpu_hours > 50' (repeatable; docs/plan.md)")
    parser.add_argument("--out", metavar="DIR",
                        help="write plan.json, scenario.json, summary.json, report.html")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="runs at once (default and at most: the cores; more is capped, with one line)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="the forecast's runs: local worker processes (default) or Ray tasks "
                        "(pip install 'queue-manager[ray]'), as qm simulate")
    parser.add_argument("--address", metavar="ADDR", help="--executor ray: the Ray cluster (as qm simulate)")
    parser.add_argument("--force", action="store_true",
                        help="forecast even when its estimate is above the guards' limits "
                        "(docs/simulator.md)")
    parser.set_defaults(handler=run)


def _check(args: argparse.Namespace) -> list[Any]:
    """Flags that are wrong whatever the cluster says, before anything is read."""
    from qm.cli import UserError
    from simulations.gate import parse_condition

    if args.replications < 1:
        raise UserError(f"--replications must be >= 1 (got {args.replications})")
    if args.fail_if and args.replications < 2:
        raise UserError(f"--fail-if needs --replications >= 2: a condition holds only with a confidence "
                        f"interval (got {args.replications})")
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs must be >= 1 (got {args.jobs})")
    if args.no_ledger and (args.db or args.replay):
        raise UserError("--no-ledger excludes --db and --replay")
    from fairshare.durations import format_duration
    from simulations.scenario import MAX_HORIZON

    bounds = (("--horizon", args.horizon, MAX_HORIZON), ("--history", args.history, MAX_HISTORY),
              ("--replay", args.replay, MAX_HISTORY), ("--timeout", args.timeout, MAX_TIMEOUT))
    for flag, value, most in bounds:
        if value is not None and value > most:
            raise UserError(f"{flag} must be at most {format_duration(most)} (got {value:g}s)")
    if args.address is not None and args.executor != "ray":
        raise UserError("--address needs --executor ray")
    conditions = [parse_condition(text) for text in args.fail_if]
    if args.executor == "ray":
        from simulations.executor import require_ray

        require_ray(args.address)
    elif args.jobs is not None:
        from simulations.executor import default_workers

        cores = default_workers()
        if args.jobs > cores:  # more processes than cores only share them (and their memory)
            print(f"qm plan: --jobs {args.jobs} is more than the {cores} cores here: the forecast runs "
                  f"{cores} at once", file=sys.stderr)
            args.jobs = cores
    return conditions


def run(args: argparse.Namespace) -> int:
    conditions = _check(args)

    from qm.live import connect
    from qm.planning import inputs
    from simulations.gate import check_names

    new = inputs.read_policy_file(args.policy)
    variants = [inputs.read_policy_file(p) for p in args.variant]
    for v in variants:
        if v.policy.name != new.policy.name:
            from fairshare.errors import InputError, Location

            raise InputError(f"a variant of QuotaPolicy {new.policy.name} must have its name",
                             location=Location(file=v.path, field="metadata.name"), value=v.policy.name)
    check_names(conditions, classes={c.name for c in new.policy.spec.priority_classes},
                teams={t.name for t in new.policy.spec.teams})
    from qm.kueue_setup import effective_quota_lines, read_setup, verdict

    with connect(args.kubeconfig, args.context, timeout=args.timeout) as reader:
        live = inputs.read_live(reader, new)
        setup = read_setup(reader)
    checked = verdict(setup, allow_unverified=args.allow_unverified_kueue)
    if checked.refuse is not None:
        from qm.cli import UserError

        raise UserError(checked.refuse)
    if checked.warning is not None:
        print(checked.warning, file=sys.stderr)
    # Kueue modelled as it runs (fairSharing and its strategies), as the operator does (queue_manager/
    # kueue_config.py).
    live = dataclasses.replace(live, scheduler=setup.scheduler_config())
    if args.output == "text":
        shown = [checked.line, *effective_quota_lines(live.cluster.state)]
        sys.stdout.write("".join(f"{line}\n" for line in shown))
    now = live.now
    history = None
    budgets: dict[str, Any] = {}
    if not args.no_ledger:
        look_back = now - max(args.history, args.replay or 0.0) - args.history
        from devcluster.binaries import default_cache_dir

        cache = default_cache_dir() / "plan" if args.ledger_cache else None
        history = inputs.read_history(args.db, since=now - args.history, until=now, look_back=look_back,
                                      cache=cache)
        budgets = inputs.budget_usage(args.db, new.policy, now)
    return plan_read(args, conditions, new, variants, live, history, budgets)


def plan_read(args: argparse.Namespace, conditions: list[Any], new: PolicyFile, variants: list[PolicyFile],
              live: Live, history: History | None, budgets: dict[str, Any]) -> int:
    """Everything after the reads (the cluster, the ledger): the diff, the transition plan, the forecast, the
    gate, the outputs; the exit code (the tests call it with a cluster and a ledger made in memory)."""
    from qm.planning import diff, scenario, show, transitions
    from simulations.gate import evaluate, sequential

    decided = diff.decide_now(new, live, budgets)
    policy_text = diff.policy_diff(new, live, decided.generation)
    objects = diff.object_diffs(decided, live)
    final = diff.object_diffs(decided, live, final=True)
    planned = transitions.plan(live, new, decided, args.horizon, Path(new.path))
    head = dict(live=live, new_label=new.label, new_generation=decided.generation, policy_diff=policy_text,
                objects=objects, final=final, plan=planned)
    if args.output == "text":  # the diff first: it stands even when the forecast cannot be made
        sys.stdout.write(show.diff_text(**head))  # type: ignore[arg-type]
        sys.stdout.flush()

    settings = scenario.Settings(args.horizon, args.replications, args.seed, args.replay)
    out_dir = _out_dir(args.out)
    built = _build(live, history, new, variants, settings, out_dir)
    outcome = _simulate(built, args, sequential(conditions, built.names[new.path], args.replications))
    stopped = outcome.stopped
    fc = show.forecast(new.policy, live, outcome, built, planned, built.names[new.path])
    verdicts = evaluate(conditions, outcome.summary.variants, built.names[new.path]) if conditions else []
    code = 1 if any(v.outcome.value == "holds" for v in verdicts) else 0
    document = show.document(**head, horizon=args.horizon, built=built, fc=fc,  # type: ignore[arg-type]
                             history=history, replications=args.replications, seed=args.seed,
                             verdicts=verdicts, exit_code=code, stopped=stopped)
    if out_dir is not None:
        sections = show.forecast_sections(live=live, built=built, fc=fc, history=history, replay=args.replay,
                                          verdicts=verdicts, budgets_now=show.budget_lines(live),
                                          replications=args.replications, stopped=stopped)
        view = show.report_view(**head, sections=sections, verdicts=verdicts,  # type: ignore[arg-type]
                                exit_code=code)
        _write(out_dir, document, built, outcome, view)
    if args.output == "json":
        json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(show.forecast_text(
            live=live, horizon=args.horizon, built=built, fc=fc, history=history, replay=args.replay,
            replications=args.replications, seed=args.seed, verdicts=verdicts,
            budgets_now=show.budget_lines(live), stopped=stopped))
        if out_dir is not None:
            sys.stdout.write(f"\nreport: {out_dir / 'report.html'}  (plan: {out_dir / 'plan.json'}, "
                             f"scenario: {out_dir / 'scenario.json'})\n")
    return code


def _out_dir(out: str | None) -> Path | None:
    from qm.cli import UserError

    if out is None:
        return None
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create --out {path}: {err.strerror}") from None
    return path


def _build(live: Any, history: Any, new: Any, variants: Any, settings: Any, out_dir: Path | None) -> Any:
    """The scenario; a change the simulator cannot apply mid-run is said in the plan's own terms."""
    from fairshare.errors import InputError, Location
    from qm.planning import scenario

    path = (out_dir or Path(".")) / "scenario.json"
    try:
        return scenario.build(live, history, new, variants, settings, path)
    except InputError as err:
        if "changes more than quotas, weights and the policy's rules" in err.message:
            what = err.message.split("(", 1)[1].split(")", 1)[0]
            raise InputError(f"the forecast simulates changes of quotas, weights and the policy's rules; "
                             f"this change also {what} (the diff above shows it): apply it without a "
                             "forecast, or plan the quota change separately",
                             location=Location(file=new.path)) from None
        raise


def _simulate(built: Any, args: argparse.Namespace, until: Any = None) -> Any:
    from simulations.guards import check
    from simulations.runner import run_scenario

    # The same guard as qm simulate, over the scenario the plan built (calibrated rates x --horizon x
    # --replications), before a workload is drawn.
    estimate, over = check(built.loaded, force=args.force)
    if over is not None:
        print(f"warning: the forecast runs {estimate.line()} although {over} (--force)", file=sys.stderr)
    return run_scenario(built.loaded, workers=args.jobs, progress=args.progress, log=None,
                        executor=args.executor, address=args.address, until=until)


def _write(out: Path, document: dict[str, Any], built: Any, outcome: Any, view: dict[str, Any]) -> None:
    from qm.planning.show import TEMPLATES
    from simulations.outputs import write_run_files, write_summary
    from simulations.report import write_report

    text = json.dumps(document, indent=2, ensure_ascii=False)
    (out / "plan.json").write_text(text + "\n", encoding="utf-8")
    (out / "scenario.json").write_text(json.dumps(built.doc, indent=1) + "\n", encoding="utf-8")
    write_summary(out, outcome.summary)
    write_run_files(out, outcome.first_runs)
    write_report(out, outcome.summary, outcome.first_runs, digests=outcome.digests,
                 change_times=outcome.change_times, template="plan.html", template_dirs=(TEMPLATES,),
                 extra=view)
