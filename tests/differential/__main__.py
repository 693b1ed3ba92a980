"""``python -m tests.differential --seeds 0:300`` (``make differential SEEDS=0:300``): the larger,
nightly-style differential run. Starts one control plane per mode (classical: Kueue's defaults;
fair-sharing: ``fairSharing`` with Kueue's default strategies), one at a time, runs every seed,
prints a line per state and then the per-step and per-state agreement with the disagreement
classes. Exits 1 when an agreement target is missed (tests/differential/targets.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kubernetes import config as k8s_config

from devcluster import Binaries, BinariesMissing, ControlPlane
from tests.differential.cases import save_case
from tests.differential.generator import MODES
from tests.differential.report import lines, summarize
from tests.differential.runner import StateRecord, run_state
from tests.differential.targets import KUEUE_CONFIG, misses


def parse_seeds(text: str) -> list[int]:
    """``0:300`` (a range, end excluded) or ``1,5,9``."""
    try:
        if ":" in text:
            lo, hi = text.split(":", 1)
            seeds = list(range(int(lo), int(hi)))
        else:
            seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds: expected START:END or a comma list, got {text!r}"
        ) from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"--seeds: no non-negative seeds in {text!r}")
    return seeds


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"--modes: each of {', '.join(MODES)} (got {text!r})")
    return modes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0:300"), help="START:END or a,b,c")
    parser.add_argument("--modes", type=_modes, default=list(MODES), help="classical,fair-sharing")
    parser.add_argument(
        "--save-cases",
        type=Path,
        default=None,
        metavar="DIR",
        help="write each resynced disagreement as a conformance case into DIR",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="one JSON line per step")
    args = parser.parse_args(argv)
    try:
        binaries = Binaries.discover()
    except BinariesMissing as err:
        print(f"differential: {err}", file=sys.stderr)
        return 2
    records: list[StateRecord] = []
    out = args.json.open("w", encoding="utf-8") if args.json else None
    began = time.monotonic()
    try:
        for mode in args.modes:
            with ControlPlane(None, binaries, kueue_config=KUEUE_CONFIG[mode]) as cp:
                api = k8s_config.new_client_from_config(config_file=str(cp.kubeconfig))
                try:
                    for seed in args.seeds:
                        rec = run_state(api, seed, mode)
                        records.append(rec)
                        _progress(rec)
                        if out is not None:
                            _dump(out, rec)
                        if args.save_cases is not None:
                            for step in rec.steps:
                                if not step.resynced_verdict.agree or step.real.livelock:
                                    print(f"    saved {save_case(args.save_cases, rec, step)}", flush=True)
                finally:
                    api.close()
    finally:
        if out is not None:
            out.close()
    summaries = summarize(records)
    for line in lines(summaries, args.seeds):
        print(line)
    print(f"total {time.monotonic() - began:.0f} s")
    missed = misses(summaries)
    for m in missed:
        print(f"TARGET MISSED: {m}")
    return 1 if missed else 0


def _progress(rec: StateRecord) -> None:
    bad = [s for s in rec.steps if not s.resynced_verdict.agree]
    chained = "agrees" if rec.chained_agree else "diverges"
    status = rec.error or (f"{len(bad)} resynced disagreement(s)" if bad else "agrees")
    head = f"{rec.mode} seed {rec.seed}: {len(rec.steps)} steps in {rec.seconds:.1f} s"
    print(f"{head}: {status}; chained {chained}", flush=True)
    for s in bad:
        print(f"    step {s.index} [{s.resynced_verdict.cls}] {s.resynced_verdict.difference}", flush=True)


def _dump(out: object, rec: StateRecord) -> None:
    write = out.write  # type: ignore[attr-defined]
    for s in rec.steps:
        cv = s.chained_verdict
        write(
            json.dumps(
                {
                    "mode": rec.mode,
                    "seed": rec.seed,
                    "step": s.index,
                    "name": s.name,
                    "real_preempted": s.real.preempted,
                    "real_livelock": s.real.livelock,
                    "real_settled": s.real.settled,
                    "real_seconds": round(s.real.seconds, 2),
                    "resynced_agree": s.resynced_verdict.agree,
                    "resynced_class": s.resynced_verdict.cls,
                    "resynced_difference": s.resynced_verdict.difference,
                    "chained_agree": cv.agree if cv else None,
                    "chained_class": cv.cls if cv else None,
                    "chained_difference": cv.difference if cv else None,
                    "unbatched_agree": s.unbatched_verdict.agree if s.unbatched_verdict else None,
                }
            )
            + "\n"
        )
    if rec.error:
        write(json.dumps({"mode": rec.mode, "seed": rec.seed, "error": rec.error}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
