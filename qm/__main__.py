from qm.cli import run

run()
