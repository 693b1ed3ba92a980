#!/usr/bin/env bash
# Build (or reuse) the real control-plane binaries from their Go modules:
#   etcd            go.etcd.io/etcd/server/v3       (wrapper module: server/go.mod has replace lines,
#                                                    so `go install pkg@v` refuses it; golang/go#44840)
#   kube-apiserver  k8s.io/kubernetes/cmd/...       (wrapper module: k8s.io/kubernetes requires every staging
#                                                    module at v0.0.0, which the proxy does not serve, so each
#                                                    one is replaced by its published v0.X.Y; kubernetes#79384)
#   kueue           sigs.k8s.io/kueue/cmd/kueue     (`go install pkg@v`: its go.mod has no replace lines)
# plus Kueue's CRDs and webhook manifests copied out of the Kueue module in the module cache.
#
# Output, keyed by version (outside the repo):
#   $QM_CACHE_DIR/bin/<component>-<version>/<component>
#   $QM_CACHE_DIR/kueue-<version>/{crds/*.yaml,webhook/manifests.yaml}
#   $QM_CACHE_DIR/controlplane.json   manifest read by the Python launcher (devcluster.binaries)
# Re-running when everything exists is a no-op (a few stat calls).
#
# Stretch components (default on; QM_CONTROLPLANE_EXTRA=0 skips them): kube-controller-manager and
# kube-scheduler from the same kubernetes wrapper module, and KWOK (sigs.k8s.io/kwok/cmd/kwok, go install)
# with its Stage manifests, for fake GPU nodes whose pods "run".
# Env: QM_CACHE_DIR (default ~/.cache/queue-manager).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE="${QM_CACHE_DIR:-$HOME/.cache/queue-manager}"
SRC="$CACHE/src"
BIN="$CACHE/bin"
mkdir -p "$CACHE"
# One build at a time per cache: a second `make ensure-controlplane` (another checkout, a parallel CI job)
# waits for the first and then finds everything cached, instead of compiling the same modules again.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  printf '[controlplane] another build holds %s: waiting for it\n' "$CACHE/.build.lock" >&2
  flock 9
fi
export GOTOOLCHAIN=local   # fail loudly rather than download a toolchain
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"

log() { printf '[controlplane %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The Go toolchain of this machine image lives in /usr/local/go; CI's PATH may not include it.
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "go not found on PATH nor in /usr/local/go/bin (Go >= 1.26 is needed)"

BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# install_binary <built file> <component> <version>: atomically place it in the cache.
install_binary() {
  local built="$1" comp="$2" ver="$3" dir="$BIN/$2-$3"
  mkdir -p "$dir"
  mv -f "$built" "$dir/$comp.tmp.$$"
  mv -f "$dir/$comp.tmp.$$" "$dir/$comp"
}

# timed <component> <version> <function>: run the build function unless the binary exists.
timed() {
  local comp="$1" ver="$2" fn="$3" start
  if [[ -x "$BIN/$comp-$ver/$comp" ]]; then
    log "$comp $ver: cached ($BIN/$comp-$ver/$comp)"
    return 0
  fi
  log "$comp $ver: building (cold builds take minutes on 2 cores)..."
  start=$SECONDS
  "$fn"
  local took=$((SECONDS - start))
  printf '%s %s built in %ss on %s (%s cores)\n' "$comp" "$ver" "$took" "$BUILD_DATE" "$(nproc)" \
    >"$BIN/$comp-$ver/BUILD_INFO"
  log "$comp $ver: built in ${took}s"
}

build_etcd() {
  local w="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$w"
  (
    cd "$w"
    [[ -f go.mod ]] || go mod init local.invalid/etcdbin >/dev/null 2>&1
    log "etcd: resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    log "etcd: compiling"
    go build -trimpath -ldflags "-s -w" -o "$w/etcd.out" go.etcd.io/etcd/server/v3
  )
  install_binary "$w/etcd.out" etcd "$ETCD_VERSION"
}

# kube_module: the wrapper module shared by kube-apiserver (and the optional extra components).
kube_module() {
  local w="$SRC/kubernetes-$K8S_VERSION" staging="v0.${K8S_VERSION#v1.}"
  mkdir -p "$w"
  if [[ ! -f "$w/.resolved" ]]; then
    (
      cd "$w"
      [[ -f go.mod ]] || go mod init local.invalid/kubebins >/dev/null 2>&1
      log "kubernetes: downloading k8s.io/kubernetes@$K8S_VERSION go.mod"
      local gomod
      gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
        | sed -n 's|^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$|\1|p')"
      [[ -f "$gomod" ]] || die "could not locate the go.mod of k8s.io/kubernetes@$K8S_VERSION"
      # Every staging module is required at v0.0.0 (not served); map each one to v0.X.Y.
      # The list comes from that version's go.mod, never hard-coded (it changes between minors).
      local mods n=0
      mods="$(go mod edit -json "$gomod" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("\n".join(sorted(r["Path"] for r in d.get("Require") or [] if r["Version"] == "v0.0.0")))')"
      for m in $mods; do
        go mod edit "-replace=$m=$m@$staging"
        n=$((n + 1))
      done
      log "kubernetes: $n staging modules pinned to $staging; resolving (downloads ~1 GB cold)"
      go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION"
      if [[ "${QM_CONTROLPLANE_EXTRA:-1}" == 1 ]]; then
        go get -tool "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
          "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION"
      fi
    )
    touch "$w/.resolved"
  fi
}

kube_ldflags() {
  # What hack/lib/version.sh sets: without it the server reports v0.0.0-master+$Format:%H$,
  # which Kueue's kubeversion.FetchServerVersion cannot parse as semver.
  local minor="${K8S_VERSION#v1.}"
  minor="${minor%%.*}"
  local f="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    f+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    f+=" -X $pkg.buildDate=$BUILD_DATE"
  done
  printf '%s' "$f"
}

build_kube_component() {
  local comp="$1" w="$SRC/kubernetes-$K8S_VERSION"
  kube_module
  log "$comp: compiling"
  (cd "$w" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$w/$comp.out" "k8s.io/kubernetes/cmd/$comp")
  install_binary "$w/$comp.out" "$comp" "$K8S_VERSION"
}
build_kube_apiserver() { build_kube_component kube-apiserver; }
build_kube_controller_manager() { build_kube_component kube-controller-manager; }
build_kube_scheduler() { build_kube_component kube-scheduler; }

build_kwok() {
  local w="$SRC/kwok-$KWOK_VERSION"
  mkdir -p "$w"
  log "kwok: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  (cd "$w" && GOFLAGS=-buildvcs=false GOBIN="$w" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  install_binary "$w/kwok" kwok "$KWOK_VERSION"
}

# KWOK's Stage manifests from its module: fast node start-up, lease heartbeats, and the "general"
# pod stages (pods complete after the delay in annotation pod-complete.stage.kwok.x-k8s.io/delay).
kwok_stages() {
  local out="$CACHE/kwok-$KWOK_VERSION"
  if [[ -f "$out/.complete" ]]; then
    log "kwok stages $KWOK_VERSION: cached ($out)"
    return 0
  fi
  local dir
  dir="$(cd "$SRC" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" \
    | sed -n 's|^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$|\1|p')"
  local st="$dir/kustomize/stage"
  [[ -d "$st/pod/general" ]] || die "no stages in the KWOK module at '$dir'"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp/stages"
  cp "$st/node/fast/node-initialize.yaml" "$st/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$out.tmp/stages/"
  for f in pod-create pod-init-container-running pod-init-container-completed pod-ready pod-complete pod-delete; do
    cp "$st/pod/general/$f.yaml" "$out.tmp/stages/"
  done
  chmod -R u+w "$out.tmp"
  touch "$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "kwok stages $KWOK_VERSION: copied to $out/stages"
}

build_kueue() {
  local w="$SRC/kueue-$KUEUE_VERSION" v=sigs.k8s.io/kueue/pkg/version
  mkdir -p "$w"
  log "kueue: go install sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
  # go install pkg@version builds with Kueue's own go.mod (its exact dependency versions).
  (cd "$w" && GOFLAGS=-buildvcs=false GOBIN="$w" go install -trimpath \
    -ldflags "-s -w -X $v.GitVersion=$KUEUE_VERSION -X $v.BuildDate=$BUILD_DATE" \
    "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION")
  install_binary "$w/kueue" kueue "$KUEUE_VERSION"
}

# Kueue's CRDs and webhook manifests, from the module zip in the Go module cache.
kueue_manifests() {
  local out="$CACHE/kueue-$KUEUE_VERSION"
  if [[ -f "$out/.complete" ]]; then
    log "kueue manifests $KUEUE_VERSION: cached ($out)"
    return 0
  fi
  local dir
  dir="$(cd "$SRC" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" \
    | sed -n 's|^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$|\1|p')"
  [[ -d "$dir/config/components/crd/bases" ]] || die "no CRDs in the Kueue module at '$dir'"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp/crds" "$out.tmp/webhook"
  cp "$dir"/config/components/crd/bases/*.yaml "$out.tmp/crds/"
  cp "$dir/config/components/webhook/manifests.yaml" "$out.tmp/webhook/manifests.yaml"
  chmod -R u+w "$out.tmp"
  touch "$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "kueue manifests $KUEUE_VERSION: copied $(ls "$out/crds" | wc -l) CRDs and the webhook manifests to $out"
}

write_manifest() {
  local tmp="$CACHE/controlplane.json.tmp.$$" extra=""
  if [[ "${QM_CONTROLPLANE_EXTRA:-1}" == 1 ]]; then
    extra=$(printf ',\n  "kube_controller_manager": "%s",\n  "kube_scheduler": "%s",\n  "kwok": "%s",\n  "kwok_stages": "%s"' \
      "$BIN/kube-controller-manager-$K8S_VERSION/kube-controller-manager" \
      "$BIN/kube-scheduler-$K8S_VERSION/kube-scheduler" "$BIN/kwok-$KWOK_VERSION/kwok" \
      "$CACHE/kwok-$KWOK_VERSION/stages")
  fi
  cat >"$tmp" <<EOF
{
  "versions": {"kubernetes": "$K8S_VERSION", "etcd": "$ETCD_VERSION", "kueue": "$KUEUE_VERSION"},
  "etcd": "$BIN/etcd-$ETCD_VERSION/etcd",
  "kube_apiserver": "$BIN/kube-apiserver-$K8S_VERSION/kube-apiserver",
  "kueue": "$BIN/kueue-$KUEUE_VERSION/kueue",
  "kueue_crds": "$CACHE/kueue-$KUEUE_VERSION/crds",
  "kueue_webhooks": "$CACHE/kueue-$KUEUE_VERSION/webhook/manifests.yaml"$extra
}
EOF
  mv -f "$tmp" "$CACHE/controlplane.json"
}

main() {
  mkdir -p "$SRC" "$BIN"
  log "cache: $CACHE; kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kueue $KUEUE_VERSION; $(go version)"
  local only="${1:-all}"
  case "$only" in
    all | etcd) timed etcd "$ETCD_VERSION" build_etcd ;;&
    all | kueue) timed kueue "$KUEUE_VERSION" build_kueue; kueue_manifests ;;&
    all | kube-apiserver) timed kube-apiserver "$K8S_VERSION" build_kube_apiserver ;;&
    all)
      if [[ "${QM_CONTROLPLANE_EXTRA:-1}" == 1 ]]; then
        timed kube-controller-manager "$K8S_VERSION" build_kube_controller_manager
        timed kube-scheduler "$K8S_VERSION" build_kube_scheduler
        timed kwok "$KWOK_VERSION" build_kwok
        kwok_stages
      fi
      ;;
    etcd | kueue | kube-apiserver) ;;
    *) die "usage: build.sh [all|etcd|kueue|kube-apiserver]" ;;
  esac
  if [[ -x "$BIN/etcd-$ETCD_VERSION/etcd" && -x "$BIN/kube-apiserver-$K8S_VERSION/kube-apiserver" \
    && -x "$BIN/kueue-$KUEUE_VERSION/kueue" && -f "$CACHE/kueue-$KUEUE_VERSION/.complete" ]]; then
    write_manifest
    log "ready: $CACHE/controlplane.json"
  fi
}

main "$@"
