"""`qm run` flags and the kopf registry it builds (no cluster needed)."""

from __future__ import annotations

import importlib.metadata

import pytest

from qm.cli import build_parser, main
from queue_manager.config import OperatorConfig
from queue_manager.handlers import build_registry


def test_run_flags_have_documented_defaults() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.kubeconfig, args.metrics_port, args.health_port, args.bind_address, args.dry_run,
            args.log_format, args.tick, args.history_persist, args.starvation_grace, args.victim_hold,
            args.leader_elect, args.lease_namespace, args.lease_name, args.lease_duration) == (
        None, 9090, 8080, "127.0.0.1", None, "json", 1.0, 60.0, None, None, True, "queue-manager",
        "queue-manager", 15.0)


def test_run_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    shown = ["(default: 9090)", "(default: 8080)", "(default: 127.0.0.1)", "(default: json)",
             "(default: INFO)", "(default: 1s)", "(default: 60s)", "(default: the policy's)",
             "(default: True)", "(default: 15s)"]
    assert [d for d in shown if d not in text] == []
    assert "(default: None)" not in text


@pytest.mark.parametrize(("flags", "seconds"), [(["--tick", "0.5"], 0.5), (["--tick", "500ms"], 0.5),
                                                (["--tick", "2m"], 120.0), (["--tick", "1d"], 86400.0)],
                         ids=["bare-seconds", "milliseconds", "minutes", "a-day"])
def test_duration_flags_read_the_project_duration_grammar(flags: list[str], seconds: float) -> None:
    assert build_parser().parse_args(["run", *flags]).tick == seconds


def test_leader_election_flags() -> None:
    args = build_parser().parse_args(["run", "--no-leader-elect", "--lease-namespace", "ops",
                                      "--lease-name", "qm-a", "--lease-duration", "30s"])
    assert (args.leader_elect, args.lease_namespace, args.lease_name, args.lease_duration) == (
        False, "ops", "qm-a", 30.0)


def test_version_is_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    installed = importlib.metadata.version("queue-manager")
    assert (info.value.code, capsys.readouterr().out) == (0, f"qm {installed}\n")


@pytest.mark.parametrize(("flags", "dry_run"), [(["--dry-run"], True), (["--no-dry-run"], False), ([], None)],
                         ids=["dry-run", "no-dry-run", "per-policy"])
def test_the_dry_run_flag_overrides_every_policy_or_defers_to_them(flags: list[str],
                                                                   dry_run: bool | None) -> None:
    assert build_parser().parse_args(["run", *flags]).dry_run is dry_run


@pytest.mark.parametrize(("flags", "said"), [([], "auto"), (["--kueue-fair-sharing"], "on"),
                                             (["--kueue-fair-sharing=off"], "off"),
                                             (["--kueue-fair-sharing", "on"], "on")],
                         ids=["read from Kueue's Configuration by default", "the bare flag says on",
                              "off said", "on said"])
def test_kueue_fair_sharing_is_read_unless_said(flags: list[str], said: str) -> None:
    assert build_parser().parse_args(["run", *flags]).kueue_fair_sharing == said


@pytest.mark.parametrize("flags", [["--tick", "0"], ["--metrics-port", "70000"], ["--tick", "soon"],
                                   ["--kueue-fair-sharing=maybe"]],
                         ids=["zero-tick", "port-out-of-range", "not-a-number", "fair-sharing-neither"])
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
                       "rolebindings", "validatingadmissionpolicies", "validatingadmissionpolicybindings",
                       "workloadpriorityclasses", "workloads"]
