"""The launcher's own guarantees: a versioned server, RBAC for minted identities."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane


def test_the_apiserver_reports_the_pinned_version_as_semver(
    control_plane: ControlPlane, api_client: k8s.ApiClient
) -> None:
    info = k8s.VersionApi(api_client).get_code()
    assert (info.git_version, info.major, info.minor) == (
        control_plane.binaries.versions.kubernetes,
        "1",
        control_plane.binaries.versions.kubernetes.split(".")[1],
    )


def test_a_minted_identity_is_denied_until_rbac_grants_it_access(
    namespace: str,
    api_client: k8s.ApiClient,
    mint_kubeconfig: Callable[..., Path],
    api_client_factory: Callable[..., k8s.ApiClient],
    wait_until: Callable[..., object],
) -> None:
    alice = api_client_factory(mint_kubeconfig("alice", ["team-a"]))
    core = k8s.CoreV1Api(alice)
    with pytest.raises(ApiException) as denied:
        core.list_namespaced_config_map(namespace)
    rbac = k8s.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        namespace,
        k8s.V1Role(
            metadata=k8s.V1ObjectMeta(name="read-cm"),
            rules=[k8s.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        k8s.V1RoleBinding(
            metadata=k8s.V1ObjectMeta(name="team-a-read-cm"),
            role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="read-cm"),
            subjects=[k8s.RbacV1Subject(kind="Group", name="team-a", api_group="rbac.authorization.k8s.io")],
        ),
    )

    def allowed() -> bool:
        try:
            core.list_namespaced_config_map(namespace)
        except ApiException as err:
            if err.status == 403:
                return False
            raise
        return True

    wait_until(allowed, what="RBAC grant to take effect")
    with pytest.raises(ApiException) as still_denied:
        core.list_namespaced_secret(namespace)
    alice.close()
    assert (denied.value.status, still_denied.value.status) == (403, 403)
