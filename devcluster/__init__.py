"""Local control plane for tests and `qm dev-cluster`: etcd, kube-apiserver and the Kueue manager.

Standalone (imports nothing else from this project). The binaries are built from their Go modules
by ``tools/controlplane/build.sh`` into a cache dir; :class:`Binaries` finds them there.

Typical use::

    from devcluster import Binaries, ControlPlane
    with ControlPlane(workdir, Binaries.discover()) as cp:
        print(cp.kubeconfig)                      # admin (system:masters)
        path = cp.mint_kubeconfig("alice", ["team-a"])  # restricted identity, RBAC applies
    # Kueue with fair sharing on (v1beta2 needs its strategies listed)
    ControlPlane(workdir, kueue_config={"fairSharing": {"preemptionStrategies": [
        "LessThanOrEqualToFinalShare", "LessThanInitialShare"]}})
"""

from devcluster.binaries import Binaries, BinariesMissing, default_cache_dir
from devcluster.controlplane import ControlPlane, ControlPlaneError
from devcluster.kueue_config import KueueConfigError, load_kueue_config

__all__ = [
    "Binaries",
    "BinariesMissing",
    "ControlPlane",
    "ControlPlaneError",
    "KueueConfigError",
    "default_cache_dir",
    "load_kueue_config",
]
