"""A run that carries its data: what a worker on another machine needs, resolved on the submitting host.

A scenario names files relative to its folder (the QuotaPolicy and its edits, Kueue manifests, trace files).
A Ray worker on another node cannot read that folder, so before the runs are submitted:

- the policies and manifests are read here and put inline in the scenario (``cluster.quotaPolicy`` and
  ``events[].policy`` as documents, the manifests' objects ahead of ``cluster.objects``, in file order: the
  same documents in the same order as ``cluster_state`` reads them);
- each trace file's bytes go into a :class:`Bundle` (one for the whole sweep, put once in Ray's object
  store), and the trace source names the file by its name in the bundle; the worker writes the bundle into
  a folder of its node (:func:`unpacked`) and reads the traces from there with the same readers.

The files are the ones ``expand_paths`` matches here, in its order, so the worker reads the same rows.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fairshare.errors import InputError, Location
from fairshare.manifests import load_yaml_documents

from .cluster import policy_document
from .scenario import Scenario
from .traces import expand_paths


@dataclass(frozen=True)
class Bundle:
    """The trace files of a sweep: name in the bundle -> bytes; ``digest`` names the bundle's content."""

    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()


def portable(scenario: Scenario, base_dir: Path, bundle: Bundle) -> Scenario:
    """``scenario`` with nothing left to read from ``base_dir``: policies and manifests inline, trace paths
    named in ``bundle`` (whose files this adds). Bad input raises the same InputError as a local run."""
    cluster = scenario.cluster
    source = cluster.quota_policy
    policy = (policy_document(source, base_dir, where="cluster.quotaPolicy") if isinstance(source, str)
              else source)
    objects: list[dict[str, object]] = []
    for i, name in enumerate(cluster.manifests):
        path = Path(name) if Path(name).is_absolute() else base_dir / name
        try:
            objects.extend(load_yaml_documents(path))
        except InputError as err:
            raise err.at(field_prefix=f"cluster.manifests[{i}]") from None
    events = [
        e.model_copy(update={"policy": policy_document(e.policy, base_dir, where=f"events[{i}].policy")})
        if isinstance(e.policy, str) else e
        for i, e in enumerate(scenario.events)
    ]
    workloads = []
    for i, w in enumerate(scenario.workloads):
        if w.trace is None:
            workloads.append(w)
            continue
        try:
            paths = expand_paths(w.trace, base_dir)
        except InputError as err:
            raise err.at(field_prefix=f"workloads[{i}]") from None
        names = []
        for file in paths:
            data = Path(file).read_bytes()
            # Named by content (the same file in several variants is shipped once), keeping the file's name:
            # a reader may go by its suffix.
            name = f"{hashlib.sha256(data).hexdigest()[:16]}-{Path(file).name}"
            bundle.files[name] = data
            names.append(glob.escape(name))  # a literal name, whatever characters the file's name has
        workloads.append(w.model_copy(update={"trace": w.trace.model_copy(update={"paths": names})}))
    return scenario.model_copy(update={
        "cluster": cluster.model_copy(update={
            "quota_policy": policy, "manifests": [], "objects": [*objects, *cluster.objects]}),
        "events": events,
        "workloads": workloads,
    })


_UNPACKED: dict[str, Path] = {}  # per process: bundle digest -> its folder


def unpacked(bundle: Bundle) -> Path:
    """A folder holding the bundle's files: the base directory a :func:`portable` scenario's traces are read
    from. One per node and bundle content (``qm-sweep-DIGEST`` in the temp dir), shared by the node's workers
    and by later sweeps of the same data, so none is left behind per worker; used only if its files are the
    bundle's, byte for byte (else this process writes a folder of its own)."""
    if not bundle.files:  # no trace: a portable scenario reads nothing from its base directory
        return Path(".")
    digest = bundle.digest
    if digest in _UNPACKED and _UNPACKED[digest].is_dir():
        return _UNPACKED[digest]
    for name in bundle.files:
        if Path(name).name != name:  # names come from portable(): never a path
            raise InputError("a shipped file's name must not be a path", location=Location(field="bundle"),
                             value=name)
    shared = Path(tempfile.gettempdir()) / f"qm-sweep-{digest[:32]}"
    if not _holds(shared, bundle):
        fresh = Path(tempfile.mkdtemp(prefix="qm-sweep-", dir=shared.parent))
        for name, data in bundle.files.items():
            (fresh / name).write_bytes(data)
        with contextlib.suppress(OSError):  # another worker of this node may have won the race
            fresh.rename(shared)  # atomic
        if not _holds(shared, bundle):  # not ours to trust (or the rename lost to a bad one): keep our copy
            _UNPACKED[digest] = fresh
            return fresh
        shutil.rmtree(fresh, ignore_errors=True)
    _UNPACKED[digest] = shared
    return shared


def _holds(folder: Path, bundle: Bundle) -> bool:
    try:
        return folder.is_dir() and sorted(p.name for p in folder.iterdir()) == sorted(bundle.files) and all(
            (folder / name).read_bytes() == data for name, data in bundle.files.items())
    except OSError:
        return False
