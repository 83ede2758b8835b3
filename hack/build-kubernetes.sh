#!/usr/bin/env bash
# Builds Kubernetes programs from Go modules (never downloaded binaries), at the versions that
# hack/kubernetes/go.mod pins, into a cache outside the clone keyed by those versions:
#   hack/build-kubernetes.sh kube-apiserver etcd kubectl
# Already built programs are reused. Prints the cache directory on its last line.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
module="$root/hack/kubernetes"
version=$(awk '$1=="k8s.io/kubernetes" {print $2}' "$module/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$module/go.mod")
cache="${MLKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlkube}/kubernetes-$version-etcd-$etcd_version"

package() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet|kubeadm|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    *) echo "build-kubernetes.sh: unknown program $1" >&2; return 1 ;;
  esac
}

minor=${version#v1.}; minor=${minor%%.*}
# Without these the programs report v0.0.0-master, and kubeadm refuses to work with them.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done

mkdir -p "$cache"
for name in "$@"; do
  [ -x "$cache/$name" ] && continue
  pkg=$(package "$name")
  what=$version; [ "$name" = etcd ] && what=$etcd_version
  echo "building $name $what (cold: minutes; cached in $cache)" >&2
  start=$SECONDS
  (cd "$module" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$cache/$name.tmp" "$pkg")
  mv "$cache/$name.tmp" "$cache/$name"
  echo "built $name in $((SECONDS - start))s" >&2
done
echo "$cache"
