"""Sub-commands of `qm`: each module defines `register(subparsers)`.

Modules are discovered by name (sorted, so `qm --help` is deterministic); a module
imports its heavy dependencies inside its handler so `qm --help` stays fast.
"""
