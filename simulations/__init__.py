"""The discrete-event simulator: the policy controller's second shell (docs/simulator.md)."""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)
