#!/usr/bin/env bash
# `make deploy`: install the operator into the current kubectl context (CRD, RBAC, Deployment), then the
# sample policy with its namespaces. Kueue must already run there (`make kind-up` installs it on kind).
# IMAGE (set by the Makefile: $(REGISTRY)/queue-manager:$(VERSION)) replaces the image of manifests/ when it
# differs from the default, through a kustomize overlay in a temporary directory (manifests/ stays as is).
set -euo pipefail
cd "$(dirname "$0")/../.."
KUBECTL=${KUBECTL:-kubectl}
DEFAULT_NAME=ghcr.io/queue-manager/queue-manager
IMAGE=${IMAGE:-$DEFAULT_NAME:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)}

overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
cat > "$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$overlay" manifests)
images:
  - name: $DEFAULT_NAME
    newName: ${IMAGE%:*}
    newTag: ${IMAGE##*:}
YAML
echo "deploy: image $IMAGE"
"$KUBECTL" apply --server-side -k "$overlay"
"$KUBECTL" wait --for=condition=Established --timeout=60s crd/quotapolicies.queuemanager.dev
"$KUBECTL" -n queue-manager rollout status deployment/queue-manager --timeout=180s
"$KUBECTL" apply -k manifests/samples
"$KUBECTL" get quotapolicies
echo "deploy: done; try: kubectl create -f manifests/samples/jobs.yaml && kubectl get workloads -A"
