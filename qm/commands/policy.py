"""`qm policy check|render FILE...`: judge or preview a QuotaPolicy offline (GitOps CI).

`check` applies the same schema and cross-field rules as the API server and the
operator; `render` prints the objects the operator would own, as YAML: the Kueue objects, then
those of spec.tenancy (admission rules and RoleBindings, docs/tenancy.md).
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("policy", help="check or render QuotaPolicy files offline")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate QuotaPolicy files (exit 2 on the first invalid one)")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument(
        "--previous",
        metavar="FILE",
        help="the policy in force (e.g. the main branch's copy): warn when the change hands quota to no "
        "team (a cohort tree's total quota drops: capacity left idle)",
    )
    check.set_defaults(handler=_check)
    render = actions.add_parser("render", help="print the objects a QuotaPolicy file renders to (Kueue "
                                "objects, then the tenancy's admission rules and RoleBindings)")
    render.add_argument("file", metavar="FILE")
    render.set_defaults(handler=_render)


def _check(args: argparse.Namespace) -> int:
    from fairshare.control import PolicyRules, stranded_by_change
    from fairshare.policy import load_policy_file
    from fairshare.policy.tenancy import tenancy_warnings
    from fairshare.quantity import describe_quantity

    previous = load_policy_file(args.previous) if args.previous else None
    for path in args.files:
        policy = load_policy_file(path)
        print(f"{path}: QuotaPolicy {policy.metadata.name} is valid ({len(policy.spec.teams)} teams)")
        for warning in tenancy_warnings(policy):
            print(f"{path}: warning: {warning}")
        if previous is None:
            continue
        # The controller's rule (status.strandedQuota, the CapacityStranded condition): printed, not an
        # error; a paired move (the cut given to another team of the tree) is the fix.
        for s in stranded_by_change(PolicyRules.of(previous), PolicyRules.of(policy)):
            tree = s.root.removeprefix("cq:")
            fr = s.flavor_resource
            print(f"{path}: warning: the change hands {describe_quantity(s.amount, fr.resource)} "
                  f"({fr.resource} in flavor {fr.flavor}) of cohort tree {tree} to no team (compared with "
                  f"{args.previous}): that capacity stays idle unless another team's quota there grows by "
                  "as much (a paired move)")
    return 0


def _render(args: argparse.Namespace) -> int:
    import yaml

    from fairshare.policy import load_policy_file, render
    from fairshare.policy.tenancy import render_tenancy

    policy = load_policy_file(args.file)
    yaml.safe_dump_all([*render(policy), *render_tenancy(policy)], sys.stdout, sort_keys=False, width=110)
    return 0
