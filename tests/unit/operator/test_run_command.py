"""`qm run` flags and the kopf registry it builds (no cluster needed)."""

from __future__ import annotations

import pytest

from qm.cli import build_parser, main
from queue_manager.config import OperatorConfig
from queue_manager.handlers import build_registry


def test_run_flags_have_documented_defaults() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.kubeconfig, args.metrics_port, args.health_port, args.dry_run, args.log_format, args.tick,
            args.history_persist, args.starvation_grace) == (None, 9090, 8080, None, "json", 1.0, 60.0, 5.0)


@pytest.mark.parametrize(("flags", "dry_run"), [(["--dry-run"], True), (["--no-dry-run"], False), ([], None)],
                         ids=["dry-run", "no-dry-run", "per-policy"])
def test_the_dry_run_flag_overrides_every_policy_or_defers_to_them(flags: list[str],
                                                                   dry_run: bool | None) -> None:
    assert build_parser().parse_args(["run", *flags]).dry_run is dry_run


@pytest.mark.parametrize("flags", [["--tick", "0"], ["--metrics-port", "70000"], ["--tick", "soon"]],
                         ids=["zero-tick", "port-out-of-range", "not-a-number"])
def test_bad_flags_exit_2_without_a_traceback(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", *flags])
    assert info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_missing_kubeconfig_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    assert capsys.readouterr().err == "qm run: error: --kubeconfig: no such file: /nonexistent/kubeconfig\n"


def test_the_registry_watches_policies_workloads_and_every_owned_kind() -> None:
    registry = build_registry(OperatorConfig(tick_seconds=0.5))
    selectors = registry._watching.get_all_selectors() | registry._spawning.get_all_selectors()
    watched = sorted({str(s.plural or s.any_name) for s in selectors})
    assert watched == ["clusterqueues", "cohorts", "localqueues", "quotapolicies", "resourceflavors",
                       "workloadpriorityclasses", "workloads"]
