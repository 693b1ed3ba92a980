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
# The operator's ledger: the Secret queue-manager-ledger (key url) names its PostgreSQL database. Without one,
# a throwaway PostgreSQL in the cluster (kind only: its data goes with the pod).
"$KUBECTL" create namespace queue-manager --dry-run=client -o yaml | "$KUBECTL" apply -f -
if ! "$KUBECTL" -n queue-manager get secret queue-manager-ledger >/dev/null 2>&1; then
  echo "deploy: no Secret queue-manager-ledger: starting a throwaway PostgreSQL (manifests/kind/postgres.yaml)"
  "$KUBECTL" apply -f manifests/kind/postgres.yaml
  "$KUBECTL" -n queue-manager rollout status deployment/queue-manager-ledger-db --timeout=180s
  "$KUBECTL" -n queue-manager create secret generic queue-manager-ledger \
    --from-literal=url='postgresql+psycopg://ledger:kind-only@queue-manager-ledger-db.queue-manager.svc:5432/ledger'
fi
"$KUBECTL" apply --server-side -k "$overlay"
"$KUBECTL" wait --for=condition=Established --timeout=60s crd/quotapolicies.queuemanager.dev
"$KUBECTL" -n queue-manager rollout status deployment/queue-manager --timeout=180s
"$KUBECTL" apply -k manifests/samples
"$KUBECTL" get quotapolicies
echo "deploy: done; try: kubectl create -f manifests/samples/jobs.yaml && kubectl get workloads -A"
