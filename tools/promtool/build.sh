#!/usr/bin/env bash
# Build (or reuse) promtool from the Prometheus Go module, to test manifests/monitoring/prometheusrule.yaml
# with `promtool test rules` (tests/unit/monitoring). The Prometheus module serves its releases as
# v0.<minor*100+patch>.x (v0.316.0 = Prometheus 3.16.0); its go.mod has no replace lines, so
# `go install pkg@version` works through the module proxy.
#
# Output (outside the repo, beside the control plane): $QM_CACHE_DIR/bin/promtool-<version>/promtool
# Re-running when it exists is a no-op. Env: QM_CACHE_DIR (default ~/.cache/queue-manager).
set -euo pipefail

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE="${QM_CACHE_DIR:-$HOME/.cache/queue-manager}"
DIR="$CACHE/bin/promtool-$PROMETHEUS_VERSION"
export GOTOOLCHAIN=local   # fail loudly rather than download a toolchain
export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false"
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "go not found on PATH nor in /usr/local/go/bin" >&2; exit 1; }

if [[ -x "$DIR/promtool" ]]; then
  echo "$DIR/promtool"
  exit 0
fi
echo "[promtool] building github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION (minutes on 2 cores)..." >&2
start=$SECONDS
mkdir -p "$DIR"
GOBIN="$DIR.tmp.$$" go install -trimpath -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
mv -f "$DIR.tmp.$$/promtool" "$DIR/promtool"
rmdir "$DIR.tmp.$$"
printf 'promtool %s built in %ss (%s cores)\n' "$PROMETHEUS_VERSION" "$((SECONDS - start))" "$(nproc)" \
  >"$DIR/BUILD_INFO"
echo "$DIR/promtool"
