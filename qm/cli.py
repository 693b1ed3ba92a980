"""`qm`: one entry point for the core (conformance, explain), the simulator
(simulate), the service (run) and the local control plane (dev-cluster).

Errors caused by the user's input are printed in one line and exit non-zero; a
traceback means a bug in this project.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn, Protocol, cast

from fairshare.errors import QueueManagerError

from . import commands

# Top-level modules of the optional extras (pyproject.toml) -> the extra that brings them.
_EXTRAS = {"matplotlib": "sim", "rich": "sim", "ray": "ray", "cryptography": "dev-cluster"}


class _CommandModule(Protocol):
    def register(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


class UserError(Exception):
    """Raised by command handlers for bad flags and other user mistakes outside the core."""


class _Parser(argparse.ArgumentParser):
    """Bad flags are bad input too: one line naming the flag, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def version() -> str:
    """The installed distribution's version (pyproject.toml), as the image and the wheel carry it."""
    try:
        return importlib.metadata.version("queue-manager")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="qm",
        description="Queue manager for Kueue: fair share from history, gradual quota shifts, "
        "experiment preemption, and a simulator to try them first.",
    )
    parser.add_argument("--version", action="version", version=f"qm {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = cast(_CommandModule, importlib.import_module(f"{commands.__name__}.{info.name}"))
        # _Parser subclasses ArgumentParser; the sub-parsers action is the same object either way.
        module.register(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:  # pragma: no cover - argparse enforces a command
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except (QueueManagerError, UserError) as err:
        print(f"qm {args.command}: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        # The operator image installs the base dependencies only (pyproject.toml extras).
        extra = _EXTRAS.get((err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"qm {args.command}: error: needs the {extra} extra: pip install 'queue-manager[{extra}]' "
              f"(no module named {err.name!r})", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `qm policy render FILE | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"qm {args.command}: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
