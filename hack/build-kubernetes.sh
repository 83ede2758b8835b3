#!/usr/bin/env bash
# Builds Kubernetes programs from Go modules (never downloaded binaries), at the versions that
# hack/kubernetes/go.mod and hack/coredns/go.mod pin, into a cache outside the clone:
#   hack/build-kubernetes.sh kube-apiserver etcd kubectl
# prints one absolute path per program, in order. A program already built at its version is
# reused, so a fresh clone on a machine that built them once pays nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}/bin"
pinned() { awk -v m="$2" '$1==m {print $2; exit}' "$root/hack/$1/go.mod"; }
k8s_version=$(pinned kubernetes k8s.io/kubernetes)

# module, package and version of a program
locate() {
  case $1 in
    etcd) echo "kubernetes go.etcd.io/etcd/server/v3 $(pinned kubernetes go.etcd.io/etcd/server/v3)" ;;
    coredns) echo "coredns github.com/coredns/coredns $(pinned coredns github.com/coredns/coredns)" ;;
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
  # One build of a program at a time, however many scripts ask for it at once.
  exec {lock}>"$out.lock"
  flock "$lock"
  if [ ! -x "$out" ]; then
    echo "building $name $version (cold: minutes; cached in $cache)" >&2
    start=$SECONDS
    (cd "$root/hack/$module" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "built $name in $((SECONDS - start))s" >&2
  fi
  exec {lock}>&-
  echo "$out"
done
