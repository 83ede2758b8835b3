#!/usr/bin/env bash
# Builds Kubernetes programs, the registry devctl runs beside the nodes, and Kueue's manager
# (devctl up --kueue), from Go modules (never downloaded binaries), at the versions that
# hack/kubernetes/go.mod, hack/coredns/go.mod, hack/flannel*/go.mod, hack/registry/go.mod and
# hack/kueue/go.mod pin, into a cache outside the clone:
#   hack/build-kubernetes.sh kube-apiserver etcd kubectl
# prints one absolute path per program, in order. A program already built at its version is
# reused, so a fresh clone on a machine that built them once pays nothing. While one builds
# (minutes, cold), stderr gets a line every 15 s: how long so far and the package it compiles.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/hack/progress.sh"
log=""
trap 'progress_stop; [ -z "$log" ] || rm -f "$log"' EXIT
cache="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}/bin"
pinned() { awk -v m="$2" '$1==m {print $2; exit}' "$root/hack/$1/go.mod"; }
k8s_version=$(pinned kubernetes k8s.io/kubernetes)

# module, package and version of a program
locate() {
  case $1 in
    etcd) echo "kubernetes go.etcd.io/etcd/server/v3 $(pinned kubernetes go.etcd.io/etcd/server/v3)" ;;
    coredns) echo "coredns github.com/coredns/coredns $(pinned coredns github.com/coredns/coredns)" ;;
    flanneld) echo "flannel github.com/flannel-io/flannel $(pinned flannel github.com/flannel-io/flannel)" ;;
    registry) echo "registry github.com/distribution/distribution/v3/cmd/registry $(pinned registry github.com/distribution/distribution/v3)" ;;
    kueue) echo "kueue sigs.k8s.io/kueue/cmd/kueue $(pinned kueue sigs.k8s.io/kueue)" ;;
    flannel-cni) echo "flannel-cni github.com/containernetworking/plugins/plugins/meta/flannel $(pinned flannel-cni github.com/containernetworking/plugins)" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet|kubeadm|kubectl)
      echo "kubernetes k8s.io/kubernetes/cmd/$1 $k8s_version" ;;
    *) echo "build-kubernetes.sh: unknown program $1" >&2; return 1 ;;
  esac
}

minor=${k8s_version#v1.}; minor=${minor%%.*}
# Without these the programs report v0.0.0-master, and kubeadm refuses to work with them.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

mkdir -p "$cache"
for name in "$@"; do
  read -r module pkg version < <(locate "$name")
  out="$cache/$name-$version"
  flags=$ldflags cgo=0
  if [ "$name" = flanneld ]; then
    # flannel's udp backend is C; it runs on the node's Debian base, the glibc of this machine's.
    flags+=" -X github.com/flannel-io/flannel/pkg/version.Version=$version" cgo=1
  fi
  if [ "$name" = kueue ]; then
    # Kueue's own version, as its Makefile sets it; not Kubernetes': its libraries are 0.35.
    flags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version"
  fi
  # One build of a program at a time, however many scripts ask for it at once.
  exec {lock}>"$out.lock"
  if ! flock -n "$lock"; then
    progress_start "waiting for another build of $name $version"
    flock "$lock"
    progress_end
  fi
  if [ ! -x "$out" ]; then
    echo "building $name $version (cold: minutes; cached in $cache)" >&2
    # -v names each package as it starts compiling: the progress line tells the latest. The log
    # keeps go's messages, shown without those names when the build fails.
    log=$(mktemp "${TMPDIR:-/tmp}/build-kubernetes.XXXXXX")
    progress_start "building $name $version" "$log"
    (cd "$root/hack/$module" && CGO_ENABLED=$cgo GOFLAGS=-mod=readonly go build -v -trimpath -ldflags "$flags" -o "$out.tmp" "$pkg") 2> "$log" \
      || { status=$?; grep -v -E '^[^[:space:]:#]+$' "$log" >&2; exit "$status"; }
    progress_end
    rm -f "$log"
    log=""
    mv "$out.tmp" "$out"
  fi
  exec {lock}>&-
  echo "$out"
done
