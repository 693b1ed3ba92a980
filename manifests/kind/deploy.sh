#!/usr/bin/env bash
# `make deploy`: install the operator into the current kubectl context (CRD, RBAC, Deployment), then the
# sample policy with its namespaces. Kueue must already run there (`make kind-up` installs it on kind).
set -euo pipefail
cd "$(dirname "$0")/../.."
KUBECTL=${KUBECTL:-kubectl}

"$KUBECTL" apply --server-side -k manifests/
"$KUBECTL" wait --for=condition=Established --timeout=60s crd/quotapolicies.queuemanager.dev
"$KUBECTL" -n queue-manager rollout status deployment/queue-manager --timeout=180s
"$KUBECTL" apply -k manifests/samples
"$KUBECTL" get quotapolicies
echo "deploy: done; try: kubectl create -f manifests/samples/jobs.yaml && kubectl get workloads -A"
