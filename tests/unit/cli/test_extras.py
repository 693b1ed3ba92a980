"""A command whose optional extra is not installed (the operator image has the base install only) says
which extra to install, in one line, instead of a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# `sys.modules[name] = None` makes `import name` raise ModuleNotFoundError, as an absent package does.
PROBE = """
import sys
sys.modules["cryptography"] = None
from qm.cli import main
sys.exit(main(["dev-cluster", "--state-dir", sys.argv[1], "kubeconfig", "--user", "alice"]))
"""


def test_a_missing_extra_is_named_with_its_install_command(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (
        2, "", "qm dev-cluster: error: needs the dev-cluster extra: pip install 'queue-manager[dev-cluster]' "
        "(no module named 'cryptography')\n")
