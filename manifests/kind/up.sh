#!/usr/bin/env bash
# `make kind-up`: a kind cluster with Kueue and the operator image loaded (needs Docker, kind, kubectl).
# Then `make deploy` installs the operator (kubectl apply -k manifests/) and the sample policy.
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER=${KIND_CLUSTER:-queue-manager}
KUEUE_VERSION=${KUEUE_VERSION:-v0.19.2}
IMAGE=${IMAGE:-ghcr.io/queue-manager/queue-manager:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)}
KUBECTL=${KUBECTL:-kubectl}

KIND_VERSION=${KIND_VERSION:-v0.33.0}
if ! command -v kind >/dev/null && command -v go >/dev/null; then
  # kind is a Go module: install the pinned release into GOBIN (on PATH as $(go env GOPATH)/bin).
  echo "kind-up: installing sigs.k8s.io/kind@$KIND_VERSION with go install"
  go install "sigs.k8s.io/kind@$KIND_VERSION"
  export PATH="$(go env GOPATH)/bin:$PATH"
fi
for tool in docker kind "$KUBECTL"; do
  command -v "$tool" >/dev/null || { echo "kind-up: $tool is not installed" >&2; exit 2; }
done

if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --config manifests/kind/cluster.yaml
fi
"$KUBECTL" config use-context "kind-$CLUSTER"

# Kueue's release manifests (CRDs, controller, webhooks); wait until its webhook serves, or the operator's
# first applies are rejected.
"$KUBECTL" apply --server-side -f "https://github.com/kubernetes-sigs/kueue/releases/download/$KUEUE_VERSION/manifests.yaml"
"$KUBECTL" -n kueue-system rollout status deployment/kueue-controller-manager --timeout=300s

docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"
echo "kind-up: cluster $CLUSTER ready with Kueue $KUEUE_VERSION and $IMAGE; next: make deploy"
