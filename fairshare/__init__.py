"""The policy core: a model of Kueue, the usage history, the planners and the policy controller."""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)
