"""Kueue's webhook registrations re-pointed at loopback, and its out-of-cluster configuration."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from devcluster import kueue

# The shape of config/components/webhook/manifests.yaml in the Kueue module (trimmed).
MANIFESTS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
  failurePolicy: Fail
  name: mjob.kb.io
  rules:
  - apiGroups: [batch]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [jobs]
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-kueue-x-k8s-io-v1beta2-clusterqueue}
  failurePolicy: Fail
  name: vclusterqueue.kb.io
  rules:
  - apiGroups: [kueue.x-k8s.io]
    apiVersions: [v1beta2]
    operations: [CREATE, UPDATE]
    resources: [clusterqueues]
  sideEffects: None
"""


def _configs(tmp_path: Path, frameworks: tuple[str, ...]) -> list[dict[str, object]]:
    path = tmp_path / "manifests.yaml"
    path.write_text(MANIFESTS)
    return kueue.webhook_configurations(path, 9443, b"PEM", frameworks)


@pytest.mark.parametrize(
    ("frameworks", "expected"),
    [
        ((), [[], ["vclusterqueue.kb.io"]]),
        (("batch/job",), [["mjob.kb.io"], ["vclusterqueue.kb.io"]]),
    ],
    ids=["kueue-kinds-only", "job-integration-adds-the-job-webhook"],
)
def test_only_webhooks_of_kueue_kinds_and_enabled_integrations_are_registered(
    tmp_path: Path, frameworks: tuple[str, ...], expected: list[list[str]]
) -> None:
    got = [[h["name"] for h in c["webhooks"]] for c in _configs(tmp_path, frameworks)]  # type: ignore[attr-defined]
    assert got == expected


def test_service_references_become_loopback_urls_with_the_ca_bundle(tmp_path: Path) -> None:
    mutating, validating = _configs(tmp_path, ("batch/job",))
    assert (mutating["metadata"], validating["metadata"]) == (
        {"name": "kueue-mutating-webhook-configuration"},
        {"name": "kueue-validating-webhook-configuration"},
    )
    hook = mutating["webhooks"][0]  # type: ignore[index]
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-batch-v1-job",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    first = next(yaml.safe_load_all(MANIFESTS))["webhooks"][0]
    assert (hook["failurePolicy"], hook["rules"]) == ("Fail", first["rules"])


def test_the_configuration_keeps_kueue_on_loopback_without_leader_election_or_internal_certs(
    tmp_path: Path,
) -> None:
    cfg = kueue.configuration(kueue.KueueEndpoints(webhook_port=1, health_port=2), tmp_path, ["batch/job"])
    assert {
        k: cfg[k] for k in ("health", "metrics", "webhook", "leaderElection", "internalCertManagement")
    } == {
        "health": {"healthProbeBindAddress": "127.0.0.1:2"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": 1, "certDir": str(tmp_path)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }


def test_crds_are_read_in_file_order_and_established_is_read_from_conditions(tmp_path: Path) -> None:
    for name in ("b", "a"):
        doc = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
        }
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    names = [d["metadata"]["name"] for d in kueue.crds(tmp_path)]  # type: ignore[index]
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    pending = {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}}
    assert (names, kueue.crd_established(established), kueue.crd_established(pending)) == (
        ["a", "b"],
        True,
        False,
    )
