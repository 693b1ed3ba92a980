"""`qm dev-cluster up|down|status|kubeconfig`: a local etcd + kube-apiserver + Kueue, detached."""

from __future__ import annotations

import argparse
from pathlib import Path

from qm.flags import seconds


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 64:  # each fake node is a KWOK object; 64 x 8 GPUs is past any local test
        raise argparse.ArgumentTypeError(f"must be between 0 and 64: {text!r}")
    return value


def _name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dev-cluster",
        help="run a local control plane (etcd, kube-apiserver, Kueue) built by `make controlplane`",
        description="Start, inspect or stop a local control plane with the real Kueue manager. "
        "State lives in --state-dir (default $QM_CACHE_DIR/dev-cluster).",
    )
    parser.add_argument(
        "--state-dir", type=Path, default=None, help="where the PKI, kubeconfig, logs and state live"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start it (detached) and print the KUBECONFIG to use")
    up.add_argument("--timeout", type=seconds, default="120s", metavar="DURATION",
                    help="how long to wait for readiness (default: 120s)")
    up.add_argument(
        "--nodes",
        type=_count,
        default=None,
        metavar="N",
        help="also run kube-controller-manager, kube-scheduler and KWOK with N fake GPU nodes "
        "(8 nvidia.com/gpu each; with --policy: N per flavor, sized for its quotas), so Jobs get pods that "
        "run and complete",
    )
    up.add_argument(
        "--policy",
        type=Path,
        default=None,
        metavar="FILE",
        help="a QuotaPolicy file (e.g. manifests/samples/quotapolicy.yaml): the fake nodes of each of its "
        "flavors carry the flavor's nodeLabels and nodeTaints and hold its teams' quotas (as many 8-GPU "
        "nodes as needed unless --nodes), and Kueue copies the labels the policy accounts to Workloads",
    )
    up.add_argument(
        "--kueue-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="a Kueue Configuration (config.kueue.x-k8s.io/v1beta2) whose scheduling fields "
        "(fairSharing, admissionFairSharing, waitForPodsReady, featureGates, ...) Kueue runs with; "
        "Kueue's defaults otherwise",
    )
    up.set_defaults(handler=_up)
    down = sub.add_parser("down", help="stop every component and remove the state dir")
    down.add_argument("--keep-logs", action="store_true", help="keep the state dir (logs) after stopping")
    down.set_defaults(handler=_down)
    status = sub.add_parser("status", help="report whether it runs, its components and versions")
    status.set_defaults(handler=_status)
    kc = sub.add_parser("kubeconfig", help="mint a kubeconfig for a restricted identity (RBAC applies)")
    kc.add_argument("--user", required=True, type=_name, help="user name (certificate CN)")
    kc.add_argument("--group", action="append", default=[], type=_name,
                    help="group (certificate O); repeatable")
    kc.set_defaults(handler=_kubeconfig)


def _state_dir(args: argparse.Namespace) -> Path:
    if args.state_dir is not None:
        return Path(args.state_dir)
    from devcluster import default_cache_dir

    return default_cache_dir() / "dev-cluster"


def _up(args: argparse.Namespace) -> int:
    from devcluster import (
        Binaries,
        BinariesMissing,
        ControlPlane,
        ControlPlaneError,
        KueueConfigError,
        load_kueue_config,
    )
    from devcluster.controlplane import load_state, running_components, stop_detached
    from devcluster.kueue_config import describe
    from qm.cli import UserError

    kueue_config: dict[str, object] = {}
    if args.kueue_config is not None:
        try:
            kueue_config = load_kueue_config(args.kueue_config)
        except KueueConfigError as err:
            raise UserError(str(err)) from None
    groups = []
    if args.policy is not None:
        from fairshare.policy import load_policy_file
        from qm.dev_nodes import labels_to_copy, node_groups

        if args.nodes == 0:
            raise UserError(f"--nodes 0 with --policy {args.policy}: its flavors need nodes (N >= 1)")
        policy = load_policy_file(args.policy)
        groups = node_groups(policy, args.nodes)
        kueue_config = _with_labels_to_copy(kueue_config, labels_to_copy(policy))
    elif args.nodes:
        from devcluster.nodes import NodeGroup

        groups = [NodeGroup(args.nodes)]
    workdir = _state_dir(args)
    state = load_state(workdir)
    if state is not None:
        alive = running_components(state)
        if all(alive.values()):
            asked = [g.describe() for g in groups]
            if (state.kueue_config or {}) != kueue_config or (asked and (state.nodes or []) != asked):
                raise UserError(
                    f"a dev cluster already runs in {workdir} with other nodes or another Kueue "
                    "configuration; `qm dev-cluster down` first"
                )
            print(f"already running: {state.server}")
            print(f"export KUBECONFIG={state.kubeconfig}")
            return 0
        # A half-dead earlier cluster: clean it up before starting afresh.
        stop_detached(workdir)
    elif workdir.exists() and any(workdir.iterdir()):
        raise UserError(f"{workdir} exists but holds no dev cluster state; remove it or pass --state-dir")
    try:
        binaries = Binaries.discover()
    except BinariesMissing as err:
        raise UserError(str(err)) from None
    cp = ControlPlane(
        workdir, binaries, detach=True, timeout=args.timeout, node_groups=groups, kueue_config=kueue_config,
    )
    try:
        cp.start()
    except ControlPlaneError as err:
        raise UserError(f"start-up failed: {err}") from None
    v = binaries.versions
    print(f"dev cluster ready in {cp.timings['ready']:.1f}s: {cp.server}")
    print(f"  kubernetes {v.kubernetes}, etcd {v.etcd}, kueue {v.kueue}; logs in {cp.logs_dir}")
    print(f"  Kueue configuration: {describe(kueue_config)}")
    for group in cp.node_groups:
        print(f"  nodes: {group.describe()}")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


def _with_labels_to_copy(config: dict[str, object], keys: list[str]) -> dict[str, object]:
    """The Configuration with `keys` added to integrations.labelKeysToCopy (a user's own keys kept)."""
    integrations = config.get("integrations")
    merged = dict(integrations) if isinstance(integrations, dict) else {}
    have = merged.get("labelKeysToCopy")
    old = [str(k) for k in have] if isinstance(have, list) else []
    merged["labelKeysToCopy"] = old + [k for k in keys if k not in old]
    return {**config, "integrations": merged}


def _down(args: argparse.Namespace) -> int:
    from devcluster.controlplane import stop_detached

    workdir = _state_dir(args)
    if stop_detached(workdir, keep_logs=args.keep_logs):
        print("dev cluster stopped" + (f"; logs kept in {workdir / 'logs'}" if args.keep_logs else ""))
    else:
        print(f"no dev cluster recorded in {workdir}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from devcluster.controlplane import load_state, running_components, state_rss_kib
    from devcluster.kueue_config import describe

    workdir = _state_dir(args)
    state = load_state(workdir)
    if state is None:
        print(f"not running (no state in {workdir})")
        return 1
    alive = running_components(state)
    ok = all(alive.values())
    print(f"{'running' if ok else 'DEGRADED'}: {state.server} (ready in {state.ready_seconds:.1f}s)")
    rss = state_rss_kib(state)
    for name, up in alive.items():
        mem = f"{rss[name] / 1024:.0f} MiB" if up else "-"
        flag = "up" if up else "DOWN"
        print(f"  {name:<15} pid {state.pids[name]:<8} {flag:<5} rss {mem:<8} log {state.logs[name]}")
    print(f"  total rss: {sum(rss.values()) / 1024:.0f} MiB")
    versions = ", ".join(f"{k} {v}" for k, v in sorted(state.versions.items()))
    print(f"  versions: {versions}")
    print(f"  Kueue configuration: {describe(state.kueue_config or {})}")
    for nodes in state.nodes or []:
        print(f"  nodes: {nodes}")
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0 if ok else 1


def _kubeconfig(args: argparse.Namespace) -> int:
    from devcluster import ControlPlaneError
    from devcluster.controlplane import mint_kubeconfig_detached
    from qm.cli import UserError

    try:
        path = mint_kubeconfig_detached(_state_dir(args), args.user, args.group)
    except ControlPlaneError as err:
        raise UserError(str(err)) from None
    print(f"export KUBECONFIG={path}")
    return 0
