"""`qm run` imports nothing of the simulator, matplotlib or numpy (nor the dev cluster's PKI): the operator
image installs only the base dependencies (pyproject.toml; Dockerfile), so such an import would crash it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Everything `qm run` imports before kopf starts: the CLI with every sub-command registered, the run
# command's handler module and what it imports (the operator, its handlers, the leader election).
PROBE = """
import json, sys
from qm.cli import build_parser
build_parser()
import qm.commands.run, queue_manager.main, queue_manager.handlers, queue_manager.leader
bad = sorted({m.split(".")[0] for m in sys.modules} & {"simulations", "matplotlib", "numpy", "cryptography",
                                                       "devcluster"})
print(json.dumps({"bad": bad, "operator": "queue_manager.operator" in sys.modules}))
"""


def test_the_run_path_imports_no_simulator_plotting_or_dev_cluster_module() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == {"bad": [], "operator": True}
