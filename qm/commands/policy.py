"""`qm policy check|render FILE...`: judge or preview a QuotaPolicy offline (GitOps CI).

`check` applies the same schema and cross-field rules as the API server and the
operator; `render` prints the Kueue objects the operator would own, as YAML.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("policy", help="check or render QuotaPolicy files offline")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="validate QuotaPolicy files (exit 2 on the first invalid one)")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(handler=_check)
    render = actions.add_parser("render", help="print the Kueue objects a QuotaPolicy file renders to")
    render.add_argument("file", metavar="FILE")
    render.set_defaults(handler=_render)


def _check(args: argparse.Namespace) -> int:
    from fairshare.policy import load_policy_file

    for path in args.files:
        policy = load_policy_file(path)
        print(f"{path}: QuotaPolicy {policy.metadata.name} is valid ({len(policy.spec.teams)} teams)")
    return 0


def _render(args: argparse.Namespace) -> int:
    import yaml

    from fairshare.policy import load_policy_file, render

    policy = load_policy_file(args.file)
    yaml.safe_dump_all(render(policy), sys.stdout, sort_keys=False)
    return 0
